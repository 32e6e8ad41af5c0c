"""pytest plugin: the `ads_broker` fixture (filled in with the embedded broker)."""
