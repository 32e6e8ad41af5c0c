"""Benchmarks: client-side tools that work against any Kafka-protocol broker (`produce`,
`consume`, `e2e`) and the suite that runs them against ADS and librdkafka's mock broker side
by side (`suite`, with `mock`, `stats` and `report`). The command line is `ads bench`."""
