"""Read manifest files (YAML, JSON) within bounds: what `simulate --cluster`, `apply -f` and the
SLURM renderer all read a cluster with, so no file can hang, exhaust or crash them.

- Only regular files are read (opened non-blocking, so a FIFO cannot block the open), at most
  `MAX_FILE_BYTES` each and `MAX_TOTAL_BYTES` in all, at most `MAX_FILES` from one directory.
- Text must be UTF-8; YAML refuses control characters (NUL included) itself.
- A document nests at most `MAX_DEPTH` levels and holds at most `MAX_NODES` values, aliases
  counted as often as they are used (so `&a [*b, *b, ...]` cannot expand into billions).
- Values are JSON's (no `!!binary`, `!!set`, `!!omap`, `!!pairs`, `!!timestamp`), keys appear
  once per mapping; dates stay strings (as the API server sees them); an integer of
  more than `MAX_INT_DIGITS` characters is read as a float, so any bound on its field refuses it
  by the field's name instead of Python's digit limit raising.

Every refusal is a `YamlFileError`: a field (`path`, `encoding`, `line L, column C`) and a reason
that says what was wrong without quoting the file; `doc` is the 1-based document it is in.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import yaml

# A declared cluster is kilobytes (the 11-partition Philly example: 8 KB); 1 MiB holds ~7,000
# GPUJobs and takes about a third of a second to parse, so a refusal of the largest input still comes
# within 2 s on a loaded machine (Kubernetes caps a ConfigMap, e.g. a trace, at 1 MiB too). The cap
# holds per file and for all files of one command; a directory gives at most 1,000 files.
MAX_FILE_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 1024 * 1024
MAX_FILES = 1000
# A pod template nests about 10 levels deep; Python's JSON encoder fails near 1000.
MAX_DEPTH = 100
MAX_NODES = 500_000
MAX_INT_DIGITS = 40


class YamlFileError(Exception):
    """One reason a manifest file cannot be read; `doc` is None for the file as a whole."""

    def __init__(self, field: str, reason: str, doc: int | None = None) -> None:
        super().__init__(f"{field}: {reason}")
        self.field, self.reason, self.doc = field, reason, doc


@dataclass(slots=True)
class Budget:
    """Bytes left to read in one command (shared by every file it reads)."""

    left: int = MAX_TOTAL_BYTES


def list_files(directory: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """The directory's regular files with these suffixes, sorted; at most `MAX_FILES` of them."""
    found: list[Path] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if Path(entry.name).suffix.lower() in suffixes and entry.is_file():
                found.append(Path(entry.path))
                if len(found) > MAX_FILES:
                    raise YamlFileError("path", f"more than {MAX_FILES} manifest files in the directory")
    return sorted(found)


def read_text(file: Path, budget: Budget) -> str:
    """The file's text: a regular file, within the size caps, valid UTF-8."""
    try:
        # O_NONBLOCK: opening a FIFO returns at once (a blocking open waits for a writer forever).
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise YamlFileError("path", exc.strerror or type(exc).__name__) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "not a regular file (FIFO, device or socket)"
            raise YamlFileError("path", f"is {what}; expected a manifest file")
        limit = min(MAX_FILE_BYTES, budget.left)
        data = _read_at_most(fd, limit + 1)
    except OSError as exc:
        raise YamlFileError("path", exc.strerror or type(exc).__name__) from None
    finally:
        os.close(fd)
    return _checked(data, limit, budget)


def read_stream(stream: BinaryIO, budget: Budget) -> str:
    """All of a stream's text (`-f -`: standard input), within the same size caps as a file."""
    limit = min(MAX_FILE_BYTES, budget.left)
    try:
        data = stream.read(limit + 1)
    except OSError as exc:
        raise YamlFileError("path", exc.strerror or type(exc).__name__) from None
    return _checked(data, limit, budget)


def _checked(data: bytes, limit: int, budget: Budget) -> str:
    """`data` as text, if within `limit` (what is left of the budget or the per-file cap)."""
    if len(data) > limit:
        if limit == MAX_FILE_BYTES:
            raise YamlFileError(
                "path", f"larger than {MAX_FILE_BYTES} bytes, the most a manifest file may hold"
            )
        raise YamlFileError("path", f"the manifest files given hold more than {MAX_TOTAL_BYTES} bytes together, "
                            "the most one command reads")  # fmt: skip
    budget.left -= len(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlFileError("encoding", f"not UTF-8 text (byte {exc.start + 1}: {exc.reason})") from None


def _read_at_most(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def documents(text: str, loader_class: type[Any] | None = None) -> Iterator[tuple[int, Any]]:
    """Each YAML document of `text` as data, with its 1-based index; empty documents give None."""
    loader_class = loader_class or StrictLoader
    if loader_class is _DEPTH_FIRST:
        _check_depth_by_events(text)
    loader = loader_class(text)
    done = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            _check_shape(node, done + 1)
            data = loader.construct_document(node)
            done += 1
            yield done, data
    except yaml.YAMLError as exc:
        raise _located(exc, text, done + 1) from None
    finally:
        loader.dispose()


def _check_shape(node: yaml.Node, doc: int) -> None:
    """Depth and size of one composed document, walked without recursion, aliases expanded."""
    stack: list[tuple[yaml.Node, int]] = [(node, 1)]
    seen = 0
    while stack:
        current, depth = stack.pop()
        seen += 1
        if depth > MAX_DEPTH:
            raise YamlFileError(_at(current.start_mark), f"nested deeper than {MAX_DEPTH} levels", doc)
        if seen > MAX_NODES:
            raise YamlFileError(_at(current.start_mark), f"more than {MAX_NODES} values (aliases "
                                "counted each time they are used)", doc)  # fmt: skip
        if isinstance(current, yaml.MappingNode):
            stack += [(child, depth + 1) for pair in current.value for child in pair]
        elif isinstance(current, yaml.SequenceNode):
            stack += [(child, depth + 1) for child in current.value]


def _at(mark: Any) -> str:  # a yaml.Mark, from either parser, or None
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "yaml"


def _located(exc: yaml.YAMLError, text: str, doc: int) -> YamlFileError:
    """A YAML error as one line, located by line and column (1-based, as editors count)."""
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        return YamlFileError(f"line {line}, column {column}", f"character #x{exc.character:04x} is not "
                             "allowed in YAML (control characters and NUL are refused)", doc)  # fmt: skip
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        reason = exc.problem or exc.context or "invalid YAML"
        return YamlFileError(_at(mark), " ".join(reason.split()), doc)
    return YamlFileError("yaml", " ".join(str(exc).split()), doc)


class _PurePythonParser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer):
    """PyYAML's own parser, where libyaml is missing: composing recurses, so the depth is capped here."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _StrictConstructor(yaml.constructor.SafeConstructor):
    """SafeConstructor that refuses duplicate keys, keeps dates as strings and bounds integers.

    PyYAML keeps the last of two equal keys silently (a second `spec:` would erase the first), and
    turns `2024-05-01` into a date where the Kubernetes API server sees a string.
    """

    def __init__(self) -> None:
        super().__init__()
        # A manifest repeats its scalars (`gpus: 4` in every job): each distinct (tag, text) is
        # constructed once. The values are str, int, float, bool or None, so sharing them is safe.
        self._scalars: dict[tuple[str, str], Any] = {}

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        if node.__class__ is not yaml.ScalarNode:
            return super().construct_object(node, deep=deep)
        key = (node.tag, node.value)
        value = self._scalars.get(key, self._scalars)
        if value is self._scalars:
            value = self._scalars[key] = super().construct_object(node, deep=deep)
        return value

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # No `<<: *base` merge keys: the key's tag has no constructor, so it is refused as unknown.
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, "found unhashable key", key_node.start_mark
                )  # fmt: skip
            if key in mapping:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"found duplicate key {key!r:.80}",
                    key_node.start_mark,
                )  # fmt: skip
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def construct_bounded_int(self, node: yaml.ScalarNode) -> int | float:
        text = str(self.construct_scalar(node))
        if len(text) > MAX_INT_DIGITS:  # int() would raise past 4300 digits; no bound needs this many
            try:
                return float(text.replace("_", ""))
            except ValueError:
                return float("inf")  # a long hex, octal or base-60 integer
        return super().construct_yaml_int(node)

    def refuse_non_json(self, node: yaml.Node) -> None:
        # Kubernetes objects are JSON: bytes, sets, pairs and datetimes have no place in them.
        raise yaml.constructor.ConstructorError(
            None, None, f"tag {node.tag.replace('tag:yaml.org,2002:', '!!')} is not accepted: a manifest "
            "holds JSON values (strings, numbers, booleans, null, lists, mappings)", node.start_mark,
        )  # fmt: skip


_StrictConstructor.add_constructor("tag:yaml.org,2002:int", _StrictConstructor.construct_bounded_int)  # type: ignore[type-var]
for _tag in ("binary", "set", "omap", "pairs", "timestamp"):
    _StrictConstructor.add_constructor(f"tag:yaml.org,2002:{_tag}", _StrictConstructor.refuse_non_json)  # type: ignore[type-var]


class _StrictResolver(yaml.resolver.Resolver):
    yaml_implicit_resolvers = {
        first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
    }

    def __init__(self) -> None:
        super().__init__()
        self._tags: dict[tuple[str, Any], str] = {}  # a scalar's tag depends on its text alone

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        if kind is not yaml.ScalarNode:
            return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call,no-any-return]
        key = (value, implicit)
        tag = self._tags.get(key)
        if tag is None:
            tag = self._tags[key] = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        return tag


class PureStrictLoader(_PurePythonParser, _StrictConstructor, _StrictResolver):
    """The strict loader on PyYAML's own parser (where libyaml is missing)."""

    def __init__(self, stream: str) -> None:
        _PurePythonParser.__init__(self, stream)
        _StrictConstructor.__init__(self)
        _StrictResolver.__init__(self)


def libyaml_caps_nesting(version: tuple[int, int, int]) -> bool:
    """Whether a libyaml of `version` refuses deep nesting itself (0.2.6 added the cap, 1,000 levels)."""
    return version >= (0, 2, 6)


StrictLoader: type[Any] = PureStrictLoader
_DEPTH_FIRST: type[Any] | None = None  # a C loader whose input is depth-checked by events first
if yaml.__with_libyaml__:  # libyaml: ten times faster
    import yaml._yaml
    import yaml.cyaml

    class _CStrictLoader(yaml.cyaml.CParser, _StrictConstructor, _StrictResolver):  # type: ignore[misc,name-defined]
        """The strict loader on libyaml's parser."""

        def __init__(self, stream: str) -> None:
            yaml.cyaml.CParser.__init__(self, stream)  # type: ignore[attr-defined]
            _StrictConstructor.__init__(self)
            _StrictResolver.__init__(self)

    StrictLoader = _CStrictLoader
    # PyYAML's C composer recurses once per level with no limit of its own: over libyaml 0.2.5
    # (PyYAML 6.0.3's wheels) a 100,000-deep `[[[...` overflows the C stack and kills the process.
    if not libyaml_caps_nesting(tuple(int(v) for v in yaml._yaml.get_version())):  # type: ignore[arg-type]
        _DEPTH_FIRST = _CStrictLoader


def _check_depth_by_events(text: str) -> None:
    """Refuse nesting deeper than `MAX_DEPTH` from libyaml's event stream (its parser does not
    recurse), stopping at the first level too deep; about half the cost of composing."""
    parser = yaml.cyaml.CParser(text)  # type: ignore[attr-defined]
    doc = depth = 0
    opens, closes = (yaml.SequenceStartEvent, yaml.MappingStartEvent), (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    try:
        while parser.check_event():
            event = parser.get_event()
            if isinstance(event, opens):
                depth += 1
                if depth > MAX_DEPTH:
                    raise YamlFileError(_at(event.start_mark), f"nested deeper than {MAX_DEPTH} levels", doc)
            elif isinstance(event, closes):
                depth -= 1
            elif isinstance(event, yaml.DocumentStartEvent):
                doc += 1
    except yaml.YAMLError:
        return  # composing meets the same error and locates it
    finally:
        parser.dispose()


__all__ = [
    "MAX_DEPTH",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "MAX_TOTAL_BYTES",
    "Budget",
    "PureStrictLoader",
    "StrictLoader",
    "YamlFileError",
    "documents",
    "libyaml_caps_nesting",
    "list_files",
    "read_stream",
    "read_text",
]
