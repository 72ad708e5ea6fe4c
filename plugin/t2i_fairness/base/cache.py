"""A content-addressed, crash-safe cache for generated images, features and masks.

Keys are SHA-256 digests of everything that decides the content (:func:`content_key`). Writes
are atomic (a temporary file, then ``os.replace``); per-key file locks let concurrent workers make
each entry once; an entry that cannot be read back (a truncated PNG, a CRC-32 trailer that does
not match) is reported, removed and made again. :class:`RemoteStore` adds a shared fsspec tier.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from filelock import FileLock
from PIL import Image

from t2i_fairness.errors import DiskFullError
from t2i_fairness.base.files import atomic_write_bytes  # noqa: F401  (re-exported)


def content_key(**parts: Any) -> str:
    """A stable digest of JSON-serialisable parts (order of keyword arguments does not matter).

    Example:
        >>> content_key(prompt="bag", seed=1) == content_key(seed=1, prompt="bag")
        True
    """
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:40]


class CorruptEntry(Exception):
    """A cache entry exists but cannot be decoded."""


CHECKSUM_TAG = b"\nt2i-crc32:"  # a checksummed entry ends with this tag and 8 hex digits of the CRC-32 of what precedes it


def add_checksum(data: bytes) -> bytes:
    """``data`` with a CRC-32 trailer, so flipped or lost bytes are detected when it is read back."""
    return data + CHECKSUM_TAG + f"{zlib.crc32(data) & 0xFFFFFFFF:08x}".encode("ascii")


def strip_checksum(data: bytes) -> bytes:
    """The payload of :func:`add_checksum`'s output.

    Raises:
        CorruptEntry: no trailer (a truncated or pre-checksum entry), or a CRC-32 that differs.
    """
    n = len(CHECKSUM_TAG) + 8
    if len(data) < n or data[-n:-8] != CHECKSUM_TAG:
        raise CorruptEntry(f"no checksum trailer ({len(data)} bytes: truncated, or written before entries carried checksums)")
    payload, want = data[:-n], data[-8:].decode("ascii", "replace")
    got = f"{zlib.crc32(payload) & 0xFFFFFFFF:08x}"
    if got != want:
        raise CorruptEntry(f"checksum mismatch: CRC-32 of {len(payload)} bytes is {got}, the entry says {want}")
    return payload


class EntryLock:
    """A per-entry file lock whose file is removed by its last holder (else ``locks/`` grows forever).

    A waiter may then lock an unlinked file while a newcomer locks a new one: both may make the
    entry, which costs time, never correctness (writers re-check under the lock and write identical
    bytes atomically).
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = FileLock(str(self.path))

    def acquire(self, timeout: float = -1) -> "EntryLock":
        self._lock.acquire(timeout=timeout)
        return self

    def release(self) -> None:
        if self._lock.lock_counter == 1:  # the outermost release: remove the file while still holding it
            try:
                os.unlink(self.path)
            except OSError:
                pass  # already gone, or a platform that cannot unlink an open file
        self._lock.release()

    def __enter__(self) -> "EntryLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def encode_png(image: Image.Image) -> bytes:
    """PNG bytes of ``image``; the truth a simulated image carries (:mod:`t2i_fairness.base.truth`) goes with it."""
    from t2i_fairness.base.truth import TRUTH_KEY

    buf = io.BytesIO()
    truth = image.info.get(TRUTH_KEY)
    if truth is None:
        image.save(buf, format="PNG")
    else:
        from PIL import PngImagePlugin

        chunk = PngImagePlugin.PngInfo()
        chunk.add_text(TRUTH_KEY, truth)
        image.save(buf, format="PNG", pnginfo=chunk)
    return buf.getvalue()


PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"  # the IEND chunk every complete PNG ends with


def decode_png(data: bytes) -> Image.Image:
    # Pillow decodes a PNG missing its last ~20 bytes (IDAT checksum, IEND) without complaint.
    if not data.endswith(PNG_END):
        raise CorruptEntry(f"truncated PNG: {len(data)} bytes, no IEND chunk at the end")
    try:
        image = Image.open(io.BytesIO(data))
        image.load()  # raises on truncation
    except Exception as exc:
        raise CorruptEntry(f"{type(exc).__name__}: {exc}") from exc
    return image


def encode_array(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def decode_array(data: bytes) -> np.ndarray:
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as exc:
        raise CorruptEntry(f"{type(exc).__name__}: {exc}") from exc


@dataclass
class CacheStats:
    """Counts the terminal summary reports."""

    generated: int = 0  # images the generator made (whole canonical batches: what a paid API bills)
    from_cache: int = 0
    regenerated: int = 0  # of ``generated``, images the cache still had (made again to complete their batch)
    corrupt: list[str] = field(default_factory=list)  # paths found unreadable and remade
    blank: list[str] = field(default_factory=list)  # "prompt (seed N)" of generated images that are entirely black
    computed: dict[str, int] = field(default_factory=dict)  # kind -> entries computed (features, masks)
    reused: dict[str, int] = field(default_factory=dict)  # kind -> entries read from cache
    identity: list[str] = field(default_factory=list)  # weights that changed since the last run, unversioned fingerprints
    digests: dict[str, float] = field(default_factory=dict)  # weights digests: seconds, files, read, bytes (base.identity)
    # the keys behind the counts, so a run's counts are of distinct entries whatever the sharding: an entry
    # computed by one xdist worker and read by another is computed once and reused never (run_counts)
    computed_keys: dict[str, set] = field(default_factory=dict)  # kind -> keys computed by this process
    reused_keys: dict[str, set] = field(default_factory=dict)  # kind -> keys read from the cache by this process
    generated_keys: set = field(default_factory=set)  # images this process wrote
    from_cache_keys: set = field(default_factory=set)  # images this process read from the cache

    def note(self, attr: str, label: str, keys) -> None:
        """Record ``keys`` as computed (``attr="computed"``) or reused (``"reused"``) entries of ``label``."""
        if keys:
            getattr(self, f"{attr}_keys").setdefault(label, set()).update(keys)

    def payload(self) -> dict:
        """These counts as plain data for another process (xdist's workeroutput): key sets as sorted lists."""
        import dataclasses

        data = dataclasses.asdict(self)
        for name in ("computed_keys", "reused_keys"):
            data[name] = {k: sorted(v) for k, v in data[name].items()}
        for name in ("generated_keys", "from_cache_keys"):
            data[name] = sorted(data[name])
        return data


def is_url(location: str | os.PathLike) -> bool:
    """Whether ``--t2i-cache-dir`` names an fsspec URL (``s3://``, ``gs://``, ``memory://``, ``file://``)."""
    return "://" in str(location)


class RemoteStore:
    """A shared second tier in any fsspec filesystem, so CI shards on several machines share one cache.

    Entries are content-addressed, so a key always holds the same bytes: a put is one whole object,
    and no cross-machine lock is needed (two machines may write the same content).
    """

    def __init__(self, url: str):
        import fsspec

        self.url = url.rstrip("/")
        self.fs, self.base = fsspec.core.url_to_fs(self.url)

    def _remote(self, relative: str) -> str:
        return f"{self.base.rstrip('/')}/{relative}"

    def get(self, relative: str) -> bytes | None:
        try:
            return self.fs.cat_file(self._remote(relative))
        except (FileNotFoundError, OSError):
            return None

    def put(self, relative: str, data: bytes) -> None:
        target = self._remote(relative)
        parent = target.rsplit("/", 1)[0]
        self.fs.makedirs(parent, exist_ok=True)
        if self.fs.protocol in ("file", "local") or "file" in (self.fs.protocol or ()):
            tmp = f"{target}.{os.getpid()}.tmp"
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, target)
        else:
            self.fs.pipe_file(target, data)


class Cache:
    """Entries live at ``root/<kind>/<namespace>/<key[:2]>/<key><suffix>``.

    Args:
        root: the cache folder; created on first write.
        remote: an fsspec URL of a shared store behind it: a local miss is fetched from it, and
            every write is also put there.
    """

    def __init__(self, root: str | os.PathLike, remote: str | None = None):
        self.root = Path(root)
        self.stats = CacheStats()
        self.remote = RemoteStore(remote) if remote else None

    def check_writable(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-probe-{os.getpid()}"
            atomic_write_bytes(probe, b"ok")
            probe.unlink()
        except OSError as exc:
            raise OSError(f"--t2i-cache-dir {str(self.root)!r} is not writable: {exc.strerror or exc}") from exc

    def path(self, kind: str, key: str, suffix: str, namespace: str = "") -> Path:
        base = self.root / kind
        if namespace:
            base = base / namespace
        return base / key[:2] / f"{key}{suffix}"

    def listed(self, kind: str, suffix: str = ".png", namespace: str = "") -> set[str]:
        """The keys of the entries of ``kind`` this folder holds (file names without ``suffix``), listed once;
        an empty set when there is no such folder. Creates nothing.
        """
        base = self.root / kind / namespace if namespace else self.root / kind
        out: set[str] = set()
        try:
            shards = [e.path for e in os.scandir(base) if e.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            return out
        for shard in shards:
            try:
                with os.scandir(shard) as it:
                    out.update(e.name[: -len(suffix)] for e in it if e.name.endswith(suffix))
            except FileNotFoundError:
                continue
        return out

    def lock(self, path: Path) -> EntryLock:
        """The lock of one entry (or batch): ``root/locks/<name>.lock``, removed by its last holder."""
        lock_path = self.root / "locks" / f"{path.name}.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        return EntryLock(lock_path)

    def fetch(self, path: Path) -> bool:
        """Make sure a local copy exists, fetching it from the shared store on a miss; True if present."""
        if path.exists():
            return True
        if self.remote is None:
            return False
        data = self.remote.get(path.relative_to(self.root).as_posix())
        if data is None:
            return False
        atomic_write_bytes(path, data)
        return True

    def read(self, path: Path, decode: Callable[[bytes], Any], checksum: bool = False) -> Any | None:
        """The decoded entry, or ``None`` when it is missing; a corrupt entry (with ``checksum``, one whose
        CRC-32 trailer does not match) is reported and removed, so it is made again.
        """
        self.fetch(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return decode(strip_checksum(data) if checksum else data)
        except CorruptEntry:
            self.stats.corrupt.append(str(path))
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            return None

    def write(self, path: Path, data: bytes, checksum: bool = False) -> None:
        """Write an entry atomically (and to the shared store); ``checksum`` appends a CRC-32 trailer."""
        if checksum:
            data = add_checksum(data)
        try:
            atomic_write_bytes(path, data)
        except DiskFullError as exc:  # named as the user knows the folder
            raise exc.within(self.root, "--t2i-cache-dir") from exc
        if self.remote is not None:
            self.remote.put(path.relative_to(self.root).as_posix(), data)
