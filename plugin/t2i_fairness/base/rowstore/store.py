"""The row store: per-process segment files, an in-memory index, compaction, and sync to a shared tier.

The design and the alternatives weighed are in docs/rowstore.md.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import socket
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

from t2i_fairness.base.rowstore.codec import (
    RowStoreError,
    _CHUNK,
    _Loc,
    _NAMESPACE,
    _SEGMENT,
    _coalesce,
    _encode,
    _index_blob,
    _key_bytes,
    _read_index_blob,
    _row,
    _scan,
    _scan_file,
    _spans,
)
from t2i_fairness.base.files import FULL, raise_if_full
from t2i_fairness.base.rowstore.remote import _Remote

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None


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

    docs/rowstore.md describes the design.

    Args:
        root: the local folder (one sub-folder per namespace), created on first write.
        remote: an fsspec URL of a shared tier, or None; rows are uploaded by :meth:`sync`.
        fsync_interval: seconds between fsyncs (0: every ``put_many``); a process crash loses nothing.
        on_corrupt, on_torn: called with a line per damaged record / torn segment (default: ``stats``).
        full_as: ``(folder, how the user names it)`` a full disk's error names (default: ``root``).
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
        full_as: tuple[str | os.PathLike, str] | None = None,
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
        self.full_as = (full_as[0], full_as[1]) if full_as else (self.root, "")
        self.stats = RowStats()
        self.remote = _Remote(remote) if remote else None
        self._spaces: dict[str, _Space] = {}
        self._lock = threading.RLock()
        self._host = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:24] or "host"
        atexit.register(_close_at_exit, weakref.ref(self))

    # -- public API -------------------------------------------------------------------------------
    def get_many(self, namespace: str, keys: Sequence[str]) -> list[np.ndarray | None]:
        """The stored row of each key, or ``None`` (also when damaged): local segments, then the shared tier.

        Args:
            namespace: letters, digits, ``.``, ``_``, ``-`` (at most 128; not starting with ``.``).
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
        """Store ``(key, row)`` pairs; returns how many were written (keys already stored are skipped).

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
        """fsync this process's open segments (rows written so far then survive a power loss)."""
        with self._lock:
            for space in self._spaces.values():
                w = space.writer
                if w is not None and w.pid == os.getpid():
                    os.fsync(w.fd)
                    w.last_sync = time.monotonic()

    def sync(self, namespace: str | None = None, wait: bool = True) -> int:
        """Upload every local row the shared tier does not list yet; returns the rows uploaded."""
        if self.remote is None:
            return 0
        with self._lock:
            spaces = [self._space(namespace)] if namespace is not None else list(self._spaces.values())
            return sum(self._sync(s, blocking=wait) for s in spaces)

    def compact(self, namespace: str) -> dict:
        """Merge every segment no live process is writing into one pack; returns what it did."""
        with self._lock:
            space = self._space(namespace, auto_compact=False)
            return self._compact(space, blocking=True)

    def compact_remote(self, namespace: str) -> dict:
        """Merge the shared tier's packs of a namespace into one (new objects first, then deletions)."""
        if self.remote is None:
            raise RowStoreError("compact_remote: this RowStore has no remote (pass remote= an fsspec URL)")
        with self._lock:
            return self._compact_remote(self._space(namespace))

    def close(self) -> None:
        """Upload what the shared tier lacks, fsync and close this process's segments. Idempotent."""
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
                try:
                    self._compact(space, blocking=False)
                except OSError as exc:  # a full disk: the segments are all still there, only not merged
                    if exc.errno not in FULL:
                        raise
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
        try:
            w = self._writer(space)
        except OSError as exc:
            raise_if_full(space.path, exc, *self.full_as)
            raise
        data = b"".join(raw)
        try:
            _write_all(w.fd, data)
            now = time.monotonic()
            if self.fsync_interval == 0 or now - w.last_sync >= self.fsync_interval:
                os.fsync(w.fd)
                w.last_sync = now
        except BaseException as exc:
            # part of the batch may be on disk: cut it off (no half record is left to be read) and never
            # append after it; the rows written before stay whole
            with contextlib.suppress(OSError):
                os.ftruncate(w.fd, w.size)
            self._close_writer(space, fsync=False)
            if isinstance(exc, OSError):
                raise_if_full(space.path / w.name, exc, *self.full_as)
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
