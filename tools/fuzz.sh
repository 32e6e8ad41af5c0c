#!/bin/sh
# Runs the fuzz properties with many more examples than the test suite does, from a random
# seed each run (the suite uses a fixed one): request decoders of every API and version,
# the record-batch parser and its checks, and hostile frames against a broker process while
# a real client uses it. A failure prints the frame and a @reproduce_failure blob.
#
#   tools/fuzz.sh                         # 5000 examples per property
#   ADS_FUZZ_EXAMPLES=50000 tools/fuzz.sh # more
#   tools/fuzz.sh -k broker               # extra pytest arguments pick the properties
set -eu
cd "$(dirname "$0")/.."
ADS_FUZZ_EXAMPLES="${ADS_FUZZ_EXAMPLES:-5000}"
export ADS_FUZZ_EXAMPLES
exec .venv/bin/python -m pytest -q -x -p no:randomly --timeout 0 \
  tests/protocol/test_protocol_fuzz.py tests/records/test_records_fuzz.py \
  tests/broker/test_fuzz_broker.py "$@"
