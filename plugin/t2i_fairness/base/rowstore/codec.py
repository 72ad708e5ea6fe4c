"""The row store's record format: a self-checking record (two CRC-32s), its encoder and decoder, the
segment scanner that resynchronises after damage, and the pack index blob.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from typing import Sequence

import numpy as np

MAGIC = b"T2RW"

FORMAT_VERSION = 1

_HEAD = struct.Struct("<4sBBBBII")  # magic, version, key length, dtype length, ndim, payload length, payload crc

_FIXED = _HEAD.size + 4  # ... then the header crc (u32): 20 bytes

MAX_PAYLOAD = 256 << 20  # one row at most 256 MiB

_CHUNK = 8 << 20  # segments are scanned in pieces of this size

_GAP = 64 << 10  # rows closer than this are read with one pread / one ranged GET

_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")

_SEGMENT = re.compile(r"(seg|pack)-[A-Za-z0-9._-]+\.rows\Z")

_IDX_FORMAT = "t2i-rowstore-index"


class RowStoreError(ValueError):
    """A bad argument to the row store (namespace, key or row)."""


# --------------------------------------------------------------------------------------------- records
class _Loc:
    """Where one record lives: its segment, the record's start and its payload (offset, length, CRC)."""

    __slots__ = ("seg", "start", "payload_off", "payload_len", "crc", "dtype", "shape")

    def __init__(self, seg: str, start: int, payload_off: int, payload_len: int, crc: int, dtype: str, shape: tuple):
        self.seg, self.start, self.payload_off, self.payload_len = seg, start, payload_off, payload_len
        self.crc, self.dtype, self.shape = crc, dtype, shape

    @property
    def end(self) -> int:
        return self.payload_off + self.payload_len

    def moved(self, seg: str, shift: int) -> "_Loc":
        return _Loc(seg, self.start + shift, self.payload_off + shift, self.payload_len, self.crc, self.dtype, self.shape)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Loc) and (self.seg, self.start) == (other.seg, other.start)

    def __hash__(self) -> int:
        return hash((self.seg, self.start))


_DTYPES: dict[bytes, str] = {}  # dtype text in a header -> numpy's canonical str (parsed once)


def _dtype(text: bytes) -> str:
    got = _DTYPES.get(text)
    if got is None:
        got = np.dtype(text.decode("ascii")).str
        if len(_DTYPES) < 256:
            _DTYPES[text] = got
    return got


def encode_record(key: str, row) -> bytes:
    """One self-checking record: header (with its own CRC-32), key, dtype, shape, payload (CRC-32).

    Example:
        >>> rec = encode_record("k", np.arange(3, dtype=np.float32))
        >>> rec[:4], len(rec), decode_record(rec)[0]
        (b'T2RW', 40, 'k')
    """
    return _encode(key, row)[0]


def _encode(key: str, row) -> tuple[bytes, _Loc]:
    """The record's bytes and its location as if it started at offset 0."""
    kb = _key_bytes(key)
    a = np.asarray(row, order="C")  # (ascontiguousarray would make a 0-d row 1-d)
    if a.dtype.kind not in "biufc" or a.dtype.hasobject:
        raise RowStoreError(f"row for key {key!r}: dtype {a.dtype} is not numeric (bool, int, uint, float or complex)")
    if a.ndim > 255:
        raise RowStoreError(f"row for key {key!r}: {a.ndim} dimensions, at most 255")
    payload = a.tobytes()
    if len(payload) > MAX_PAYLOAD:
        raise RowStoreError(f"row for key {key!r}: {len(payload)} bytes, at most {MAX_PAYLOAD}")
    dt = a.dtype.str.encode("ascii")
    var = kb + dt + struct.pack(f"<{a.ndim}I", *a.shape)
    crc = zlib.crc32(payload)
    head = _HEAD.pack(MAGIC, FORMAT_VERSION, len(kb), len(dt), a.ndim, len(payload), crc)
    hend = _FIXED + len(var)
    raw = head + struct.pack("<I", zlib.crc32(var, zlib.crc32(head))) + var + payload
    return raw, _Loc("", 0, hend, len(payload), crc, a.dtype.str, tuple(a.shape))


def decode_record(record: bytes) -> tuple[str, np.ndarray]:
    """The key and row of exactly one whole record, both checksums verified (else ``RowStoreError``)."""
    locs, stop, damage, _ = _scan(record, 0, "", final=True)
    if damage or len(locs) != 1 or stop != len(record):
        why = damage[0][1] if damage else f"{len(locs)} records in {len(record)} bytes"
        raise RowStoreError(f"not one intact record: {why}")
    return locs[0][0], _row(record[locs[0][1].payload_off : locs[0][1].end], locs[0][1])


def _key_bytes(key) -> bytes:
    if not isinstance(key, str) or not key:
        raise RowStoreError(f"key must be a non-empty str, got {key!r}")
    kb = key.encode("utf-8")
    if len(kb) > 255:
        raise RowStoreError(f"key {key[:40]!r}...: {len(kb)} bytes of UTF-8, at most 255")
    return kb


def _row(payload: bytes, loc: _Loc) -> np.ndarray:
    return np.frombuffer(payload, dtype=np.dtype(loc.dtype)).reshape(loc.shape).copy()


def _scan(buf: bytes, base: int, seg: str, final: bool) -> tuple[list, int, list, bool]:
    """Parse the records in ``buf`` (the segment's bytes from file offset ``base``).

    Returns ``(records, stop, damage, in_garbage)``; a record cut short at the end is left for a
    later look unless ``final``; after damage the scan resumes at the next magic.
    """
    out: list = []
    damage: list = []
    pos, n = 0, len(buf)
    view = memoryview(buf)

    def cut_short(pos: int, what: str) -> tuple[int, bool] | None:
        """A record running past the buffer: wait for it (None), or (final) report it and resume."""
        if not final:
            return None
        damage.append((base + pos, what))
        nxt = buf.find(MAGIC, pos + 1)
        return (n, False) if nxt < 0 else (nxt, True)

    while pos < n:
        if n - pos < _FIXED:
            if final:
                damage.append((base + pos, f"torn tail of {n - pos} bytes"))
                pos = n
            break
        magic, version, klen, dlen, ndim, plen, pcrc = _HEAD.unpack_from(buf, pos)
        if magic != MAGIC or version != FORMAT_VERSION:
            damage.append((base + pos, "unrecognised bytes"))
            nxt = buf.find(MAGIC, pos + 1)
            if nxt < 0:  # unrecognised up to the end (keep 3 bytes: a magic may straddle the next read)
                return out, (n if final else max(pos + 1, n - len(MAGIC) + 1)), damage, True
            pos = nxt
            continue
        hend = pos + _FIXED + klen + dlen + 4 * ndim
        if hend > n:
            resume = cut_short(pos, f"torn tail of {n - pos} bytes")
            if resume is None:
                break
            pos = resume[0]
            continue
        (hcrc,) = struct.unpack_from("<I", buf, pos + _HEAD.size)
        if zlib.crc32(view[pos + _FIXED : hend], zlib.crc32(view[pos : pos + _HEAD.size])) != hcrc or plen > MAX_PAYLOAD:
            damage.append((base + pos, "header checksum mismatch"))
            nxt = buf.find(MAGIC, pos + 1)
            if nxt < 0:
                return out, (n if final else max(pos + 1, n - len(MAGIC) + 1)), damage, True
            pos = nxt
            continue
        if hend + plen > n:
            resume = cut_short(pos, f"torn record ({n - pos} of {hend + plen - pos} bytes)")
            if resume is None:
                break
            pos = resume[0]
            continue
        key_end = pos + _FIXED + klen
        try:
            key = buf[pos + _FIXED : key_end].decode("utf-8")
            dtype = _dtype(buf[key_end : key_end + dlen])
        except (UnicodeDecodeError, TypeError, ValueError):
            key = None
        if key is None or zlib.crc32(view[hend : hend + plen]) != pcrc:
            what = "undecodable key or dtype" if key is None else f"payload checksum mismatch at byte {base + pos} (key {key!r})"
            damage.append((base + pos, what))
            nxt = buf.find(MAGIC, hend)  # the payload may hold the start of records written after a torn one
            pos = n if nxt < 0 else nxt
            continue
        shape = struct.unpack_from(f"<{ndim}I", buf, key_end + dlen)
        out.append((key, _Loc(seg, base + pos, base + hend, plen, pcrc, dtype, shape)))
        pos = hend + plen
    return out, pos, damage, False


def _scan_file(fd: int, seg: str, start: int, size: int, final: bool) -> tuple[list, int, list, bool]:
    """:func:`_scan` over a file descriptor, ``_CHUNK`` bytes at a time (a bigger window for a big record)."""
    records: list = []
    damage: list = []
    pos, window, garbage = start, _CHUNK, False
    while pos < size:
        buf = os.pread(fd, min(size - pos, window), pos)
        if not buf:
            break
        at_end = pos + len(buf) >= size
        recs, stop, dmg, garbage = _scan(buf, pos, seg, final and at_end)
        records += recs
        damage += dmg
        pos += stop
        if at_end and stop < len(buf):
            break
        window = _CHUNK if stop else window * 2
    return records, pos, damage, garbage


def _spans(locs: Sequence[_Loc], payload_only: bool) -> list[tuple[int, int]]:
    return [(l.payload_off, l.end) if payload_only else (l.start, l.end) for l in locs]


def _coalesce(spans: list[tuple[int, int]], gap: int = _GAP, limit: int = 32 << 20) -> list[tuple[int, int, list[int]]]:
    """Group spans (sorted by start) into runs ``(start, end, [span indices])`` read at once."""
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    runs: list = []
    for i in order:
        a, b = spans[i]
        if runs and a - runs[-1][1] <= gap and b - runs[-1][0] <= limit:
            runs[-1][1] = max(runs[-1][1], b)
            runs[-1][2].append(i)
        else:
            runs.append([a, b, [i]])
    return [(a, b, idx) for a, b, idx in runs]


def _index_blob(pack: str, size: int, entries: list[tuple[str, int, int]]) -> bytes:
    doc = {"format": _IDX_FORMAT, "version": FORMAT_VERSION, "pack": pack, "bytes": size, "rows": entries}
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode("utf-8"), 6)


def _read_index_blob(blob: bytes, digest: str) -> tuple[str, list]:
    doc = json.loads(zlib.decompress(blob).decode("utf-8"))
    if doc.get("format") != _IDX_FORMAT or doc.get("version") != FORMAT_VERSION or doc.get("pack") != f"{digest}.rows":
        raise ValueError(f"not a version-{FORMAT_VERSION} row index for pack {digest}")
    return doc["pack"], [(str(k), int(o), int(n)) for k, o, n in doc["rows"]]
