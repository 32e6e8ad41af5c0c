"""The broker's HTTP endpoints on `http.listener`: Prometheus metrics, health checks and the
read-only web console (docs/operations.md).

`app.py` routes requests and owns the sampler, `collector.py` turns the broker's state
into metric families, `observed.py` takes the snapshots both read, `samples.py` keeps the
last hour of rates and lag for the console's plots, `console.py` renders the pages and
`records_view.py` reads a partition's records for them. The server itself is
`ads.net.http`, on the broker's event loop.
"""
