"""Generate `src/ads/protocol/messages.py` from Kafka's message schema files.

Usage: python tools/gen_protocol.py SCHEMA_DIR OUTPUT_FILE [--newer JAR API[,API...]]
       python tools/gen_protocol.py --metadata SCHEMA_DIR OUTPUT_FILE

SCHEMA_DIR is a folder of Kafka message definitions (JSON with // comments), such as
`clients/src/main/resources/common/message` of a Kafka source checkout; its `*.json` files
(requests, responses, headers, data) and those of an `internal-topics/` subfolder, if
present, are read. `--newer` takes the named APIs' request and response schemas from a
kafka-clients jar instead (its `common/message/` resources): APIs whose final versions are
newer than SCHEMA_DIR's drafts, moved one API at a time so that the others keep theirs.

The output defines one class per schema and per nested struct, with the
field table the codec compiles its encoders and decoders from, plus `ApiKey` and `API_KEYS`.
The schemas' descriptive texts are not copied.

`--metadata` reads a folder of KRaft metadata record schemas instead (`"type":
"metadata"`, such as `metadata/src/main/resources/common/metadata` of a Kafka checkout, or
the `common/metadata/` resources of a kafka-metadata jar) and writes the record classes with
`METADATA_RECORDS`, the classes by record type, for `ads.metadata.kraft_records`.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_VERSION = 0x7FFF
PRIMITIVES = {
    "bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64",
    "string", "bytes", "records", "uuid",
}
INTS = {"int8", "int16", "int32", "int64", "uint16", "uint32"}
# The generated header classes get Kafka's "Data" suffix so that the codec's own
# `RequestHeader` value type keeps the plain name.
RENAMES = {"RequestHeader": "RequestHeaderData", "ResponseHeader": "ResponseHeaderData"}


class SchemaError(Exception):
    pass


class Code(str):
    """A default written into the output verbatim (a name), not as a literal."""


MISSING = Code("MISSING")
ZERO_UUID = Code("ZERO_UUID")


def strip_comments(text: str) -> str:
    """JSON with `//` comments (outside strings) removed."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def parse_versions(spec: str | None) -> tuple[int, int]:
    """Kafka version range ("0+", "1-3", "2", "none") as inclusive (lo, hi); none = (1, 0)."""
    if spec is None or spec == "none":
        return (1, 0)
    spec = spec.strip()
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX_VERSION)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def upper_snake(name: str) -> str:
    return snake(name).upper()


@dataclass
class FieldModel:
    name: str  # snake_case attribute
    kind: str  # primitive, "struct" or "array"
    versions: tuple[int, int]
    nullable: tuple[int, int]
    tag: int | None
    tagged: tuple[int, int]
    default: Any  # python value, None, or a Code
    element: str | None = None
    struct: StructModel | None = None
    flexible: tuple[int, int] = (0, MAX_VERSION)


@dataclass
class StructModel:
    name: str
    qualname: str
    fields: list[FieldModel] = field(default_factory=list)
    children: list[StructModel] = field(default_factory=list)  # defined inside this class
    doc: str = ""


@dataclass
class MessageModel:
    name: str
    schema_name: str
    type: str
    api_key: int | None
    valid: tuple[int, int]
    flexible: int | None
    unstable_latest: bool
    root: StructModel


class Builder:
    """Turns one schema's JSON into a MessageModel, resolving struct references."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.name = RENAMES.get(schema["name"], schema["name"])
        self.structs: dict[str, StructModel] = {}
        self.pending: list[tuple[FieldModel, str]] = []

    def build(self) -> MessageModel:
        s = self.schema
        root = StructModel(self.name, self.name)
        for common in s.get("commonStructs", []):
            child = self.new_struct(common["name"], root, f"shared struct of {self.name}")
            self.fill(child, common["fields"])
        self.fill(root, s["fields"])
        for f, ref in self.pending:
            if ref not in self.structs:
                raise SchemaError(f"{self.name}: unknown struct type {ref}")
            f.struct = self.structs[ref]
        valid = parse_versions(s["validVersions"])
        flex = parse_versions(s.get("flexibleVersions"))
        flexible = flex[0] if flex[0] <= flex[1] else None
        kind = s["type"]
        label = {"header": "header schema", "data": "record schema"}.get(kind, "API key")
        what = f"API key {s['apiKey']}" if "apiKey" in s else label
        flex_text = f", flexible from {flexible}" if flexible is not None else ""
        root.doc = f"{s['name']}: {what}, versions {_vtext(valid)}{flex_text}."
        return MessageModel(
            name=self.name, schema_name=s["name"], type=kind, api_key=s.get("apiKey"),
            valid=valid, flexible=flexible,
            unstable_latest=bool(s.get("latestVersionUnstable", False)), root=root)

    def new_struct(self, name: str, parent: StructModel, doc: str) -> StructModel:
        if name in self.structs:
            raise SchemaError(f"{self.name}: struct {name} defined twice")
        model = StructModel(name, f"{parent.qualname}.{name}", doc=doc)
        self.structs[name] = model
        parent.children.append(model)
        return model

    def fill(self, struct: StructModel, fields: list[dict[str, Any]]) -> None:
        seen: set[str] = set()
        for spec in fields:
            f = self.field(struct, spec)
            if f.name in seen:
                raise SchemaError(f"{self.name}: duplicate field {f.name}")
            seen.add(f.name)
            struct.fields.append(f)

    def field(self, parent: StructModel, spec: dict[str, Any]) -> FieldModel:
        typ: str = spec["type"]
        tagged = parse_versions(spec.get("taggedVersions"))
        versions = parse_versions(spec.get("versions", spec.get("taggedVersions")))
        nullable = parse_versions(spec.get("nullableVersions"))
        f = FieldModel(
            name=snake(spec["name"]), kind="", versions=versions, nullable=nullable,
            tag=spec.get("tag"), tagged=tagged, default=None)
        if "flexibleVersions" in spec:
            f.flexible = parse_versions(spec["flexibleVersions"])
        struct_name: str | None = None
        if typ.startswith("[]"):
            f.kind = "array"
            elem = typ[2:]
            if elem in PRIMITIVES:
                f.element = elem
            else:
                f.element = "struct"
                struct_name = elem
        elif typ in PRIMITIVES:
            f.kind = typ
        else:
            f.kind = "struct"
            struct_name = typ
        if struct_name is not None:
            if "fields" in spec:
                child = self.new_struct(
                    struct_name, parent, f"Struct of {parent.qualname}.{f.name}.")
                self.fill(child, spec["fields"])
            self.pending.append((f, struct_name))
        f.default = self.default(f, spec)
        return f

    def default(self, f: FieldModel, spec: dict[str, Any]) -> Any:
        raw = spec.get("default")
        nullable_any = f.nullable[0] <= f.nullable[1]
        if raw == "null":
            if not nullable_any:
                raise SchemaError(f"{self.name}.{f.name}: null default on a non-nullable field")
            return None
        if f.kind in ("array", "struct"):
            return MISSING
        if f.kind == "records":
            return None
        if f.kind == "bytes":
            return b""
        if f.kind == "uuid":
            if raw is not None:
                raise SchemaError(f"{self.name}.{f.name}: uuid defaults are not supported")
            return ZERO_UUID
        if f.kind == "string":
            return "" if raw is None else str(raw)
        if f.kind == "bool":
            return raw in (True, "true")
        if f.kind == "float64":
            return float(raw) if raw is not None else 0.0
        if f.kind in INTS:
            return int(raw, 0) if isinstance(raw, str) else int(raw or 0)
        raise SchemaError(f"{self.name}.{f.name}: unknown type {f.kind}")


def _vtext(rng: tuple[int, int]) -> str:
    return str(rng[0]) if rng[0] == rng[1] else f"{rng[0]}-{rng[1]}"


def load_schemas(schema_dir: Path, newer: tuple[Path, list[str]] | None = None
                 ) -> list[MessageModel]:
    """The schemas of `schema_dir`; `newer`: a kafka-clients jar and the APIs whose request
    and response schemas come from it."""
    paths = sorted(schema_dir.glob("*.json"))
    internal = schema_dir / "internal-topics"
    if internal.is_dir():
        paths += sorted(internal.glob("*.json"))
    texts = {path.name: path.read_text(encoding="utf-8") for path in paths}
    if newer is not None:
        jar, apis = newer
        with zipfile.ZipFile(jar) as zf:
            for api in apis:
                for kind in ("Request", "Response"):
                    name = f"{api}{kind}.json"
                    texts[name] = zf.read(f"common/message/{name}").decode("utf-8")
    models = []
    for text in texts.values():
        schema = json.loads(strip_comments(text))
        models.append(Builder(schema).build())
    order = {"request": 0, "response": 0, "header": 1, "data": 2}
    models.sort(key=lambda m: (order.get(m.type, 3), m.api_key if m.api_key is not None else 0,
                               m.type, m.name))
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise SchemaError("duplicate schema names")
    return models


# -- emitting


def py_type(f: FieldModel) -> str:
    nullable = f.nullable[0] <= f.nullable[1]
    if f.kind == "array":
        assert f.element is not None
        if f.element == "struct":
            assert f.struct is not None
            inner = f.struct.qualname
        else:
            inner = _scalar_type(f.element)
        text = f"list[{inner}]"
    elif f.kind == "struct":
        assert f.struct is not None
        text = f.struct.qualname
    else:
        text = _scalar_type(f.kind)
    if text == "Any":
        return text
    return f"{text} | None" if nullable or f.default is None else text


def _scalar_type(kind: str) -> str:
    if kind in INTS:
        return "int"
    return {"bool": "bool", "float64": "float", "string": "str", "uuid": "uuid.UUID",
            "bytes": "bytes | bytearray | memoryview", "records": "Any"}[kind]


def py_default(f: FieldModel) -> str:
    if isinstance(f.default, Code):
        return str(f.default)
    if isinstance(f.default, str):
        return json.dumps(f.default)
    return repr(f.default)


def emit_struct(out: list[str], s: StructModel, depth: int, msg: MessageModel | None,
                flexible: int | None) -> None:
    ind = "    " * depth
    base = "Message" if msg is not None else "Struct"
    out.append(f"{ind}class {s.name}({base}):")
    inner = ind + "    "
    out.append(f'{inner}"""{s.doc}"""')
    out.append("")
    slots = ", ".join(f'"{f.name}"' for f in s.fields)
    if len(s.fields) == 1:
        slots += ","
    out.append(f"{inner}__slots__ = ({slots})")
    out.append("")
    if msg is not None:
        out.append(f"{inner}API_KEY = {msg.api_key!r}")
        out.append(f"{inner}VALID_VERSIONS = {msg.valid!r}")
        out.append(f"{inner}FLEXIBLE_VERSIONS = {msg.flexible!r}")
        if msg.unstable_latest:
            out.append(f"{inner}LATEST_VERSION_UNSTABLE = True")
    out.append(f"{inner}_FLEXIBLE = {flexible!r}")
    out.append("")
    for f in s.fields:
        out.append(f"{inner}{f.name}: {py_type(f)}")
    if s.fields:
        out.append("")
    for child in s.children:
        emit_struct(out, child, depth + 1, None, flexible)
        out.append("")
    if not s.fields:
        out.append(f"{inner}def __init__(self) -> None:")
        out.append(f"{inner}    pass")
        return
    out.append(f"{inner}def __init__(")
    out.append(f"{inner}    self,")
    out.append(f"{inner}    *,")
    for f in s.fields:
        out.append(f"{inner}    {f.name}: {py_type(f)} = {py_default(f)},")
    out.append(f"{inner}) -> None:")
    for f in s.fields:
        if f.default is MISSING and f.kind == "array":
            out.append(f"{inner}    self.{f.name} = [] if {f.name} is MISSING else {f.name}")
        elif f.default is MISSING:
            assert f.struct is not None
            out.append(f"{inner}    self.{f.name} = ({f.struct.qualname}() if {f.name} is MISSING"
                       f" else {f.name})")
        else:
            out.append(f"{inner}    self.{f.name} = {f.name}")


def field_spec(f: FieldModel) -> str:
    args = [json.dumps(f.name), json.dumps(f.kind), repr(f.versions)]
    if f.nullable[0] <= f.nullable[1]:
        args.append(f"nullable={f.nullable!r}")
    if f.tag is not None:
        args.append(f"tag={f.tag}")
        args.append(f"tagged={f.tagged!r}")
    if f.default is not None:
        args.append(f"default={py_default(f)}")
    if f.struct is not None:
        args.append(f"struct={f.struct.qualname}")
    if f.element is not None:
        args.append(f"element={json.dumps(f.element)}")
    if f.flexible != (0, MAX_VERSION):
        args.append(f"flexible={f.flexible!r}")
    return f"_f({', '.join(args)}),"


def emit_fields(out: list[str], s: StructModel) -> None:
    if s.fields:
        out.append(f"{s.qualname}._FIELDS = (")
        out.extend(f"    {field_spec(f)}" for f in s.fields)
        out.append(")")
    for child in s.children:
        emit_fields(out, child)


def _emit_classes(out: list[str], models: list[MessageModel]) -> None:
    for m in models:
        out.append("")
        emit_struct(out, m.root, 0, m, m.flexible)
        out.append("")
    out.append("")
    for m in models:
        emit_fields(out, m.root)
    out.append("")
    out.append("")


def generate(models: list[MessageModel], source_label: str) -> str:
    out = [
        f"# generated by tools/gen_protocol.py from {source_label}; do not edit",
        "# ruff: noqa: E501",
        '"""Kafka message types: one class per request, response, header and record schema.',
        "",
        "Nested structs are classes inside their message (`ProduceRequest.TopicProduceData`).",
        "Each class lists its fields in `_FIELDS`, from which `compiler.py` builds the",
        "encoders and decoders; wire layouts are described in `types.py` and `compiler.py`.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import uuid",
        "from enum import IntEnum",
        "from typing import Any",
        "",
        "from ads.protocol.base import Message, Struct",
        "from ads.protocol.schema import MISSING, Field",
        "from ads.protocol.types import ZERO_UUID",
        "",
        "_f = Field",
        "",
    ]
    _emit_classes(out, models)
    requests = {m.api_key: m for m in models if m.type == "request"}
    responses = {m.api_key: m for m in models if m.type == "response"}
    if set(requests) != set(responses):
        raise SchemaError("every request needs a response with the same API key")
    out.append("class ApiKey(IntEnum):")
    api_names = {}
    for key in sorted(k for k in requests if k is not None):
        base = requests[key].name.removesuffix("Request")
        api_names[key] = base
        out.append(f"    {upper_snake(base)} = {key}")
    out.append("")
    out.append("")
    out.append("API_KEYS: dict[int, tuple[str, type[Message], type[Message]]] = {")
    for key, base in api_names.items():
        out.append(f"    {key}: ({json.dumps(base)}, {requests[key].name}, {responses[key].name}),")
    out.append("}")
    out.append("")
    out.append("MESSAGES: dict[str, type[Message]] = {")
    for m in models:
        out.append(f"    {json.dumps(m.name)}: {m.name},")
    out.append("}")
    out.append("")
    out.append("__all__ = [")
    out.append('    "API_KEYS",')
    out.append('    "MESSAGES",')
    out.append('    "ApiKey",')
    out.extend(f'    "{m.name}",' for m in sorted(models, key=lambda m: m.name))
    out.append("]")
    return "\n".join(out) + "\n"


def generate_metadata_records(models: list[MessageModel], source_label: str) -> str:
    """The KRaft metadata record classes and `METADATA_RECORDS`, by record type."""
    if any(m.type != "metadata" or m.api_key is None for m in models):
        raise SchemaError("--metadata reads only metadata record schemas")
    keys = [m.api_key for m in models]
    if len(set(keys)) != len(keys):
        raise SchemaError("two metadata record schemas share a type")
    out = [
        f"# generated by tools/gen_protocol.py --metadata from {source_label}; do not edit",
        "# ruff: noqa: E501",
        '"""KRaft metadata record types: one class per record schema of `__cluster_metadata`.',
        "",
        "A record's value is the frame version (unsigned varint, 1), the record type (its",
        "`API_KEY`, unsigned varint), the record version (unsigned varint), then the record",
        "encoded at that version; `ads.metadata.kraft_log` reads that frame.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import uuid",
        "",
        "from ads.protocol.base import Message, Struct",
        "from ads.protocol.schema import MISSING, Field",
        "from ads.protocol.types import ZERO_UUID",
        "",
        "_f = Field",
        "",
    ]
    _emit_classes(out, models)
    out.append("METADATA_RECORDS: dict[int, type[Message]] = {")
    out.extend(f"    {m.api_key}: {m.name}," for m in sorted(models, key=lambda m: m.api_key or 0))
    out.append("}")
    out.append("")
    out.append("__all__ = [")
    out.append('    "METADATA_RECORDS",')
    out.extend(f'    "{m.name}",' for m in sorted(models, key=lambda m: m.name))
    out.append("]")
    return "\n".join(out) + "\n"


def source_label(schema_dir: str, newer: tuple[Path, list[str]] | None) -> str:
    """What the output's first line names as its source."""
    if newer is None:
        return schema_dir
    return f"{schema_dir} and {newer[0].name} ({', '.join(newer[1])})"


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "--metadata":
        models = load_schemas(Path(argv[2]))
        Path(argv[3]).write_text(generate_metadata_records(models, argv[2]), encoding="utf-8")
        print(f"wrote {argv[3]}: {len(models)} metadata record schemas")
        return 0
    newer: tuple[Path, list[str]] | None = None
    if len(argv) == 6 and argv[3] == "--newer":
        newer = (Path(argv[4]), argv[5].split(","))
    elif len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    schema_dir = Path(argv[1])
    output = Path(argv[2])
    models = load_schemas(schema_dir, newer)
    text = generate(models, source_label(argv[1], newer))
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output}: {len(models)} schemas")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
