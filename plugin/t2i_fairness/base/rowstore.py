"""A feature row store: many small fixed-size rows (image features) per namespace, looked up by key.

Why not one ``.npy`` per row (what ``Workbench.features`` did): every row paid a file creation, an
``fsync`` and a rename (about 325 rows/s measured on the project's 2-core machine), a 30k-image,
6-encoder suite made 180k files, and with an fsspec ``--t2i-cache-dir`` 180k object-store puts.

Design (a log-structured store, as Bitcask and LevelDB's write-ahead log; packs as git's pack + idx)
--------------------------------------------------------------------------------------------------
Local tier, one folder per namespace (``<root>/<namespace>/``):

* **Each writing process appends to its own segment file** ``seg-<time>-<host>-<pid>-<random>.rows``.
  No two processes ever write the same file, so pytest-xdist workers never wait on each other and a
  reader never sees two writers' bytes interleaved. A ``put_many`` is one ``write()`` of all its
  records; it returns only after the kernel has the bytes, so a process killed at any later moment
  (SIGKILL included) loses nothing it was told was written (LevelDB's ``sync=false`` contract: "if
  it is just the process that crashes ... no writes will be lost"). ``fsync`` runs when
  ``fsync_interval`` seconds have passed since the last one (default 1 s; ``0`` = every call, the
  old per-row guarantee against power loss, at one fsync per batch instead of per row) and on
  :meth:`RowStore.flush` / :meth:`RowStore.close`. SQLite in WAL mode with ``synchronous=NORMAL``
  makes the same trade: durable across application crashes, a power loss may drop the last writes.
* **Every record checks itself**: ``magic | version | key/dtype/ndim lengths | payload length |
  payload CRC-32 | header CRC-32 | key | dtype | shape | payload``. The header CRC is checked before
  any length in it is trusted (so a flipped length byte cannot send the reader astray), the payload
  CRC when the segment is indexed and again on every read. CRC-32 detects every error confined to
  32 consecutive bits, so any single flipped byte; it is what LevelDB's log, zarr v3's shard index
  and ext4 metadata use. A torn tail (a record cut short by a crash, power loss or a full disk) is
  never indexed; a damaged record is reported (``on_corrupt``), skipped, and the reader
  resynchronises on the next record's magic, so one bad byte costs one row, which the caller
  recomputes (``get_many`` returns ``None`` for it).
* **Readers** keep an in-memory index (key -> segment, offset), built by scanning segments and
  extended incrementally (only the bytes appended since the last look) when a lookup misses, as
  Bitcask rebuilds its keydir. Lookups stay per key: ``get_many(keys)`` -> one row or ``None`` each;
  rows of one segment are fetched with coalesced ``pread`` calls.
* **Rows are immutable.** ``put_many`` skips keys already stored (after re-reading the other
  writers' tails), so a row is written once unless two workers compute it at the same moment; then
  both copies are stored (same content: encoders are deterministic per image) and readers use the
  first they indexed.
* **Compaction** (:meth:`RowStore.compact`, run automatically when a namespace holds more than
  ``auto_compact_segments`` files) merges every segment whose writer is gone into one
  ``pack-<sha256>.rows``: first copy of each key kept, duplicates, damaged records and torn tails
  dropped. A live writer holds a shared ``flock`` on its segment for its whole life (taken before
  the file gets its visible name), so compaction, which needs an exclusive one, never touches a
  segment still being written. The merged pack is written under a temporary name, fsync'd, renamed,
  and only then are the inputs unlinked; a crash in between leaves duplicates of identical rows,
  which the next compaction removes. Readers that still hold an input's name re-list and retry.
  So disk use is bounded by the distinct rows plus the segments written since the last compaction;
  rewrites (duplicates, recomputed damaged rows) never accumulate.
* **Files follow the user's umask** (created with mode ``0o666``, folders ``0o777``, both masked
  by the umask; no ``mkstemp``), and there are **no lock files**: locks are ``flock`` on the
  segment files themselves and on the namespace folder, released by the kernel when a process dies.

Shared tier (``remote``: any fsspec URL: ``s3://``, ``gs://``, ``file://``, ``memory://``), layout
``<remote>/<namespace>/packs/<sha256>.rows`` + ``<remote>/<namespace>/index/<sha256>.idx``:

* A pack is many records in the same format, **immutable and content-addressed**; its index object
  (zlib-compressed JSON: key -> offset, length) is put after the pack, so a listed index always
  names an existing pack. Uploads happen in :meth:`RowStore.sync`: every ``upload_rows`` rows
  written (default 4096) and at :meth:`RowStore.close`, so 30k rows are about 8 packs and 8 index
  objects instead of 30k objects. A sync uploads every local row the remote does not list, so rows
  of a process killed before its own sync are uploaded by the next sync on that machine.
* **Two machines never overwrite each other**: each uploads objects whose names are digests of
  their content; there is no shared manifest to read-modify-write, a reader takes the union of all
  listed indexes. One ``LIST`` of ``index/`` per lookup that misses locally; needed rows are read
  with byte-range requests (coalesced), verified by their CRCs and appended to the local mirror.
* :meth:`RowStore.compact_remote` merges the remote packs into one (writing the merged pack and
  index before deleting anything); a reader whose listed pack vanished re-lists and retries.

Alternatives weighed (from their own docs and sources):

* **SQLite in WAL mode** (diskcache stores values under 32 KB inline in SQLite, WAL, short
  transactions): as fast locally with one transaction per batch, but it is one writer at a time,
  unsafe on network filesystems, cannot be the shared tier (a database file cannot be merged by two
  machines through an object store, so packs would be needed anyway) and a damaged page can make
  the whole database unreadable ("database disk image is malformed") instead of one row missing.
* **LMDB** (one memory-mapped copy-on-write B+tree): a compiled dependency, a fixed map size, a
  single writer lock and no checksums on data pages.
* **zarr** keeps one object per chunk; v3's sharding codec packs many chunks into one object with
  an index (CRC32C-protected) at its end: the same idea as our packs, but a shard is rewritten as a
  whole when a chunk changes, while our rows arrive one batch at a time from many processes.
* **Hugging Face datasets** write immutable Arrow files per fingerprinted transform and **Ray**
  fuses many spilled objects into one file (``min_spilling_size``): both batch small objects into
  large immutable files, as segments and packs do here.

Compatibility: files written by the old per-file path (``features/<namespace>/<kk>/<key>.npy``)
are read by :class:`FeatureRows` when a row is missing here, and copied into the row store (so the
next lookup is fast and the shared tier gets them as packs); the ``.npy`` files are left in place
(an older checkout keeps working). They carry no checksum: ``np.load`` catches truncation and a
broken header, and rows with non-finite values are rejected, but other flipped data bytes in an old
``.npy`` cannot be detected. :func:`migrate_legacy_features` imports a whole old cache at once.

POSIX only (``fcntl.flock``, ``os.pread``), like the rest of the cache's crash-safety story.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import re
import socket
import struct
import threading
import time
import uuid
import warnings
import weakref
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

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

    Args:
        key: the row's key, 1 to 255 bytes of UTF-8.
        row: a numeric array (bool, int, uint, float or complex) of at most 255 dimensions.

    Raises:
        RowStoreError: the key or the row is not storable (the message names it).

    Example:
        >>> rec = encode_record("k", np.arange(3, dtype=np.float32))
        >>> rec[:4], len(rec)
        (b'T2RW', 40)
        >>> decode_record(rec)[0], decode_record(rec)[1].tolist()
        ('k', [0.0, 1.0, 2.0])
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
    """The key and row of one whole record, both checksums verified.

    Args:
        record: exactly one record's bytes (as :func:`encode_record` made them).

    Raises:
        RowStoreError: the bytes are not exactly one intact record (damaged, cut short, or more).

    Example:
        >>> rec = bytearray(encode_record("k", np.ones(4, np.float32)))
        >>> rec[-1] ^= 0x40  # one flipped bit in the payload
        >>> try:
        ...     decode_record(bytes(rec))
        ... except RowStoreError as exc:
        ...     print(exc)
        not one intact record: payload checksum mismatch at byte 0 (key 'k')
    """
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

    Returns ``(records, stop, damage, in_garbage)``: ``records`` as ``(key, _Loc)``; ``stop`` the
    buffer offset up to which everything was consumed (a record cut short at the end is left for a
    later look, as a live writer may still be appending it, unless ``final``); ``damage`` as
    ``(file offset, reason)``; ``in_garbage`` whether the scan stopped inside unrecognised bytes.

    Every length in a header is used only after the header's CRC matched, and a record is accepted
    only when its payload CRC matches too; after damage the scan resumes at the next magic.
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


# --------------------------------------------------------------------------------------------- helpers
def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_file(path: Path, data: bytes) -> None:
    """Write a new file with the user's umask (mode 0o666 before masking), fsync'd, then rename it in place."""
    tmp = path.with_name(f".tmp-{uuid.uuid4().hex}-{path.name}")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)


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


@contextlib.contextmanager
def _flock(path: Path, exclusive: bool = True, blocking: bool = True) -> Iterator[bool]:
    """``flock`` on an existing file or folder; yields whether it was taken (always, when blocking)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if blocking else fcntl.LOCK_NB)
        try:
            fcntl.flock(fd, flags)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def _writer_gone(fd: int) -> bool:
    """Whether no process holds the segment open for writing (a live writer holds a shared ``flock`` on it)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def _index_blob(pack: str, size: int, entries: list[tuple[str, int, int]]) -> bytes:
    doc = {"format": _IDX_FORMAT, "version": FORMAT_VERSION, "pack": pack, "bytes": size, "rows": entries}
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode("utf-8"), 6)


def _read_index_blob(blob: bytes, digest: str) -> tuple[str, list]:
    doc = json.loads(zlib.decompress(blob).decode("utf-8"))
    if doc.get("format") != _IDX_FORMAT or doc.get("version") != FORMAT_VERSION or doc.get("pack") != f"{digest}.rows":
        raise ValueError(f"not a version-{FORMAT_VERSION} row index for pack {digest}")
    return doc["pack"], [(str(k), int(o), int(n)) for k, o, n in doc["rows"]]


# --------------------------------------------------------------------------------------------- state
@dataclass
class RowStats:
    """What a :class:`RowStore` did (per process)."""

    written: int = 0  # rows appended by put_many
    skipped: int = 0  # rows put_many found already stored
    hits: int = 0  # rows get_many returned
    misses: int = 0  # keys get_many found nowhere
    fetched: int = 0  # rows read from the shared tier
    uploaded: int = 0  # rows put into the shared tier
    objects_put: int = 0  # objects put into the shared tier (packs + indexes)
    compactions: int = 0
    corrupt: list = field(default_factory=list)  # one line per damaged record found
    torn: list = field(default_factory=list)  # one line per segment found cut short with its writer gone (rows lost)
    remote_errors: list = field(default_factory=list)  # shared-tier failures survived (rows stay local, retried later)


class _Writer:
    __slots__ = ("fd", "name", "size", "pid", "last_sync")

    def __init__(self, fd: int, name: str):
        self.fd, self.name, self.size, self.pid, self.last_sync = fd, name, 0, os.getpid(), time.monotonic()


class _Space:
    """One namespace's in-memory view."""

    def __init__(self, name: str, path: Path):
        self.name, self.path = name, path
        self.index: dict[str, _Loc] = {}
        self.extra: dict[str, list[_Loc]] = {}  # later copies of a key (duplicates), used if the first is damaged or gone
        self.scanned: dict[str, int] = {}  # segment -> bytes indexed
        self.garbage: dict[str, int] = {}  # segment -> offset a scan stopped at inside unrecognised bytes (reported)
        self.reported: set = set()
        self.writer: _Writer | None = None
        self.unsynced = 0
        self.remote: dict[str, list[tuple[str, int, int]]] = {}  # key -> [(pack digest, offset, length)]
        self.remote_loaded: set[str] = set()
        self.remote_bad: set[tuple[str, int]] = set()


# --------------------------------------------------------------------------------------------- store
class RowStore:
    """Rows (numeric arrays) per ``(namespace, key)``, written in batches, read per key; crash-safe.

    Args:
        root: the local folder (one sub-folder per namespace), created on first write.
        remote: an fsspec URL of a shared tier (``s3://b/p``, ``gs://``, ``file://``, ``memory://``),
            or None. Rows missing locally are fetched from it; rows written here are uploaded to it
            as packs by :meth:`sync` (every ``upload_rows`` rows and at :meth:`close`).
        fsync_interval: seconds between fsyncs of this process's segment while writing (0: fsync
            in every ``put_many``; rows survive a process crash as soon as ``put_many`` returns
            whatever the value).
        upload_rows: rows written before an automatic :meth:`sync` to the shared tier.
        pack_bytes: the largest pack uploaded at once.
        segment_bytes: a process starts a new segment file after this many bytes.
        auto_compact_segments: a namespace holding more segment files than this is compacted when
            a process first opens it.
        on_corrupt: called with a one-line description of each damaged record found (default:
            only counted in ``stats.corrupt``).
        on_torn: called with a one-line description of each segment found to end in a cut-short
            record whose writer is gone (a process killed mid-write, a full disk, a truncated file):
            not damage (nothing acknowledged was written there, unless the file was cut), but the
            rows past the cut are computed again, which is worth saying (default: ``stats.torn``).

    Raises:
        RowStoreError: a bad option value (the message names the option).
        OSError: the platform has no ``fcntl`` (Windows), or the remote URL cannot be opened.

    Example:
        >>> import tempfile
        >>> store = RowStore(tempfile.mkdtemp())
        >>> store.put_many("clip", [("img1", np.ones(3, np.float32)), ("img2", np.zeros(3, np.float32))])
        2
        >>> [None if r is None else r.tolist() for r in store.get_many("clip", ["img2", "nope", "img1"])]
        [[0.0, 0.0, 0.0], None, [1.0, 1.0, 1.0]]
        >>> store.close()
    """

    def __init__(
        self,
        root: str | os.PathLike,
        remote: str | None = None,
        *,
        fsync_interval: float = 1.0,
        upload_rows: int = 4096,
        pack_bytes: int = 64 << 20,
        segment_bytes: int = 256 << 20,
        auto_compact_segments: int = 64,
        on_corrupt: Callable[[str], None] | None = None,
        on_torn: Callable[[str], None] | None = None,
    ):
        if fcntl is None:  # pragma: no cover - Windows
            raise OSError("the feature row store needs POSIX file locks (fcntl.flock); this platform has none")
        for name, value, low in (("fsync_interval", fsync_interval, 0), ("upload_rows", upload_rows, 1),
                                 ("pack_bytes", pack_bytes, 1), ("segment_bytes", segment_bytes, 1),
                                 ("auto_compact_segments", auto_compact_segments, 1)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= low:
                raise RowStoreError(f"{name} must be a number >= {low}, got {value!r}")
        self.root = Path(root)
        self.fsync_interval = float(fsync_interval)
        self.upload_rows = int(upload_rows)
        self.pack_bytes = int(pack_bytes)
        self.segment_bytes = int(segment_bytes)
        self.auto_compact_segments = int(auto_compact_segments)
        self.on_corrupt = on_corrupt
        self.on_torn = on_torn
        self.stats = RowStats()
        self.remote = _Remote(remote) if remote else None
        self._spaces: dict[str, _Space] = {}
        self._lock = threading.RLock()
        self._host = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:24] or "host"
        atexit.register(_close_at_exit, weakref.ref(self))

    # -- public API -------------------------------------------------------------------------------
    def get_many(self, namespace: str, keys: Sequence[str]) -> list[np.ndarray | None]:
        """The stored row of each key, or ``None`` where none is stored (or the stored one is damaged).

        Looks in the local segments (re-reading what other processes appended since the last look
        only when a key is missing), then in the shared tier; rows fetched from the shared tier are
        kept locally. A damaged row is reported (``stats.corrupt``, ``on_corrupt``) and treated as
        missing, so the caller recomputes it.

        Args:
            namespace: letters, digits, ``.``, ``_``, ``-`` (at most 128; not starting with ``.``).
            keys: the rows' keys.

        Raises:
            RowStoreError: a bad namespace or key.

        Example:
            >>> import tempfile
            >>> store = RowStore(tempfile.mkdtemp())
            >>> store.get_many("ns", ["a"])
            [None]
        """
        keys = list(keys)
        for k in keys:
            _key_bytes(k)
        with self._lock:
            space = self._space(namespace)
            out: list = [None] * len(keys)
            missing = self._read_local(space, keys, out, range(len(keys)))
            if missing:
                self._refresh(space)
                missing = self._read_local(space, keys, out, missing)
            if missing and self.remote is not None:
                try:
                    missing = self._fetch_remote(space, keys, out, missing)
                except Exception as exc:  # fsspec back ends raise their own types; a miss is recomputed
                    self._remote_failed("read", exc)
                    missing = [i for i in missing if out[i] is None]
            self.stats.hits += len(keys) - len(missing)
            self.stats.misses += len(missing)
            return out

    def put_many(self, namespace: str, items: Iterable[tuple[str, object]]) -> int:
        """Store rows; returns how many were written (keys already stored intact are skipped).

        When it returns, the rows are in the kernel's hands: a crash of this process at any later
        point loses none of them (a power loss may lose up to ``fsync_interval`` seconds of them).

        Args:
            namespace: as in :meth:`get_many`.
            items: ``(key, row)`` pairs; rows are numeric arrays (stored with their dtype and shape).

        Raises:
            RowStoreError: a bad namespace, key or row (nothing of the batch is written).
            OSError: the segment cannot be written (e.g. disk full); nothing of the batch is
                reported written, and the next call starts a fresh segment.

        Example:
            >>> import tempfile
            >>> store = RowStore(tempfile.mkdtemp())
            >>> store.put_many("ns", [("a", np.arange(2.0))]), store.put_many("ns", [("a", np.arange(2.0))])
            (1, 0)
        """
        encoded: dict[str, tuple[bytes, _Loc]] = {}
        for key, row in items:
            if key not in encoded:
                encoded[key] = _encode(key, row)
        with self._lock:
            space = self._space(namespace)
            if any(k not in space.index for k in encoded):
                self._refresh(space)  # what other processes wrote meanwhile
            present = [k for k in encoded if k in space.index]
            if present:  # skip only copies that still read back intact
                got: list = [None] * len(present)
                self._read_local(space, present, got, range(len(present)))
                for k, row in zip(present, got):
                    if row is not None:
                        del encoded[k]
                        self.stats.skipped += 1
            if encoded:
                self._append(space, [raw for raw, _ in encoded.values()], [(k, loc) for k, (_, loc) in encoded.items()])
                self.stats.written += len(encoded)
                space.unsynced += len(encoded)
                if self.remote is not None and space.unsynced >= self.upload_rows:
                    try:
                        self._sync(space, blocking=False)
                    except Exception as exc:  # the rows are stored locally; the next sync uploads them
                        self._remote_failed("upload", exc)
            return len(encoded)

    def flush(self) -> None:
        """fsync this process's open segments (rows written so far then survive a power loss).

        Example:
            >>> import tempfile
            >>> RowStore(tempfile.mkdtemp()).flush()
        """
        with self._lock:
            for space in self._spaces.values():
                w = space.writer
                if w is not None and w.pid == os.getpid():
                    os.fsync(w.fd)
                    w.last_sync = time.monotonic()

    def sync(self, namespace: str | None = None, wait: bool = True) -> int:
        """Upload every locally stored row the shared tier does not list yet; returns rows uploaded.

        One pack plus one index object per ``pack_bytes`` of rows. On one machine, syncs take turns
        (a folder lock); with ``wait=False`` a sync that finds another one running returns 0.

        Args:
            namespace: one namespace, or None for every namespace this process opened.
            wait: wait for another process's sync on this machine to finish.

        Raises:
            RowStoreError: a bad namespace.
            OSError: the shared tier cannot be written.

        Example:
            >>> import tempfile
            >>> RowStore(tempfile.mkdtemp()).sync()  # no shared tier: nothing to do
            0
        """
        if self.remote is None:
            return 0
        with self._lock:
            spaces = [self._space(namespace)] if namespace is not None else list(self._spaces.values())
            return sum(self._sync(s, blocking=wait) for s in spaces)

    def compact(self, namespace: str) -> dict:
        """Merge every segment no live process is writing into one pack; returns what it did.

        Keeps the first intact copy of each key; drops duplicates, damaged records and torn tails
        (each damaged record is reported). Safe while other processes read and write: live
        segments are skipped, the merged pack is in place before any input is removed.

        Args:
            namespace: as in :meth:`get_many`.

        Raises:
            RowStoreError: a bad namespace.

        Example:
            >>> import tempfile
            >>> store = RowStore(tempfile.mkdtemp())
            >>> store.compact("ns")["inputs"]
            0
        """
        with self._lock:
            space = self._space(namespace, auto_compact=False)
            return self._compact(space, blocking=True)

    def compact_remote(self, namespace: str) -> dict:
        """Merge the shared tier's packs of a namespace into one (new objects first, then deletions).

        Args:
            namespace: as in :meth:`get_many`.

        Raises:
            RowStoreError: a bad namespace, or no shared tier configured.

        Example:
            >>> import tempfile
            >>> RowStore(tempfile.mkdtemp(), "memory://rowstore-doc").compact_remote("ns")["packs"]
            0
        """
        if self.remote is None:
            raise RowStoreError("compact_remote: this RowStore has no remote (pass remote= an fsspec URL)")
        with self._lock:
            return self._compact_remote(self._space(namespace))

    def close(self) -> None:
        """Upload what the shared tier lacks, fsync and close this process's segments. Idempotent.

        A failing shared tier does not raise here (nor in ``put_many``'s automatic uploads, nor in
        ``get_many``, where it reads as a miss): it is warned about and listed in
        ``stats.remote_errors``; the rows stay local and the next sync on this machine uploads them.
        Call :meth:`sync` to have such errors raised.

        Example:
            >>> import tempfile
            >>> store = RowStore(tempfile.mkdtemp()); store.close(); store.close()
        """
        with self._lock:
            try:
                if self.remote is not None:
                    for space in self._spaces.values():
                        if space.unsynced:
                            try:
                                self._sync(space, blocking=True)
                            except Exception as exc:  # the rows are stored locally; the next sync uploads them
                                self._remote_failed("upload", exc)
            finally:
                for space in self._spaces.values():
                    self._close_writer(space, fsync=True)

    def _remote_failed(self, what: str, exc: Exception) -> None:
        line = f"row store: {what} of the shared tier {self.remote.url!r} failed: {type(exc).__name__}: {exc}"
        self.stats.remote_errors.append(line)
        warnings.warn(line, RuntimeWarning, stacklevel=3)

    def __enter__(self) -> "RowStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- namespaces and segments -------------------------------------------------------------------
    def _space(self, namespace: str, auto_compact: bool = True) -> _Space:
        if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
            raise RowStoreError(
                f"namespace must be 1-128 letters, digits, '.', '_' or '-' (not starting with '.' or '-'), got {namespace!r}")
        space = self._spaces.get(namespace)
        if space is None:
            space = self._spaces[namespace] = _Space(namespace, self.root / namespace)
            if auto_compact and len(self._segment_names(space)) > self.auto_compact_segments:
                self._compact(space, blocking=False)
            self._refresh(space)
        return space

    def _segment_names(self, space: _Space) -> list[str]:
        try:
            with os.scandir(space.path) as it:
                return sorted(e.name for e in it if _SEGMENT.match(e.name))
        except FileNotFoundError:
            return []

    def _report(self, space: _Space, seg: str, offset: int, reason: str) -> None:
        if (seg, offset) in space.reported:
            return
        space.reported.add((seg, offset))
        line = f"{space.path / seg}@{offset}: {reason}"
        self.stats.corrupt.append(line)
        if self.on_corrupt is not None:
            self.on_corrupt(line)

    def _report_torn(self, space: _Space, seg: str, offset: int, size: int) -> None:
        if (seg, offset, "torn") in space.reported:
            return
        space.reported.add((seg, offset, "torn"))
        line = (f"{space.path / seg}@{offset}: cut short ({size - offset} bytes of an incomplete record at its end: a run "
                "killed mid-write, a full disk or a truncated file); rows past the cut are computed again")
        self.stats.torn.append(line)
        if self.on_torn is not None:
            self.on_torn(line)

    def _refresh(self, space: _Space) -> None:
        """Index the bytes appended to every segment since the last look; forget removed segments."""
        for _attempt in range(3):
            names = self._segment_names(space)
            gone = set(space.scanned) - set(names)
            if gone:
                self._forget(space, gone)
            raced = False
            for name in names:
                try:
                    fd = os.open(space.path / name, os.O_RDONLY)
                except FileNotFoundError:
                    raced = True  # removed by a compaction since the listing: list again
                    continue
                try:
                    size = os.fstat(fd).st_size
                    start = space.scanned.get(name, 0)
                    if size > start:
                        records, stop, damage, garbage = _scan_file(fd, name, start, size, final=False)
                        self._index_records(space, name, records, stop, damage, garbage, start=start)
                        own = space.writer is not None and space.writer.name == name
                        if stop < size and not garbage and not own and _writer_gone(fd):
                            self._report_torn(space, name, stop, size)
                    else:
                        space.scanned.setdefault(name, start)
                finally:
                    os.close(fd)
            if not raced:
                return

    def _index_records(self, space: _Space, name: str, records, stop: int, damage, garbage: bool, start: int) -> None:
        quiet = space.garbage.pop(name, None)
        for offset, reason in damage:
            if reason == "unrecognised bytes" and offset == quiet:
                continue  # the same unrecognised bytes a previous look stopped in
            self._report(space, name, offset, reason)
        if garbage:
            space.garbage[name] = stop
        for key, loc in records:
            self._add(space, key, loc)
        space.scanned[name] = stop

    @staticmethod
    def _add(space: _Space, key: str, loc: _Loc) -> None:
        if key in space.index:
            space.extra.setdefault(key, []).append(loc)
        else:
            space.index[key] = loc

    def _forget(self, space: _Space, segments: set[str]) -> None:
        for seg in segments:
            space.scanned.pop(seg, None)
            space.garbage.pop(seg, None)
        for key in [k for k, l in space.index.items() if l.seg in segments] + [k for k in space.extra]:
            self._drop(space, key, lambda l: l.seg in segments)

    @staticmethod
    def _drop(space: _Space, key: str, bad: Callable[[_Loc], bool]) -> None:
        """Remove the key's locations matching ``bad``; the next surviving copy becomes the primary."""
        locs = [l for l in [space.index.get(key)] + space.extra.get(key, []) if l is not None and not bad(l)]
        space.index.pop(key, None)
        space.extra.pop(key, None)
        if locs:
            space.index[key] = locs[0]
            if len(locs) > 1:
                space.extra[key] = locs[1:]

    def _read_local(self, space: _Space, keys: Sequence[str], out: list, wanted: Iterable[int]) -> list[int]:
        """Fill ``out[i]`` for the wanted indices from local segments; returns those still missing."""
        pending, missing = list(wanted), []
        while pending:  # each round removes at least one location of every key it retries
            by_seg: dict[str, list[tuple[int, _Loc]]] = {}
            for i in pending:
                loc = space.index.get(keys[i])
                if loc is None:
                    missing.append(i)
                else:
                    by_seg.setdefault(loc.seg, []).append((i, loc))
            retry: list[int] = []
            for seg, wants in by_seg.items():
                try:
                    payloads = self._pread(space.path / seg, _spans([loc for _, loc in wants], payload_only=True))
                except FileNotFoundError:
                    self._forget(space, {seg})  # compacted away: a copy may live on elsewhere
                    retry.extend(i for i, _ in wants)
                    continue
                for (i, loc), data in zip(wants, payloads):
                    if len(data) == loc.payload_len and zlib.crc32(data) == loc.crc:
                        out[i] = _row(data, loc)
                        continue
                    self._report(space, seg, loc.start, f"payload checksum mismatch on read (key {keys[i]!r})")
                    self._drop(space, keys[i], lambda l, bad=loc: l == bad)
                    retry.append(i)
            pending = [i for i in retry if out[i] is None]
        return sorted(set(i for i in missing if out[i] is None))

    @staticmethod
    def _pread(path: Path, spans: list[tuple[int, int]]) -> list[bytes]:
        got: list = [b""] * len(spans)
        fd = os.open(path, os.O_RDONLY)
        try:
            for a, b, idx in _coalesce(spans):
                blob = os.pread(fd, b - a, a)
                for i in idx:
                    s, e = spans[i]
                    got[i] = blob[s - a : e - a]
        finally:
            os.close(fd)
        return got

    def _writer(self, space: _Space) -> _Writer:
        w = space.writer
        if w is not None and (w.pid != os.getpid() or w.size >= self.segment_bytes):
            self._close_writer(space, fsync=w.pid == os.getpid())
            w = None
        if w is None:
            space.path.mkdir(parents=True, exist_ok=True)
            name = f"seg-{time.time_ns():016x}-{self._host}-{os.getpid()}-{uuid.uuid4().hex[:8]}.rows"
            tmp = space.path / f".creating-{name}"
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_APPEND, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)  # held for the writer's life: compaction leaves the file alone
                os.rename(tmp, space.path / name)
                _fsync_dir(space.path)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
            w = space.writer = _Writer(fd, name)
            space.scanned[name] = 0
        return w

    def _close_writer(self, space: _Space, fsync: bool) -> None:
        w, space.writer = space.writer, None
        if w is None:
            return
        if w.pid == os.getpid():  # in a forked child the descriptor belongs to the parent's writer
            try:
                if fsync:
                    os.fsync(w.fd)
            finally:
                os.close(w.fd)

    def _append(self, space: _Space, raw: list[bytes], records: list) -> None:
        """Append whole records (``raw``, parsed as ``records``) to this process's segment, then index them."""
        w = self._writer(space)
        data = b"".join(raw)
        try:
            _write_all(w.fd, data)
            now = time.monotonic()
            if self.fsync_interval == 0 or now - w.last_sync >= self.fsync_interval:
                os.fsync(w.fd)
                w.last_sync = now
        except BaseException:
            # part of the batch may be on disk (a torn record): never append after it
            self._close_writer(space, fsync=False)
            raise
        base = w.size
        for key, loc in records:
            self._add(space, key, loc.moved(w.name, base))
            base += loc.end - loc.start
        w.size += len(data)
        space.scanned[w.name] = w.size

    # -- compaction ----------------------------------------------------------------------------------
    def _compact(self, space: _Space, blocking: bool) -> dict:
        report = {"inputs": 0, "rows": 0, "duplicates": 0, "damaged": 0, "bytes_before": 0, "bytes_after": 0, "pack": None}
        if not space.path.is_dir():
            return report
        with _flock(space.path, exclusive=True, blocking=blocking) as got:
            if not got:
                return report
            own = space.writer.name if space.writer is not None else None
            inputs: list[tuple[str, int]] = []
            try:
                for name in self._segment_names(space):
                    if name == own:
                        continue
                    try:
                        fd = os.open(space.path / name, os.O_RDONLY)
                    except FileNotFoundError:
                        continue
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        os.close(fd)  # a live writer's segment
                        continue
                    inputs.append((name, fd))
                self._remove_stale_temporaries(space)
                report["inputs"] = len(inputs)
                if len(inputs) < 2 and not any(n.startswith("seg-") for n, _ in inputs):
                    return report
                # packs (older merges) first, then segments in time order: the first copy of a key wins
                inputs.sort(key=lambda item: (not item[0].startswith("pack-"), item[0]))
                tmp = space.path / f".compact-{uuid.uuid4().hex}"
                out = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
                try:
                    digest, seen, size = hashlib.sha256(), set(), 0
                    try:
                        for name, fd in inputs:
                            fsize = os.fstat(fd).st_size
                            report["bytes_before"] += fsize
                            records, _stop, damage, _g = _scan_file(fd, name, 0, fsize, final=True)
                            for offset, reason in damage:
                                report["damaged"] += 1
                                if reason.startswith("torn"):  # dropped from the pack: said, as a reader says it
                                    self._report_torn(space, name, offset, fsize)
                                else:
                                    self._report(space, name, offset, reason)
                            keep = []
                            for key, loc in records:
                                if key in seen:
                                    report["duplicates"] += 1
                                else:
                                    seen.add(key)
                                    keep.append(loc)
                            for a, b, _idx in _coalesce(_spans(keep, payload_only=False), gap=0, limit=_CHUNK):
                                blob = os.pread(fd, b - a, a)
                                _write_all(out, blob)
                                digest.update(blob)
                                size += len(blob)
                        os.fsync(out)
                    finally:
                        os.close(out)
                    pack = f"pack-{digest.hexdigest()[:40]}.rows"
                    names = {n for n, _ in inputs}
                    if size:
                        os.replace(tmp, space.path / pack)
                    else:
                        os.unlink(tmp)
                except BaseException:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(tmp)  # the inputs are all still there
                    raise
                _fsync_dir(space.path)
                for name in names - {pack}:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(space.path / name)
                _fsync_dir(space.path)
                report.update(rows=len(seen), bytes_after=size, pack=pack if size else None)
                self.stats.compactions += 1
            finally:
                for _name, fd in inputs:
                    os.close(fd)
        self._refresh(space)
        return report

    def _remove_stale_temporaries(self, space: _Space) -> None:
        """Called holding the folder lock, so no other compaction runs; a creator holds its file locked."""
        with os.scandir(space.path) as it:
            names = [e.name for e in it if e.name.startswith((".compact-", ".creating-"))]
        for name in names:
            path = space.path / name
            if name.startswith(".creating-"):
                # a creator opens it, then locks it: between the two only its age tells it is not abandoned
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue
                try:
                    if time.time() - os.fstat(fd).st_mtime < 3600:
                        continue
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # being created right now
                finally:
                    os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        cache = self._remote_cache(space)
        if cache.is_dir():  # copies of remote indexes cut short by a crash (an hour old: nobody is writing them)
            for path in cache.glob(".tmp-*"):
                with contextlib.suppress(FileNotFoundError):
                    if time.time() - path.stat().st_mtime > 3600:
                        path.unlink()

    # -- shared tier -----------------------------------------------------------------------------------
    def _remote_cache(self, space: _Space) -> Path:
        return space.path / "remote"

    def _refresh_remote(self, space: _Space) -> None:
        """List the shared tier's index objects; load the new ones (from the local copy when cached)."""
        listed = self.remote.list_indexes(space.name)
        for digest in sorted(set(space.remote_loaded) - set(listed)):
            self._forget_pack(space, digest)
        for digest in sorted(set(listed) - space.remote_loaded):
            cached = self._remote_cache(space) / f"{digest}.idx"
            try:
                blob = cached.read_bytes()
                from_cache = True
            except FileNotFoundError:
                blob = self.remote.get(self.remote.index_path(space.name, digest))
                from_cache = False
                if blob is None:
                    continue  # deleted since the listing
            try:
                _pack, entries = _read_index_blob(blob, digest)
            except (ValueError, zlib.error, KeyError, TypeError) as exc:
                self._report(space, f"remote/{digest}.idx", 0, f"unreadable shared-tier index ({exc})")
                if from_cache:
                    cached.unlink(missing_ok=True)
                continue
            if not from_cache:
                cached.parent.mkdir(parents=True, exist_ok=True)
                _create_file(cached, blob)
            self._add_remote(space, digest, entries)

    @staticmethod
    def _add_remote(space: _Space, digest: str, entries: list) -> None:
        space.remote_loaded.add(digest)
        for key, offset, length in entries:
            space.remote.setdefault(key, []).append((digest, offset, length))

    def _forget_pack(self, space: _Space, digest: str) -> None:
        space.remote_loaded.discard(digest)
        (self._remote_cache(space) / f"{digest}.idx").unlink(missing_ok=True)
        for key in [k for k, locs in space.remote.items() if any(l[0] == digest for l in locs)]:
            locs = [l for l in space.remote[key] if l[0] != digest]
            if locs:
                space.remote[key] = locs
            else:
                del space.remote[key]

    def _fetch_remote(self, space: _Space, keys: Sequence[str], out: list, missing: list[int]) -> list[int]:
        for _attempt in range(2):
            self._refresh_remote(space)
            plan: dict[str, list[tuple[int, int, int]]] = {}
            for i in missing:
                loc = next((l for l in space.remote.get(keys[i], []) if (l[0], l[1]) not in space.remote_bad), None)
                if loc is not None:
                    plan.setdefault(loc[0], []).append((i, loc[1], loc[2]))
            if not plan:
                break
            raw, records, taken, again = [], [], set(), False
            for digest, wants in plan.items():
                spans = [(o, o + n) for _i, o, n in wants]
                try:
                    blobs = self.remote.get_ranges(self.remote.pack_path(space.name, digest), spans)
                except FileNotFoundError:
                    self._forget_pack(space, digest)  # merged by a remote compaction: list again
                    again = True
                    continue
                for (i, offset, _n), blob in zip(wants, blobs):
                    got, stop, damage, _g = _scan(blob, 0, "", final=True)
                    if damage or len(got) != 1 or got[0][0] != keys[i] or stop != len(blob):
                        space.remote_bad.add((digest, offset))
                        self._report(space, f"remote pack {digest}", offset, f"damaged row in the shared tier (key {keys[i]!r})")
                        again = True
                        continue
                    if out[i] is None and keys[i] not in taken:
                        out[i] = _row(blob[got[0][1].payload_off :], got[0][1])
                        raw.append(blob)
                        records.append(got[0])
                        taken.add(keys[i])
            if raw:
                self._append(space, raw, records)
                self.stats.fetched += len(raw)
            missing = [i for i in missing if out[i] is None]
            if missing:  # duplicates of one key in one call
                missing = self._read_local(space, keys, out, missing)
            if not missing or not again:
                break
        return missing

    def _sync(self, space: _Space, blocking: bool) -> int:
        if not space.path.is_dir():
            return 0
        with _flock(space.path, exclusive=True, blocking=blocking) as got:
            if not got:
                return 0
            self._refresh(space)
            self._refresh_remote(space)
            todo = sorted(k for k in space.index
                          if not any((l[0], l[1]) not in space.remote_bad for l in space.remote.get(k, [])))
            uploaded = 0
            pack: list[bytes] = []
            entries: list[tuple[str, int, int]] = []
            size = 0
            for key, rec in self._raw_records(space, todo):
                if size and size + len(rec) > self.pack_bytes:
                    self._put_pack(space, pack, entries)
                    uploaded += len(entries)
                    pack, entries, size = [], [], 0
                entries.append((key, size, len(rec)))
                pack.append(rec)
                size += len(rec)
            if entries:
                self._put_pack(space, pack, entries)
                uploaded += len(entries)
            space.unsynced = 0
            self.stats.uploaded += uploaded
            return uploaded

    def _raw_records(self, space: _Space, keys: list[str]) -> Iterator[tuple[str, bytes]]:
        """Whole records of the keys, each verified (damaged ones are reported and skipped)."""
        by_seg: dict[str, list[str]] = {}
        for key in keys:
            by_seg.setdefault(space.index[key].seg, []).append(key)
        for seg, ks in by_seg.items():
            locs = [space.index[k] for k in ks]
            try:
                blobs = self._pread(space.path / seg, _spans(locs, payload_only=False))
            except FileNotFoundError:
                continue  # compacted away meanwhile: the next sync uploads them from the pack
            for key, loc, blob in zip(ks, locs, blobs):
                if len(blob) == loc.end - loc.start and zlib.crc32(blob[loc.payload_off - loc.start :]) == loc.crc:
                    yield key, blob
                else:
                    self._report(space, seg, loc.start, f"payload checksum mismatch on upload (key {key!r})")
                    self._drop(space, key, lambda l, bad=loc: l == bad)

    def _put_pack(self, space: _Space, pack: list[bytes], entries: list) -> str:
        data = b"".join(pack)
        digest = hashlib.sha256(data).hexdigest()[:40]
        blob = _index_blob(f"{digest}.rows", len(data), entries)
        self.remote.put(self.remote.pack_path(space.name, digest), data)  # the pack first: a listed index always names a pack
        self.remote.put(self.remote.index_path(space.name, digest), blob)
        self.stats.objects_put += 2
        cache = self._remote_cache(space)
        cache.mkdir(parents=True, exist_ok=True)
        _create_file(cache / f"{digest}.idx", blob)
        if digest not in space.remote_loaded:
            self._add_remote(space, digest, entries)
        return digest

    def _compact_remote(self, space: _Space) -> dict:
        self._refresh_remote(space)
        digests = sorted(space.remote_loaded)
        report = {"packs": len(digests), "rows": 0, "duplicates": 0, "damaged": 0, "pack": None}
        if len(digests) < 2:
            return report
        seen: set[str] = set()
        pack: list[bytes] = []
        entries: list = []
        size = 0
        for digest in digests:
            data = self.remote.get(self.remote.pack_path(space.name, digest))
            if data is None:
                raise OSError(f"compact_remote: pack {digest} of namespace {space.name!r} vanished (another compaction?); try again")
            records, _stop, damage, _g = _scan(data, 0, "", final=True)
            report["damaged"] += len(damage)
            for offset, reason in damage:
                self._report(space, f"remote pack {digest}", offset, reason)
            for key, loc in records:
                if key in seen:
                    report["duplicates"] += 1
                    continue
                seen.add(key)
                rec = data[loc.start : loc.end]
                entries.append((key, size, len(rec)))
                pack.append(rec)
                size += len(rec)
        if entries:
            report["pack"] = self._put_pack(space, pack, entries)
        report["rows"] = len(seen)
        for digest in digests:  # indexes first: nobody is sent to a pack about to go
            if digest != report["pack"]:
                self.remote.rm(self.remote.index_path(space.name, digest))
        for digest in digests:
            if digest != report["pack"]:
                self.remote.rm(self.remote.pack_path(space.name, digest))
                self._forget_pack(space, digest)
        return report


def _close_at_exit(ref) -> None:
    store = ref()
    if store is not None:
        with contextlib.suppress(Exception):
            store.close()


class _Remote:
    """The shared tier through fsspec: whole-object puts (temporary name + rename on ``file://``), ranged gets."""

    def __init__(self, url: str):
        try:
            import fsspec

            self.url = str(url).rstrip("/")
            self.fs, self.base = fsspec.core.url_to_fs(self.url)
        except (ImportError, ValueError) as exc:
            raise OSError(f"row store remote {url!r}: cannot open this fsspec URL ({exc})") from exc
        self.base = self.base.rstrip("/")
        protocol = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self.local = any(p in ("file", "local") for p in protocol)

    def pack_path(self, namespace: str, digest: str) -> str:
        return f"{self.base}/{namespace}/packs/{digest}.rows"

    def index_path(self, namespace: str, digest: str) -> str:
        return f"{self.base}/{namespace}/index/{digest}.idx"

    def list_indexes(self, namespace: str) -> list[str]:
        folder = f"{self.base}/{namespace}/index"
        self.fs.invalidate_cache(folder)
        try:
            names = self.fs.ls(folder, detail=False)
        except FileNotFoundError:
            return []
        return [n.rsplit("/", 1)[-1][: -len(".idx")] for n in names if n.endswith(".idx")]

    def get(self, path: str) -> bytes | None:
        try:
            return self.fs.cat_file(path)
        except FileNotFoundError:
            return None

    def get_ranges(self, path: str, spans: list[tuple[int, int]]) -> list[bytes]:
        got: list = [b""] * len(spans)
        for a, b, idx in _coalesce(spans, gap=1 << 20):
            blob = self.fs.cat_file(path, start=a, end=b)
            for i in idx:
                s, e = spans[i]
                got[i] = blob[s - a : e - a]
        return got

    def put(self, path: str, data: bytes) -> None:
        parent = path.rsplit("/", 1)[0]
        self.fs.makedirs(parent, exist_ok=True)
        if self.local:
            tmp = f"{parent}/.tmp-{uuid.uuid4().hex}"
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, path)
        else:
            self.fs.pipe_file(path, data)

    def rm(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(path)


# --------------------------------------------------------------------------------------------- adapter
class FeatureRows:
    """``Workbench.features``' storage: rows per (encoder namespace, image key) in a :class:`RowStore`.

    The store lives at ``<cache root>/rows/`` (for an fsspec ``--t2i-cache-dir``: in the local mirror,
    with ``<url>/rows`` as its shared tier). Counts go to the cache's stats as before
    (``reused`` / ``computed`` per kind, damaged rows in ``corrupt``). Rows missing here are looked
    up in the old per-file layout (``features/<namespace>/<kk>/<key>.npy``, locally and in the old
    shared layout) and copied in.

    ``Workbench.features`` stores its rows here: ``Workbench.__init__`` makes ``FeatureRows(cache)``,
    ``Workbench.features`` runs the one cache loop (:class:`~t2i_fairness.base.memo.Memo`) over
    :meth:`entries` of the encoder's namespace, and ``Workbench.close()`` (the ``t2i`` fixture's
    teardown, in every worker) closes the store. :meth:`rows` is the same loop, for callers without
    a Workbench.

    Args:
        cache: the session's ``Cache`` (uses its ``root``, ``stats``, ``path``, ``fetch`` and, when
            set, ``remote.url`` / ``remote.fs`` / ``remote.base``).
        legacy: also read old per-file ``.npy`` entries.
        **options: passed to :class:`RowStore` (``fsync_interval``, ``upload_rows``, ...).

    Raises:
        OSError: the remote URL cannot be opened.

    Example:
        >>> import tempfile
        >>> from types import SimpleNamespace
        >>> cache = SimpleNamespace(root=tempfile.mkdtemp(), remote=None,
        ...                         stats=SimpleNamespace(reused={}, computed={}, corrupt=[]))
        >>> rows = FeatureRows(cache, legacy=False)
        >>> feats = rows.rows("enc01", ["k1", "k2"], lambda idx: np.ones((len(idx), 4)), kind="features:clip")
        >>> feats.shape, feats.dtype, cache.stats.computed
        ((2, 4), dtype('float32'), {'features:clip': 2})
        >>> _ = rows.rows("enc01", ["k2"], lambda idx: 1 / 0, kind="features:clip"); cache.stats.reused
        {'features:clip': 1}
        >>> rows.close()
    """

    def __init__(self, cache, *, legacy: bool = True, **options):
        self.cache = cache
        self.legacy = legacy
        remote = getattr(cache, "remote", None)
        url = getattr(remote, "url", None)
        options.setdefault("on_corrupt", cache.stats.corrupt.append)
        options.setdefault("on_torn", cache.stats.corrupt.append)  # said in the summary (report.terminal.corrupt_lines)
        self.store = RowStore(Path(cache.root) / "rows", f"{url}/rows" if url else None, **options)
        self._legacy_remote: dict[str, set[str]] = {}

    def get_many(self, namespace: str, keys: Sequence[str]) -> list[np.ndarray | None]:
        """Rows of the keys (``None`` where missing), from the row store, else from old ``.npy`` files.

        Args:
            namespace: the encoder namespace (``content_key(encoder=fingerprint)[:16]``).
            keys: image keys.

        Raises:
            RowStoreError: a bad namespace or key.

        Example:
            >>> import tempfile
            >>> from types import SimpleNamespace
            >>> cache = SimpleNamespace(root=tempfile.mkdtemp(), remote=None, stats=SimpleNamespace(corrupt=[]))
            >>> FeatureRows(cache, legacy=False).get_many("enc", ["k"])
            [None]
        """
        out = self.store.get_many(namespace, keys)
        if self.legacy:
            missing = [i for i, row in enumerate(out) if row is None]
            if missing:
                found = self._legacy(namespace, keys, out, missing)
                if found:
                    self.store.put_many(namespace, found)
        return out

    def put_many(self, namespace: str, keys: Sequence[str], rows) -> int:
        """Store float32 rows under the keys; returns how many were new.

        Args:
            namespace: the encoder namespace.
            keys: image keys, one per row.
            rows: an (n, dim) array or n arrays; stored as float32.

        Raises:
            RowStoreError: keys and rows differ in number, or a bad key.

        Example:
            >>> import tempfile
            >>> from types import SimpleNamespace
            >>> cache = SimpleNamespace(root=tempfile.mkdtemp(), remote=None, stats=SimpleNamespace(corrupt=[]))
            >>> FeatureRows(cache).put_many("enc", ["a", "b"], np.zeros((2, 3)))
            2
        """
        keys = list(keys)
        if len(keys) != len(rows):
            raise RowStoreError(f"put_many: {len(keys)} keys but {len(rows)} rows")
        return self.store.put_many(namespace, [(k, np.asarray(r, dtype=np.float32)) for k, r in zip(keys, rows)])

    def rows(
        self,
        namespace: str,
        keys: Sequence[str],
        compute: Callable[[list[int]], np.ndarray],
        *,
        kind: str,
        batch_size: int = 32,
        progress=None,
        desc: str = "encoding",
    ) -> np.ndarray:
        """``Workbench.features``' loop: stored rows reused, the missing ones computed in batches and stored.

        Args:
            namespace: the encoder namespace.
            keys: image keys (repeats allowed).
            compute: ``compute(indices)`` -> (len(indices), dim) features of ``keys[i]`` for those i.
            kind: the stats label (``"features:clip"``); ``reused[kind]`` / ``computed[kind]`` grow.
            batch_size: indices per ``compute`` call (and per ``put_many``).
            progress: ``progress(total, desc)`` context manager yielding ``advance(n)`` (None: silent).
            desc: the progress label.

        Raises:
            RowStoreError: a bad namespace or key, or ``compute`` returned the wrong number of rows.

        Example:
            >>> import tempfile
            >>> from types import SimpleNamespace
            >>> cache = SimpleNamespace(root=tempfile.mkdtemp(), remote=None,
            ...                         stats=SimpleNamespace(reused={}, computed={}, corrupt=[]))
            >>> FeatureRows(cache).rows("e", [], lambda idx: None, kind="features:x").shape
            (0, 0)
        """
        from t2i_fairness.base.memo import Memo

        memo = Memo(self.cache, "features", namespace, label=kind, entries=self.entries(namespace))
        rows = memo.get_many(list(keys), lambda idx: _float_rows(compute(idx), len(idx)), batch_size=batch_size,
                             progress=progress, desc=desc)
        return np.stack(rows) if rows else np.zeros((0, 0), np.float32)

    def entries(self, namespace: str) -> "RowEntries":
        """The rows of one namespace as a :class:`~t2i_fairness.base.memo.Memo` backend.

        Example:
            >>> import tempfile
            >>> from types import SimpleNamespace
            >>> rows = FeatureRows(SimpleNamespace(root=tempfile.mkdtemp(), remote=None, stats=SimpleNamespace(corrupt=[])),
            ...                    legacy=False)
            >>> e = rows.entries("enc"); e.store(["k"], [np.ones(2)]); e.lookup(["k", "x"])[0].tolist(), e.lookup(["x"])
            ([1.0, 1.0], [None])
            >>> rows.close()
        """
        return RowEntries(self, namespace)

    def close(self) -> None:
        """Upload to the shared tier what it lacks; fsync and close (call at session end, every worker).

        Example:
            >>> import tempfile
            >>> from types import SimpleNamespace
            >>> FeatureRows(SimpleNamespace(root=tempfile.mkdtemp(), remote=None, stats=SimpleNamespace(corrupt=[]))).close()
        """
        self.store.close()

    # -- old per-file entries ----------------------------------------------------------------------
    def _legacy(self, namespace: str, keys: Sequence[str], out: list, missing: list[int]) -> list[tuple[str, np.ndarray]]:
        found = []
        remote_keys = self._legacy_remote_keys(namespace)
        for i in missing:
            path = Path(self.cache.path("features", keys[i], ".npy", namespace))
            if not path.exists() and keys[i] not in remote_keys:
                continue
            if not path.exists() and not self.cache.fetch(path):
                continue
            row = _read_legacy_npy(path, self.cache.stats.corrupt)
            if row is not None:
                out[i] = row
                found.append((keys[i], row))
        return found

    def _legacy_remote_keys(self, namespace: str) -> set[str]:
        """Keys of the old per-file entries in the shared tier: one recursive listing per namespace."""
        remote = getattr(self.cache, "remote", None)
        if remote is None or not hasattr(remote, "fs"):
            return set()
        if namespace not in self._legacy_remote:
            folder = f"{remote.base.rstrip('/')}/features/{namespace}"
            try:
                names = remote.fs.find(folder)
            except (FileNotFoundError, OSError):
                names = []
            self._legacy_remote[namespace] = {n.rsplit("/", 1)[-1][:-4] for n in names if n.endswith(".npy")}
        return self._legacy_remote[namespace]


def _read_legacy_npy(path: Path, corrupt: list) -> np.ndarray | None:
    try:
        row = np.load(path, allow_pickle=False)
        if row.dtype.kind not in "biuf" or not np.all(np.isfinite(row)):
            raise ValueError(f"dtype {row.dtype} or non-finite values")
    except FileNotFoundError:
        return None
    except Exception as exc:
        corrupt.append(f"{path}: {type(exc).__name__}: {exc}")
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return None
    return row.astype(np.float32, copy=False)


def migrate_legacy_features(cache, rows: FeatureRows | None = None, delete: bool = False) -> int:
    """Copy every old per-file feature entry under ``<cache root>/features`` into the row store.

    Args:
        cache: the ``Cache`` whose old ``features/<namespace>/<kk>/<key>.npy`` files to import.
        rows: the :class:`FeatureRows` to import into (default: a new one on ``cache``, closed after).
        delete: remove each ``.npy`` once its row is stored.

    Returns:
        The number of rows imported (rows already in the store are not counted).

    Raises:
        OSError: the store cannot be written.

    Example:
        >>> import tempfile
        >>> from types import SimpleNamespace
        >>> root = Path(tempfile.mkdtemp())
        >>> (root / "features" / "enc" / "ab").mkdir(parents=True)
        >>> np.save(root / "features" / "enc" / "ab" / "abcd.npy", np.ones(3, np.float32))
        >>> cache = SimpleNamespace(root=root, remote=None, stats=SimpleNamespace(corrupt=[]))
        >>> migrate_legacy_features(cache, delete=True), (root / "features" / "enc" / "ab" / "abcd.npy").exists()
        (1, False)
    """
    own = rows is None
    rows = rows or FeatureRows(cache, legacy=False)
    imported = 0
    try:
        base = Path(cache.root) / "features"
        for folder in sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []:
            namespace = folder.name
            paths = sorted(folder.glob("*/*.npy"))
            for start in range(0, len(paths), 1024):
                batch = []
                for path in paths[start : start + 1024]:
                    row = _read_legacy_npy(path, cache.stats.corrupt)
                    if row is not None:
                        batch.append((path.stem, row))
                imported += rows.store.put_many(namespace, batch)
                if delete:
                    for key, _row in batch:
                        (folder / key[:2] / f"{key}.npy").unlink(missing_ok=True)
    finally:
        if own:
            rows.close()
    return imported


class RowEntries:
    """One namespace of a :class:`FeatureRows` as a :class:`~t2i_fairness.base.memo.Memo` backend
    (``lookup(keys)``, ``store(keys, values)``: one ``put_many`` per batch)."""

    def __init__(self, rows: FeatureRows, namespace: str):
        self.rows, self.namespace = rows, namespace

    def lookup(self, keys: Sequence[str]) -> list[np.ndarray | None]:
        return self.rows.get_many(self.namespace, keys)

    def store(self, keys: Sequence[str], values: Sequence) -> None:
        self.rows.put_many(self.namespace, keys, values)


def _float_rows(made, n: int) -> list[np.ndarray]:
    feats = np.asarray(made, dtype=np.float32)
    if len(feats) != n:
        raise RowStoreError(f"compute returned {len(feats)} rows for {n} keys")
    return list(feats)


class ImageIndex:
    """What every cached image was when it was written: its size and SHA-256, checked when it is read.

    Rows of the namespace ``images`` of the cache's row store (``<cache>/rows/images/``; with an fsspec
    cache, its shared tier too), one per image as written: key ``<image key>.<first 32 hex digits of
    the SHA-256 of its bytes>``, row ``[size]`` (int64). A read computes the file's digest and looks
    for the entry of exactly those bytes: found with the same size, the file is the one written (no
    PNG decode needed). Not found, the file is either damaged (truncated, flipped bytes: it does not
    decode, and is made again) or older than the index (it decodes: it is taken, and its entry
    written). An image made again with the same bytes finds its old entry; one made with other bytes
    gets its own, so no entry ever needs replacing (rows are immutable).

    Args:
        store: the row store (the workbench's :class:`FeatureRows` store, or one of its own).
        read_only: look only: entries of old images are not written (``t2i-fairness plan``).

    Example:
        >>> import tempfile
        >>> index = ImageIndex(RowStore(tempfile.mkdtemp()))
        >>> index.add([ImageIndex.entry("k1", b"png bytes")])
        >>> index.check(["k1", "k1", "k2"], [b"png bytes", b"png bytez", b"png bytes"])
        [True, None, None]
    """

    NAMESPACE = "images"

    def __init__(self, store: RowStore, read_only: bool = False):
        self.store = store
        self.read_only = read_only

    @classmethod
    def of(cls, cache, read_only: bool = False) -> "ImageIndex":
        """An index on ``cache``'s row store (``<root>/rows``, and ``<url>/rows`` for an fsspec cache);
        a read-only one never compacts (compaction writes)."""
        remote = getattr(cache, "remote", None)
        url = getattr(remote, "url", None)
        store = RowStore(Path(cache.root) / "rows", f"{url}/rows" if url else None, on_corrupt=cache.stats.corrupt.append,
                         on_torn=cache.stats.corrupt.append, auto_compact_segments=10**9 if read_only else 64)
        return cls(store, read_only)

    @staticmethod
    def entry(key: str, data: bytes) -> tuple[str, int]:
        """The row key and size of an image's bytes (computed where the bytes are: a writer thread).

        Example:
            >>> ImageIndex.entry("ab12", b"x")
            ('ab12.2d711642b726b04401627ca9fbac32f5', 1)
        """
        return f"{key}.{hashlib.sha256(data).hexdigest()[:32]}", len(data)

    def check(self, keys: Sequence[str], datas: Sequence[bytes]) -> list[bool | None]:
        """Per image: ``True`` when an entry says these are the bytes written, ``None`` when none does."""
        if not keys:
            return []
        wanted = [self.entry(k, d) for k, d in zip(keys, datas)]
        rows = self.store.get_many(self.NAMESPACE, [k for k, _ in wanted])
        return [True if row is not None and row.size == 1 and int(row[0]) == size else None
                for row, (_, size) in zip(rows, wanted)]

    def add(self, entries: Iterable[tuple[str, int]]) -> None:
        """Record images written (or found sound without an entry): ``(row key, size)`` from :meth:`entry`."""
        entries = list(entries)
        if entries and not self.read_only:
            self.store.put_many(self.NAMESPACE, [(k, np.array([size], dtype=np.int64)) for k, size in entries])
