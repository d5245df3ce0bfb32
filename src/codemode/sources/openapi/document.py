"""An OpenAPI document, read once at registration, and its schemas as JSON Schema 2020-12.

A document comes from a file, an `http(s)` URL or a dict, as JSON or YAML. Its
references are followed by rules that keep it to what it came from: a local `#/...`
always; another file only under the document's own folder; another URL only on the
document's own origin; nothing else (a dict may hold local references only). A schema is
rewritten once per direction (`Schemas`): OpenAPI 3.0's own words (`nullable`, boolean
`exclusiveMinimum`, `example`) become 2020-12's, and every referenced schema becomes one
`$defs` entry named after it, so a recursive type stays one recursive shape and each
operation carries just the definitions it reaches.

The pointer rules are a few lines here rather than `referencing`'s registry: its
retrieval would still need these rules, and the identity of each target (which names its
`$defs` entry) is not part of its public API.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import httpx2
import yaml

from codemode.sources.schema import SchemaError

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
"""The largest document (or referenced file) read."""
FETCH_SECONDS = 30.0
"""How long fetching a document over HTTP may take."""
_DEPTH = 200
"""How deep a schema may nest before it is refused."""


class SpecError(ValueError):
    """A document that cannot be read or used; the message says where and why."""


Direction = Literal["request", "response"]
"""Which way a schema's data goes: `readOnly` properties are not sent, `writeOnly` ones
are not returned."""


@dataclass(eq=False)
class Document:
    """A loaded document and where it came from, with the other documents it refers to."""

    root: Mapping[str, Any]
    uri: str
    """The document's own URI (`file://...`, `https://...`, or `dict:` for a dict)."""
    version: tuple[int, int]
    """The OpenAPI version (3, 0) or (3, 1)."""
    _others: dict[str, Any] = field(default_factory=dict)
    _found: dict[tuple[str, str], tuple[Any, str]] = field(default_factory=dict)
    """What each reference read in each document points at: a thousand operations refer
    to the same `owner` parameter."""

    @property
    def origin(self) -> str | None:
        """`scheme://host[:port]` of a document fetched over HTTP, else None."""
        parts = urlsplit(self.uri)
        return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") else None

    def lookup(self, base: str, ref: str) -> tuple[Any, str]:
        """What `ref`, read in the document at `base`, points at, and the URI of the
        document that holds it (which the target's own references are read in)."""
        found = self._found.get((base, ref))
        if found is None:
            document_uri, fragment = urldefrag(absolute(base, ref))
            content = self.root if document_uri == self.uri else self._other(document_uri, ref)
            found = self._found[base, ref] = (
                _pointer(content, unquote(fragment), ref),
                document_uri,
            )
        return found

    def _other(self, uri: str, ref: str) -> Any:
        if uri not in self._others:
            self._others[uri] = self._retrieve(uri, ref)
        return self._others[uri]

    def _retrieve(self, uri: str, ref: str) -> Any:
        """Another document, if the rules allow it (see the module docstring)."""
        own = urlsplit(self.uri)
        wanted = urlsplit(uri)
        if own.scheme == "file" and wanted.scheme == "file":
            folder = Path(unquote(own.path)).parent.resolve()
            path = Path(unquote(wanted.path)).resolve()
            if not path.is_relative_to(folder):
                raise SpecError(f"reference {ref!r} leaves the document's folder")
            return _parse(_read_file(path), str(path))
        if own.scheme in ("http", "https") and (wanted.scheme, wanted.netloc) == (
            own.scheme,
            own.netloc,
        ):
            return _parse(_fetch(uri), uri)
        if own.scheme == "dict":
            raise SpecError(f"reference {ref!r}: a document given as a dict has local ones only")
        raise SpecError(f"reference {ref!r} is not on the document's own origin")


def absolute(base: str, ref: str) -> str:
    """A reference as the URI of what it names, read in the document at `base` (a local
    `#/...` by string, as `dict:` is no base `urljoin` reads)."""
    return base.split("#")[0] + ref if ref.startswith("#") else urljoin(base, ref)


def load(spec: str | os.PathLike[str] | Mapping[str, Any]) -> Document:
    """The document `spec` names (a path, an `http(s)` URL) or is (a dict)."""
    if isinstance(spec, Mapping):
        root: Any = _plain(spec)
        uri = "dict:"
    elif isinstance(spec, str) and re.match(r"(?i)https?://", spec):
        root, uri = _parse(_fetch(spec), spec), spec
    elif isinstance(spec, str | os.PathLike):
        path = Path(spec).resolve()
        root, uri = _parse(_read_file(path), os.fspath(spec)), path.as_uri()
    else:
        raise SpecError(f"spec must be a path, a URL or a dict, not {type(spec).__name__}")
    if not isinstance(root, dict):
        raise SpecError("the document is not an object")
    version = root.get("openapi")
    found = re.fullmatch(r"3\.([01])(\.\d+)?(-.+)?", version) if isinstance(version, str) else None
    if found is None:
        if "swagger" in root:
            raise SpecError("Swagger 2.0 is not supported; convert it to OpenAPI 3")
        raise SpecError(f'"openapi" must be a 3.0 or 3.1 version, not {version!r}')
    if not isinstance(root.get("paths", {}), dict):
        raise SpecError('"paths" must be an object')
    return Document(root, uri, (3, int(found.group(1))))


def _read_file(path: Path) -> bytes:
    try:
        with path.open("rb") as file:
            data = file.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise SpecError(f"{path} is larger than {MAX_DOCUMENT_BYTES // 2**20} MiB")
    return data


def _fetch(url: str) -> bytes:
    """A document over HTTP, once: no redirect to another origin, a bounded size."""
    own = urlsplit(url)

    def same_origin(request: httpx2.Request) -> None:  # each redirect's hop too
        hop = urlsplit(str(request.url))
        if (hop.scheme, hop.netloc) != (own.scheme, own.netloc):
            raise SpecError(f"{url} redirects to another origin")

    try:
        with (
            httpx2.Client(
                timeout=FETCH_SECONDS,
                follow_redirects=True,
                trust_env=False,
                event_hooks={"request": [same_origin]},
            ) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code != 200:
                raise SpecError(f"{url} answered HTTP {response.status_code}")
            data = bytearray()
            ends = time.monotonic() + FETCH_SECONDS  # the whole document, not each read
            for chunk in response.iter_bytes():
                if time.monotonic() > ends:
                    raise SpecError(f"{url} did not arrive within {FETCH_SECONDS:g} s")
                data += chunk
                if len(data) > MAX_DOCUMENT_BYTES:
                    raise SpecError(f"{url} is larger than {MAX_DOCUMENT_BYTES // 2**20} MiB")
            return bytes(data)
    except httpx2.HTTPError as exc:
        raise SpecError(f"cannot fetch {url}: {type(exc).__name__}") from None


_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _loader(budget: list[int]) -> Any:
    """A safe YAML loader (no Python objects) whose merge keys (`<<: *base`) copy at most
    `budget` entries, and whose YAML 1.1 integers of another base than 10, 16, 8 or 2
    (`1:59:59`, base 60) or of more than 64 characters stay text: both cost time out
    of all proportion to the document's size."""

    class Loader(_BaseLoader):  # type: ignore[misc]
        def flatten_mapping(self, node: Any) -> None:
            super().flatten_mapping(node)
            budget[0] -= len(node.value)
            if budget[0] < 0:
                raise SpecError("the document repeats its parts (YAML merge keys) too often")

    def integer(loader: Any, node: Any) -> Any:
        text = loader.construct_scalar(node)
        if ":" in text or len(text) > 64:
            return text
        return yaml.SafeLoader.construct_yaml_int(loader, node)

    Loader.add_constructor("tag:yaml.org,2002:int", integer)
    return Loader


def _parse(data: bytes, where: str) -> Any:
    """JSON, or else YAML (which JSON also is, but JSON's own parser is much faster)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SpecError(f"{where} is not UTF-8 text") from None
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError:
            pass  # YAML's flow style also starts with "{"
        except RecursionError:
            raise SpecError(f"{where} nests too deeply") from None
    try:  # YAML's aliases may repeat a part: the copy is bounded by the text's size
        budget = [_NODES_PER_BYTE * len(data)]
        return _plain(yaml.load(text, Loader=_loader(budget)), budget=budget)
    except RecursionError:
        raise SpecError(f"{where} nests too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise SpecError(f"{where} is neither JSON nor YAML{at}") from None


_NODES_PER_BYTE = 4
"""How many values a document's text may become, by its size: more is an alias bomb."""


def _plain(value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """YAML's values as JSON's: keys as strings (`200:` is a status), dates as ISO text;
    SpecError past `budget` values (a YAML alias repeats a part as often as it is named)."""
    if depth > _DEPTH:
        raise SpecError("the document nests too deeply")
    if budget is not None:
        budget[0] -= 1
        if budget[0] < 0:
            raise SpecError("the document repeats its parts (YAML aliases) too often")
    if budget is None and depth < _DEPTH:  # a dict's: its text and numbers are kept as they are
        if isinstance(value, Mapping):
            return {
                str(k): v if type(v) in _LEAVES else _plain(v, depth + 1) for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [v if type(v) in _LEAVES else _plain(v, depth + 1) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1, budget) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1, budget) for v in value]
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


_LEAVES = frozenset((str, int, float, bool, type(None)))


def _pointer(content: Any, fragment: str, ref: str) -> Any:
    if fragment and not fragment.startswith("/"):
        raise SpecError(f"reference {ref!r}: only JSON pointers are supported")
    target = content
    for part in fragment.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        elif isinstance(target, Mapping) and part in target:
            target = target[part]
        else:
            raise SpecError(f"reference {ref!r} points at nothing")
    return target


def resolve(document: Document, node: Any, base: str) -> tuple[Any, str]:
    """A parameter, request body, response or path item with its `$ref`s followed."""
    for _ in range(_DEPTH):
        if not (isinstance(node, Mapping) and isinstance(node.get("$ref"), str)):
            return node, base
        node, base = document.lookup(base, node["$ref"])
    raise SpecError("references refer to each other in a loop")


_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")
_SCHEMA_ONES = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_DROPPED = frozenset(("discriminator", "xml", "externalDocs", "$schema", "$id", "$anchor"))


class Schemas:
    """A document's schemas for one direction, with every referenced one as a `$defs`
    entry (converted once, however many operations use it)."""

    def __init__(self, document: Document, direction: Direction) -> None:
        self.document = document
        self.direction = direction
        self.defs: dict[str, Any] = {}
        self._keys: dict[str, str] = {}
        """The `$defs` key of each referenced schema, by its absolute URI."""
        self._refs: dict[str, frozenset[str]] = {}
        """The keys each `$defs` entry refers to directly."""
        self._tried: dict[str, int] = {}
        """The number each label's next copy tries first: those below it are taken."""
        self._broken: dict[str, SchemaError] = {}
        """Why each referenced schema that cannot be used cannot, by its absolute URI."""

    def convert(self, schema: Any, base: str, depth: int = 0) -> Any:
        """`schema` as JSON Schema 2020-12, its references as `#/$defs/<key>`."""
        if depth > _DEPTH:
            raise SchemaError("the schema nests too deeply")
        if not isinstance(schema, Mapping):
            return schema
        if isinstance(schema.get("$ref"), str):
            ref = {"$ref": "#/$defs/" + self._key(schema["$ref"], base, depth)}
            siblings = {
                k: v for k, v in schema.items() if k != "$ref" and self.document.version >= (3, 1)
            }
            if not siblings:
                return ref
            rest = self.convert(siblings, base, depth + 1)
            if set(rest) <= {"description", "title", "examples", "default"}:
                return {**ref, **rest}
            return {**rest, "allOf": [ref, *rest.get("allOf", [])]}
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _DROPPED or key.startswith("x-"):
                continue
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                out[key] = {
                    str(k): self.convert(v, base, depth + 1)
                    for k, v in value.items()
                    if not (key == "properties" and self._hidden(v))
                }
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self.convert(v, base, depth + 1) for v in value]
            elif key in _SCHEMA_ONES:
                out[key] = (
                    [self.convert(v, base, depth + 1) for v in value]
                    if isinstance(value, list)
                    else self.convert(value, base, depth + 1)
                )
            else:
                _check_keyword(key, value)
                out[key] = value
        if "properties" in out and isinstance(out.get("required"), list):
            out["required"] = [r for r in out["required"] if r in out["properties"]]
        if self.document.version < (3, 1):
            out = _from_3_0(out)
        return out

    def _hidden(self, schema: Any) -> bool:
        """Whether a property is not part of this direction's data."""
        word = "readOnly" if self.direction == "request" else "writeOnly"
        return isinstance(schema, Mapping) and schema.get(word) is True

    def _key(self, ref: str, base: str, depth: int) -> str:
        target_uri = absolute(base, ref)
        key = self._keys.get(target_uri)
        if key is not None:
            return key
        if target_uri in self._broken:
            raise self._broken[target_uri]
        label = (urldefrag(target_uri)[1].rsplit("/", 1)[-1] or "Schema").replace("~1", "_")
        label = label.replace("~0", "_").replace("/", "_") or "Schema"
        key, number = label, self._tried.get(label, 2)
        while key in self.defs:  # from where the last copy stopped: linear in the copies
            key, number = f"{label}{number}", number + 1
        self._tried[label] = number
        self._keys[target_uri] = key
        self.defs[key] = {}  # taken now: a reference inside the target ends here
        try:
            target, target_base = self.document.lookup(base, ref)
            self.defs[key] = self.convert(target, target_base, depth + 1)
        except (SchemaError, SpecError) as exc:  # every operation that refers to it fails
            del self._keys[target_uri], self.defs[key]
            if key != label:  # its number is free again, as it was before
                self._tried[label] = min(self._tried[label], number - 1)
            said = str(exc) if isinstance(exc, SpecError) else f"{ref}: {exc}"
            self._broken[target_uri] = SchemaError(said)
            raise self._broken[target_uri] from None
        return key

    def closure(self, schemas: list[Any]) -> dict[str, Any]:
        """The `$defs` entries these converted schemas reach, directly or not."""
        reached: dict[str, Any] = {}
        waiting = [key for schema in schemas for key in _refs(schema)]
        while waiting:
            key = waiting.pop()
            if key in reached:
                continue
            reached[key] = self.defs[key]
            if key not in self._refs:
                self._refs[key] = frozenset(_refs(self.defs[key]))
            waiting.extend(self._refs[key])
        return dict(sorted(reached.items()))


_TYPES = frozenset(("string", "number", "integer", "boolean", "array", "object", "null"))
_NUMBERS = frozenset(
    [
        *("minimum", "maximum", "multipleOf", "minLength", "maxLength"),
        *("minItems", "maxItems", "minProperties", "maxProperties"),
    ]
)


_CHECKED = frozenset(("type", "required", "enum", "pattern", *_NUMBERS))


def _check_keyword(key: str, value: Any) -> None:
    """SchemaError for a keyword whose value JSON Schema cannot mean. These are the
    checks of the meta-schema that matter for binding and results; the meta-schema
    itself (jsonschema's `check_schema`) takes seconds over a document of a thousand
    operations."""
    if key not in _CHECKED:  # most keywords (descriptions, examples, formats)
        return
    if key == "type":
        kinds = value if isinstance(value, list) else [value]
        if not kinds or not all(isinstance(k, str) and k in _TYPES for k in kinds):
            raise SchemaError(f"type {value!r} is not a JSON Schema type")
    elif key == "required":
        if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
            raise SchemaError("required must be a list of property names")
    elif key == "enum":
        if not isinstance(value, list):
            raise SchemaError("enum must be a list")
    elif key == "pattern":
        if not isinstance(value, str):
            raise SchemaError("pattern must be a string")
    elif key in _NUMBERS and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise SchemaError(f"{key} must be a number")


def _from_3_0(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.0's schema words as 2020-12's."""
    for word, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(schema.get(word), bool) and schema.pop(word) and bound in schema:
            schema[word] = schema.pop(bound)
    if "example" in schema:
        schema.setdefault("examples", [schema.pop("example")])
    if schema.pop("nullable", False) is True:
        kinds = schema.get("type")
        if isinstance(kinds, str):
            schema["type"] = [kinds, "null"]
        elif isinstance(kinds, list) and "null" not in kinds:
            schema["type"] = [*kinds, "null"]
        if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
        if kinds is None:
            schema = {"anyOf": [schema, {"type": "null"}]}
    return schema


def _refs(schema: Any) -> Iterator[str]:
    """The `$defs` keys a converted schema refers to."""
    if isinstance(schema, Mapping):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            yield ref[len("#/$defs/") :]
        for value in schema.values():
            if isinstance(value, Mapping | list):
                yield from _refs(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _refs(item)


__all__ = ["Direction", "Document", "Schemas", "SpecError", "load", "resolve"]
