"""tools/gen_protocol.py: the committed messages.py is its output, and it handles the schema
language (comments, common structs, tagged and nullable structs, field-level flexibility)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT.parent / "shared" / "kafka-protocol"
MESSAGES = ROOT / "src" / "ads" / "protocol" / "messages.py"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


gen = _load("gen_protocol", ROOT / "tools" / "gen_protocol.py")


@pytest.mark.skipif(not SCHEMAS.is_dir(), reason="Kafka schema folder not available")
def test_protocol_generator_output_is_committed() -> None:
    committed = MESSAGES.read_text(encoding="utf-8")
    label = committed.splitlines()[0].split(" from ", 1)[1].split("; do not edit")[0]
    assert gen.generate(gen.load_schemas(SCHEMAS), label) == committed


def test_protocol_generator_names() -> None:
    assert gen.snake("TopicName") == "topic_name"
    assert gen.snake("ProducerId") == "producer_id"
    assert gen.snake("ThrottleTimeMs") == "throttle_time_ms"
    assert gen.snake("MaxWaitMs") == "max_wait_ms"
    assert gen.snake("leaderEpoch") == "leader_epoch"
    assert gen.snake("ISRChange") == "isr_change"
    assert gen.upper_snake("LeaderAndIsr") == "LEADER_AND_ISR"
    assert gen.parse_versions("3+") == (3, 0x7FFF)
    assert gen.parse_versions("0-12") == (0, 12)
    assert gen.parse_versions("2") == (2, 2)
    assert gen.parse_versions("none") == (1, 0)


def test_protocol_generator_strips_comments_outside_strings() -> None:
    text = '{"a": "http://x", // gone\n "b": 1} // end'
    assert gen.strip_comments(text) == '{"a": "http://x", \n "b": 1} '


SCHEMA_REQ = """
// A request for the generator's own test.
{
  "apiKey": 500, "type": "request", "name": "WidgetRequest",
  "validVersions": "0-2", "flexibleVersions": "1+",
  "fields": [
    { "name": "WidgetId", "type": "int32", "versions": "0+", "default": "0x7f",
      "about": "Has // inside a string." },
    { "name": "Label", "type": "string", "versions": "0+", "nullableVersions": "1+",
      "default": "null" },
    { "name": "Raw", "type": "string", "versions": "0+", "flexibleVersions": "none" },
    { "name": "Parts", "type": "[]Part", "versions": "0+", "fields": [
      { "name": "Index", "type": "int16", "versions": "0+" },
      { "name": "Owner", "type": "Owner", "versions": "2+", "nullableVersions": "2+",
        "default": "null" }
    ]},
    { "name": "Extra", "type": "Owner", "taggedVersions": "1+", "tag": 0 },
    { "name": "Ids", "type": "[]uuid", "versions": "2+" },
    { "name": "Score", "type": "float64", "versions": "0+", "default": "1.5" },
    { "name": "Enabled", "type": "bool", "versions": "0+", "default": "true" }
  ],
  "commonStructs": [
    { "name": "Owner", "versions": "0+", "fields": [
      { "name": "OwnerName", "type": "string", "versions": "0+" },
      { "name": "Epoch", "type": "int32", "versions": "0+", "default": -1 }
    ]}
  ]
}
"""

SCHEMA_RESP = """
{ "apiKey": 500, "type": "response", "name": "WidgetResponse",
  "validVersions": "0-2", "flexibleVersions": "1+",
  "fields": [ { "name": "ErrorCode", "type": "int16", "versions": "0+" } ] }
"""


def test_protocol_generator_synthetic_schema(tmp_path: Path) -> None:
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "WidgetRequest.json").write_text(textwrap.dedent(SCHEMA_REQ))
    (schemas / "WidgetResponse.json").write_text(SCHEMA_RESP)
    out = tmp_path / "widgets.py"
    assert gen.main(["gen_protocol.py", str(schemas), str(out)]) == 0
    mod = _load("widgets_generated", out)
    W = mod.WidgetRequest
    assert mod.ApiKey.WIDGET == 500
    assert mod.API_KEYS[500] == ("Widget", W, mod.WidgetResponse)
    assert (W.VALID_VERSIONS, W.FLEXIBLE_VERSIONS) == ((0, 2), 1)
    w = W()
    assert (w.widget_id, w.label, w.raw, w.parts, w.ids, w.score, w.enabled) == (
        127, None, "", [], [], 1.5, True)
    assert w.extra == W.Owner(owner_name="", epoch=-1)
    assert W.Part().owner is None
    w = W(widget_id=1, label="l", raw="r", ids=[], parts=[
        W.Part(index=1, owner=W.Owner(owner_name="o", epoch=3)), W.Part(index=2)],
        extra=W.Owner(owner_name="x"))
    for version in (0, 1, 2):
        data = w.encode(version)
        back = W.decode(data, version)
        assert back.parts[0].index == 1
        assert back.encode(version) == data
    assert W.decode(w.encode(2), 2) == w
    assert W.decode(w.encode(1), 1).extra.owner_name == "x"
    assert W.decode(w.encode(0), 0).extra.owner_name == ""  # tagged fields need v1+
    # "Raw" keeps the int16 length even in flexible versions.
    assert b"\x00\x01r" in w.encode(1)
    assert b"\x02l" in w.encode(1) and b"\x00\x01l" in w.encode(0)
