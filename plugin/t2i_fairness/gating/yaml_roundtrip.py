"""A YAML round-trip editor for the thresholds file: read with comments and number spellings kept,
errors that name the file and line, and entries inserted or removed without moving a comment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.nodes import MappingNode, ScalarNode
from ruamel.yaml.representer import RoundTripRepresenter
from ruamel.yaml.scalarfloat import ScalarFloat
from ruamel.yaml.scalarint import BinaryInt, DecimalInt, HexCapsInt, HexInt, OctalInt, ScalarInt
from ruamel.yaml.tokens import CommentToken


class ThresholdFileError(ValueError):
    """The thresholds YAML cannot be used; the message names the file (and line where there is one)."""


MAX_BYTES = 2 << 20  # a thresholds file is read with its comments' positions (ruamel's round trip, ~100 KB/s)


def _read_text(path: Path) -> str | None:
    """The file's text, None if there is no file; a file above :data:`MAX_BYTES` or any other failure is
    a ThresholdFileError naming it.
    """
    if path.is_dir():
        raise ThresholdFileError(f"{path}: is a directory; expected a thresholds YAML file (e.g. {path / 'tiny.yaml'})")
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None  # also a dangling symlink: the first save creates its target
    except OSError as exc:
        raise ThresholdFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if size > MAX_BYTES:
        raise ThresholdFileError(
            f"{path}: {size / 2**20:.1f} MiB is too large to be a thresholds file (at most {MAX_BYTES >> 20} MiB, "
            f"about 14 000 gates; the paper preset's whole suite has about 1 500): is this the file you meant? "
            f"(a file this size takes the YAML round-trip parser minutes; MAX_BYTES in gating/yaml_roundtrip.py)")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None  # also a dangling symlink: the first save creates its target
    except OSError as exc:
        raise ThresholdFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ThresholdFileError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save the file as UTF-8"
        ) from None


class _TextFloat(float):
    """A float that remembers how it was spelled (ruamel re-spells some floats: 4.676365975342285e+16)."""

    _t2i_text: str


class _TextInt(int):
    _t2i_text: str


def _spelled(value: Any, text: str, plain: type) -> Any:
    if type(value) in (float, int):
        value = plain(value)
    try:
        value._t2i_text = text
    except AttributeError:
        pass
    return value


class _Constructor(RoundTripConstructor):
    """Round-trip constructor that keeps the composed node tree (lines, raw key text, duplicates) and
    the spelling of numbers, so that an untouched number is written back exactly as it was."""

    t2i_node: Any = None

    def construct_document(self, node: Any) -> Any:
        self.t2i_node = node
        return super().construct_document(node)

    def t2i_float(self, node: Any) -> Any:
        return _spelled(self.construct_yaml_float(node), node.value, _TextFloat)

    def t2i_int(self, node: Any) -> Any:
        return _spelled(self.construct_yaml_int(node), node.value, _TextInt)


_Constructor.add_constructor("tag:yaml.org,2002:float", _Constructor.t2i_float)

_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.t2i_int)


class _Representer(RoundTripRepresenter):
    def t2i_number(self, data: Any) -> Any:
        text = getattr(data, "_t2i_text", None)
        if text is None:
            return RoundTripRepresenter.yaml_representers[type(data)](self, data)
        tag = "tag:yaml.org,2002:float" if isinstance(data, float) else "tag:yaml.org,2002:int"
        anchor = data.yaml_anchor(any=True) if hasattr(data, "yaml_anchor") else None
        return self.represent_scalar(tag, text, anchor=anchor)


_Representer.add_representer(type(None), lambda r, d: r.represent_scalar("tag:yaml.org,2002:null", "null"))

for _cls in (ScalarFloat, ScalarInt, BinaryInt, OctalInt, HexInt, HexCapsInt, DecimalInt):
    _Representer.add_representer(_cls, _Representer.t2i_number)

_Representer.add_representer(_TextFloat, lambda r, d: r.represent_scalar("tag:yaml.org,2002:float", d._t2i_text))

_Representer.add_representer(_TextInt, lambda r, d: r.represent_scalar("tag:yaml.org,2002:int", d._t2i_text))


def _yaml(indent: int = 2) -> YAML:
    y = YAML(typ="rt")
    y.Constructor = _Constructor
    y.Representer = _Representer
    y.allow_duplicate_keys = True  # found on the node tree with both lines, see _check_duplicates
    y.preserve_quotes = True
    y.allow_unicode = True
    y.width = 1 << 16  # never fold long gate ids
    y.indent(mapping=indent, sequence=indent, offset=0)
    return y


def _parse(path: Path, text: str) -> tuple[Any, Any]:
    y = _yaml()
    try:
        doc = y.load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ThresholdFileError(f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a timestamp-looking value that is no date
        raise ThresholdFileError(f"{path}: invalid YAML value: {exc}") from None
    node = y.constructor.t2i_node
    if node is not None:
        _check_duplicates(path, node)
    return node, doc


def _line(node: Any) -> int:
    return node.start_mark.line + 1


def _raw(path: Path, key_node: Any) -> str:
    if not isinstance(key_node, ScalarNode):
        raise ThresholdFileError(f"{path}:{_line(key_node)}: keys must be plain text, got a {type(key_node).__name__}")
    return key_node.value


def _context(trail: list[str]) -> str:
    if not trail:
        return "at the top level"
    if len(trail) == 2 and trail[0] == "gates":
        return f"in gate {trail[1]!r}"
    if len(trail) == 2 and trail[0] == "provenance":
        return f"in provenance {trail[1]!r}"
    return "under " + " -> ".join(repr(t) for t in trail)


def _check_duplicates(path: Path, node: Any, trail: list[str] | None = None, seen: set | None = None) -> None:
    """A key repeated in any mapping is an error naming both lines (YAML readers silently keep one)."""
    trail = trail or []
    seen = seen if seen is not None else set()
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, MappingNode):
        first: dict[str, int] = {}
        for k, v in node.value:
            raw = k.value if isinstance(k, ScalarNode) else repr(k)
            if raw in first:
                what = "under 'gates'" if trail == ["gates"] else _context(trail)
                raise ThresholdFileError(
                    f"{path}:{_line(k)}: {raw!r} appears twice {what} (first at line {first[raw]}); YAML would keep "
                    "only one of them and an update would delete the other's entries: merge them into one")
            first[raw] = _line(k)
            _check_duplicates(path, v, trail + [raw], seen)
    elif isinstance(getattr(node, "value", None), list):
        for item in node.value:
            _check_duplicates(path, item, trail, seen)


def _pairs(path: Path, node: Any, mapping: Any) -> dict[str, tuple[Any, Any, Any, Any]]:
    """raw key text -> (key node, value node, key in the document, value), in file order."""
    if not isinstance(node, MappingNode) or len(node.value) != len(mapping):
        raise ThresholdFileError(f"{path}:{_line(node)}: YAML merge keys ('<<') are not supported in a thresholds file")
    return {_raw(path, kn): (kn, vn, dk, mapping[dk]) for (kn, vn), dk in zip(node.value, mapping)}


def _guess_indent(root: MappingNode) -> int:
    """The file's mapping indent: the column of the first key nested one level down (2 if none)."""
    for _, v in root.value:
        if isinstance(v, MappingNode) and v.value and not v.flow_style:
            return max(1, v.value[0][0].start_mark.column)
    return 2


def _plain(x: Any) -> Any:
    """Round-trip values (CommentedMap, ScalarFloat, ...) as plain Python values."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, bool) or type(x).__name__ == "ScalarBoolean":
        return bool(x)
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x)
    if isinstance(x, str):
        return str(x)
    return x


def _emit(doc: Any, indent: int) -> str:
    import io

    buf = io.StringIO()
    _yaml(indent).dump(doc, buf)
    return buf.getvalue()


def _section(doc: CommentedMap, name: str, *, first: bool) -> CommentedMap:
    """The document's ``gates``/``provenance`` mapping, created (block style) if absent or empty."""
    if name not in doc:
        if first:
            doc.insert(0, name, CommentedMap())
        else:
            doc[name] = CommentedMap()
    elif doc[name] is None:
        doc[name] = CommentedMap()
    section = doc[name]
    if not section:
        section.fa.set_block_style()
    return section


def _sorted_pos(mapping: CommentedMap, keys: dict[str, Any], name: str) -> int:
    """Index of the first entry (file order) whose id sorts after ``name``; the end if none does."""
    raw_of = {dk: raw for raw, dk in keys.items()}
    for i, dk in enumerate(mapping):
        if raw_of.get(dk, str(dk)) > name:
            return i
    return len(mapping)


def _tail_slot(container: Any, key: Any) -> tuple[dict, Any, int]:
    """(comment items, key, index) of the comment after the last line of ``container[key]``."""
    value = container[key]
    if isinstance(value, (CommentedMap, CommentedSeq)) and len(value) and not value.fa.flow_style():
        last = list(value)[-1] if isinstance(value, CommentedMap) else len(value) - 1
        return _tail_slot(value, last)
    return container.ca.items, key, (0 if isinstance(container, CommentedSeq) else 2)


def _token(text: str) -> CommentToken:
    """A comment token holding whole lines ``text`` (its first line's indentation becomes its column)."""
    if text.startswith("\n"):
        return CommentToken(text, CommentMark(0), None)
    stripped = text.lstrip(" ")
    return CommentToken(stripped, CommentMark(len(text) - len(stripped)), None)


def _text(tok: CommentToken) -> str:
    value = tok.value
    return value if value.startswith("\n") else " " * tok.start_mark.column + value


def _split_tail(container: Any, key: Any) -> str:
    """Detach and return the whole comment lines (and blank lines) below ``container[key]``."""
    items, k, idx = _tail_slot(container, key)
    slot = items.get(k)
    if not slot or len(slot) <= idx or slot[idx] is None:
        return ""
    head, _, rest = slot[idx].value.partition("\n")
    if not rest:
        return ""
    slot[idx].value = head + "\n"
    return rest


def _pre(mapping: CommentedMap, key: Any) -> list:
    slot = mapping.ca.items.setdefault(key, [None, None, None, None])
    if slot[1] is None:
        slot[1] = []
    return slot[1]


def _take_first_comments(mapping: CommentedMap, parent: tuple[CommentedMap, Any] | None) -> list:
    """Detach the comment lines above a mapping's first key (kept in the parent's slot)."""
    tokens: list = []
    if parent is not None:
        pslot = parent[0].ca.items.get(parent[1])
        if pslot and len(pslot) > 3 and pslot[3]:
            tokens = list(pslot[3])
            pslot[3] = None
    if mapping.ca.comment and len(mapping.ca.comment) > 1:
        mapping.ca.comment[1] = None
    return tokens


def _insert(mapping: CommentedMap, pos: int, key: Any, value: Any, parent: tuple[CommentedMap, Any] | None) -> None:
    """Insert ``key: value`` at ``pos``, directly below the previous entry (and its end-of-line comment)."""
    keys = list(mapping)
    if pos < len(keys):
        nxt = keys[pos]
        if pos == 0:
            moved = _take_first_comments(mapping, parent)
        else:
            rest = _split_tail(mapping, keys[pos - 1])
            moved = [_token(rest)] if rest else []
        if moved:
            pre = _pre(mapping, nxt)
            pre[:0] = moved
        mapping.insert(pos, key, value)
        return
    rest = _split_tail(mapping, keys[-1]) if keys else ""
    mapping.insert(pos, key, value)
    if rest:
        items, k, idx = _tail_slot(mapping, key)
        items.setdefault(k, [None, None] if idx == 0 else [None, None, None, None])[idx] = _token("\n" + rest)


def _remove(mapping: CommentedMap, key: Any, parent: tuple[CommentedMap, Any] | None) -> None:
    """Delete an entry; comment lines above and below it stay (only those on its own lines go)."""
    keys = list(mapping)
    i = keys.index(key)
    below = _split_tail(mapping, key)
    slot = mapping.ca.items.pop(key, None)
    keep = [t for t in (slot[1] if slot and len(slot) > 1 and slot[1] else [])]
    if below:
        keep.append(_token(below))
    del mapping[key]
    if not keep:
        return
    if i < len(keys) - 1:
        nxt = keys[i + 1]
        if i == 0 and parent is not None:  # the next entry becomes the first: comments go in the parent's slot
            pslot = parent[0].ca.items.setdefault(parent[1], [None, None, None, None])
            pslot[3] = (pslot[3] or []) + keep + _pre(mapping, nxt)
            mapping.ca.items[nxt][1] = None
        else:
            _pre(mapping, nxt)[:0] = keep
    elif i > 0:
        items, k, idx = _tail_slot(mapping, keys[i - 1])
        slot_prev = items.setdefault(k, [None, None] if idx == 0 else [None, None, None, None])
        head = slot_prev[idx].value if slot_prev[idx] is not None else "\n"
        slot_prev[idx] = CommentToken(head + "".join(_text(t) for t in keep),
                                      slot_prev[idx].start_mark if slot_prev[idx] is not None else CommentMark(0), None)
