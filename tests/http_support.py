"""HTTP requests to a broker's ops listener (or any test server): an error status is an
answer, not an exception, and every answer is read and closed at once."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families


class HttpAnswer(NamedTuple):
    status: int
    content_type: str
    body: str


def http_call(url: str, *, method: str = "GET", data: bytes | None = None,
              headers: dict[str, str] | None = None, timeout_s: float = 10) -> HttpAnswer:
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as r:
            return HttpAnswer(r.status, r.headers.get("Content-Type", ""), r.read().decode())
    except urllib.error.HTTPError as e:
        # Closed here: an HTTPError left to the garbage collector has its socket reported
        # unclosed (ResourceWarning, an error in the suite) in whichever test runs then.
        with e:
            return HttpAnswer(e.code, e.headers.get("Content-Type", ""), e.read().decode())


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def metric_samples(base_url: str) -> Samples:
    """`/metrics` of the ops listener at `base_url`: each sample by name and sorted labels."""
    status, ctype, body = http_call(base_url + "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}
