"""What made a number: digests of the weights, hub commits, library versions and the device.

Each source becomes an identity for the cache key: a file or folder by the SHA-256 of its files
(remembered per stat, so a warm run only calls ``stat``), a hub id by its revision's commit,
random weights by config, seed and library versions (:func:`init_identity`). docs/identity.md
explains the choices.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

__all__ = [
    "DigestIndex",
    "Remembered",
    "active_index",
    "device_class",
    "diffusers_folder_files",
    "file_digest",
    "folder_digest",
    "folder_files",
    "gpu_name",
    "hub_commit",
    "hub_snapshot_identity",
    "init_identity",
    "library_versions",
    "looks_versioned",
    "remember",
    "using",
    "weights_digest",
]

INDEX_VERSION = 1
BLOCK = 1 << 20  # bytes read at a time
SEEN_LIMIT = 20  # identities remembered per subject
_COMMIT = re.compile(r"[0-9a-f]{40}")
# files that never decide a model's outputs: model cards, licences, notebooks, git and hub bookkeeping
_SKIP_SUFFIXES = (".md", ".txt.lock", ".lock", ".pyc", ".ipynb")
_SKIP_NAMES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "NOTICE")


# ----------------------------------------------------------------------------------- the index


@dataclass
class _Entry:
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    sha256: str

    @classmethod
    def stamp(cls, st: os.stat_result, sha256: str = "") -> "_Entry":
        return cls(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha256)

    def same_file(self, st: os.stat_result) -> bool:
        return (self.size, self.mtime_ns, self.ctime_ns, self.inode) == (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class DigestIndex:
    """SHA-256 digests of files, remembered per (path, size, mtime, ctime, inode) in ``folder``.

    Args:
        folder: where ``digests.json`` and ``seen.json`` live; ``None`` keeps everything in memory.
        read_only: read what ``folder`` remembers and write nothing there.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = Path(d) / "w.bin"; _ = p.write_bytes(b"weights")
        ...     first = DigestIndex(Path(d) / "identity").file(p)
        ...     again = DigestIndex(Path(d) / "identity")  # a later run: remembered, not read
        ...     again.file(p) == first == hashlib.sha256(b"weights").hexdigest(), again.stats["read"]
        (True, 0)
    """

    def __init__(self, folder: str | os.PathLike | None = None, read_only: bool = False):
        self.location = Path(folder) if folder is not None else None
        self.read_only = read_only  # read what ``folder`` remembers, write nothing (``t2i-fairness plan``)
        self.stats = {"seconds": 0.0, "files": 0, "read": 0, "bytes": 0}
        self._entries: dict[str, _Entry] | None = None
        self._dirty: dict[str, _Entry] = {}
        self._depth = 0
        self._lock = threading.RLock()

    # -- the files ---------------------------------------------------------------------------
    @property
    def path(self) -> Path | None:
        return None if self.location is None else self.location / "digests.json"

    def _load(self) -> dict[str, _Entry]:
        if self._entries is None:
            self._entries = {}
            data = _read_json(self.path)
            if data.get("version") == INDEX_VERSION:
                for name, row in (data.get("files") or {}).items():
                    try:
                        self._entries[name] = _Entry(*row)
                    except TypeError:
                        continue  # a malformed row: read the file again
        return self._entries

    @contextlib.contextmanager
    def _timed(self) -> Iterator[None]:
        with self._lock:
            self._depth += 1
            start = time.perf_counter()
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.stats["seconds"] += time.perf_counter() - start
                    self.save()

    def file(self, path: str | os.PathLike) -> str:
        """The SHA-256 of a file's bytes, read only when the index does not know it (FileNotFoundError,
        IsADirectoryError for a folder: use :meth:`folder`).
        """
        with self._timed():
            name = os.path.abspath(os.fspath(path))
            st = os.stat(name)
            if not os.path.isfile(name):
                raise IsADirectoryError(f"{name} is not a file; digest a folder with folder_digest()")
            self.stats["files"] += 1
            known = self._load().get(name)
            if known is not None and known.same_file(st):
                return known.sha256
            if self.location is None or self.read_only:  # nothing to share, and no lock file (planning writes nothing)
                return self._read(name, st)
            # Another process on this cache (an xdist worker, a second run) may be reading the same
            # file: one reads it, the others wait for its digest and take it from the index.
            with _file_lock(self.location, f"digest-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:24]}"):
                known = self._reload(name)
                if known is not None and known.same_file(st):
                    return known.sha256
                sha = self._read(name, st)
                self.save()  # before the lock goes: a process waiting on it finds the digest
                return sha

    def _reload(self, name: str) -> "_Entry | None":
        """The entry of ``name`` as the index file says now (another process may have saved it)."""
        data = _read_json(self.path)
        row = (data.get("files") or {}).get(name) if data.get("version") == INDEX_VERSION else None
        try:
            entry = _Entry(*row) if row is not None else None
        except TypeError:
            return None
        if entry is not None:
            self._load()[name] = entry
        return entry

    def _read(self, name: str, st: os.stat_result) -> str:
        """Read and digest one file (counted in ``stats``); remembered when it did not change meanwhile."""
        with self._lock:
            digest = hashlib.sha256()
            size = 0
            with open(name, "rb") as fh:
                while True:
                    block = fh.read(BLOCK)
                    if not block:
                        break
                    digest.update(block)
                    size += len(block)
            after = os.stat(name)
            entry = _Entry.stamp(st, digest.hexdigest())
            self.stats["read"] += 1
            self.stats["bytes"] += size
            if entry.same_file(after):  # not written while we read it: worth remembering
                self._load()[name] = entry
                self._dirty[name] = entry
            return entry.sha256

    def files(self, paths: Sequence[str | os.PathLike], root: str | os.PathLike) -> str:
        """One SHA-256 over several files' paths relative to ``root`` and digests (order-independent)."""
        with self._timed():
            root = Path(root)
            lines = sorted(f"{Path(p).relative_to(root).as_posix()}\0{self.file(p)}\n" for p in paths)
            return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()

    def folder(self, folder: str | os.PathLike, files: Sequence[str | os.PathLike] | None = None) -> str:
        """:meth:`files` over ``files`` (default: :func:`folder_files`) relative to ``folder``; a
        FileNotFoundError when the folder does not exist or holds no file.
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is not a folder")
        chosen = list(folder_files(folder) if files is None else files)
        if not chosen:
            raise FileNotFoundError(f"{folder} holds no file to digest")
        return self.files(chosen, folder)

    def save(self) -> None:
        """Write what this process learnt, merged with what other processes wrote meanwhile."""
        if self.path is None or not self._dirty or self.read_only:
            return
        if not self.location.parent.exists():  # the cache folder went away (a test's temporary folder)
            self._dirty.clear()
            return
        with _file_lock(self.location, "digests"):
            data = _read_json(self.path)
            rows = data.get("files") if data.get("version") == INDEX_VERSION else None
            rows = dict(rows or {})
            for name, e in self._dirty.items():
                rows[name] = [e.size, e.mtime_ns, e.ctime_ns, e.inode, e.sha256]
            _write_json(self.path, {"version": INDEX_VERSION, "files": rows})
        self._dirty.clear()

    # -- what was seen before ---------------------------------------------------------------
    def remember(self, subject: str, identity: str) -> "Remembered":
        """Record that ``subject`` (``model /data/ckpt``, ``scorer clip``) has ``identity`` now, and
        say what it had the last time this index saw it."""
        now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
        if self.location is None or not self.location.parent.exists():  # in memory, or the cache went away
            return Remembered(subject, identity, None, None)
        path = self.location / "seen.json"
        if self.read_only:  # what the last run saw, nothing recorded
            mine = (_read_json(path).get("subjects") or {}).get(subject) or {}
            last, seen = mine.get("last"), mine.get("seen") or {}
            return Remembered(subject, identity, last, seen.get(identity))
        with _file_lock(self.location, "seen"):
            data = _read_json(path)
            subjects = data.get("subjects") if isinstance(data.get("subjects"), dict) else {}
            mine = subjects.get(subject) if isinstance(subjects.get(subject), dict) else {}
            last = mine.get("last")
            seen = dict(mine.get("seen") or {})
            before = seen.get(identity)
            if last == identity and before is not None:
                return Remembered(subject, identity, last, before)
            seen[identity] = now
            if len(seen) > SEEN_LIMIT:  # forget the oldest
                seen = dict(sorted(seen.items(), key=lambda kv: kv[1])[-SEEN_LIMIT:])
            subjects[subject] = {"last": identity, "seen": seen}
            _write_json(path, {"version": INDEX_VERSION, "subjects": subjects})
        return Remembered(subject, identity, last, before)


@dataclass(frozen=True)
class Remembered:
    """What :meth:`DigestIndex.remember` found: the identity now, the last one, and when this one was
    last seen before (``None``: never)."""

    subject: str
    identity: str
    last: str | None
    seen_before: str | None

    @property
    def changed(self) -> bool:
        return self.last is not None and self.last != self.identity

    def note(self, made_anew: str, reused: str, what: str = "weights") -> str | None:
        """One line for the summary when the identity changed since the last run, else ``None``.

        Example:
            >>> Remembered("model ./ckpt", "w:sha256-bbbb", "w:sha256-aaaa", None).note("images made anew", "reused")
            'model ./ckpt: new weights sha256-bbbb (the last run with this cache had sha256-aaaa): images made anew; what was cached under sha256-aaaa stays'
        """
        if not self.changed:
            return None
        old, new = differing(self.last, self.identity)
        if self.seen_before is None:
            return (f"{self.subject}: new {what} {new} (the last run with this cache had {old}): {made_anew}; "
                    f"what was cached under {old} stays")
        return f"{self.subject}: back to {what} {new} (last seen {self.seen_before}; the last run had {old}): {reused}"


def differing(old: str, new: str) -> tuple[str, str]:
    """The parts of two ``:``/``@``-separated identities that differ (for short notes)."""
    a, b = re.split(r"([:@])", old), re.split(r"([:@])", new)
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    strip = lambda parts: "".join(parts).strip(":@") or "(none)"  # noqa: E731
    return strip(a[start:len(a) - end]), strip(b[start:len(b) - end])


def _read_json(path: Path | None) -> dict:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or unreadable: start again (it only remembers, it decides nothing)
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict) -> None:
    from t2i_fairness.base.files import atomic_write_bytes

    atomic_write_bytes(path, json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8"), fsync=False)


@contextlib.contextmanager
def _file_lock(folder: Path, name: str) -> Iterator[None]:
    from filelock import FileLock

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        yield  # a read-only cache: nothing can be remembered, and nothing is written
        return
    with FileLock(str(folder / f".{name}.lock")):
        yield


# ----------------------------------------------------------------------------------- the active index

_ACTIVE: list[DigestIndex] = [DigestIndex(None)]


def active_index() -> DigestIndex:
    """The index digests go to: the workbench's (``using``) or a process-wide in-memory one."""
    return _ACTIVE[-1]


@contextlib.contextmanager
def using(index: DigestIndex) -> Iterator[DigestIndex]:
    """Within the block, digests (of generators and scorers alike) use and feed ``index``; the workbench
    wraps model construction in it.
    """
    _ACTIVE.append(index)
    try:
        yield index
    finally:
        _ACTIVE.remove(index)


def file_digest(path: str | os.PathLike) -> str:
    """SHA-256 (64 hex digits) of a file, through the active index."""
    return active_index().file(path)


def folder_files(folder: str | os.PathLike) -> list[Path]:
    """Every file under ``folder`` that can decide a model's outputs, sorted (no hidden files, cards, licences, locks)."""
    folder = Path(folder)
    found = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        for name in filenames:
            if name.startswith(".") or name in _SKIP_NAMES or name.endswith(_SKIP_SUFFIXES):
                continue
            found.append(Path(dirpath) / name)
    return sorted(found)


def diffusers_folder_files(folder: str | os.PathLike) -> list[Path]:
    """The files of a diffusers folder that decide its pixels: ``model_index.json``, ``*.py`` and its component folders."""
    folder = Path(folder)
    index = folder / "model_index.json"
    try:
        spec = json.loads(index.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{folder}: no model_index.json (not a diffusers pipeline folder)") from None
    except ValueError as exc:
        raise ValueError(f"{index}: not valid JSON ({exc})") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{index}: expected a JSON object, got {type(spec).__name__}")
    files = [index] + sorted(p for p in folder.glob("*.py") if p.is_file())
    for name, value in sorted(spec.items()):
        if name.startswith("_") or not isinstance(value, list) or None in value:
            continue  # "_class_name", "_diffusers_version", or a component set to None
        component = folder / name
        if component.is_dir():
            files += folder_files(component)
    return files


def folder_digest(folder: str | os.PathLike, files: Sequence[str | os.PathLike] | None = None) -> str:
    """SHA-256 over a folder's files (default: :func:`folder_files`), through the active index."""
    return active_index().folder(folder, files)


def weights_digest(path: str | os.PathLike) -> str:
    """``sha256-`` and 16 hex digits: a short identity of a weights file or folder, for a fingerprint.

    Example: ``f"my-model@{weights_digest('/models/nightly')}"`` in a ``python:`` factory.
    """
    path = Path(path).expanduser()
    if path.is_dir():
        files = diffusers_folder_files(path) if (path / "model_index.json").is_file() else None
        return "sha256-" + folder_digest(path, files)[:16]
    if not path.exists():
        raise FileNotFoundError(f"no weights at {path}")
    return "sha256-" + file_digest(path)[:16]


# ----------------------------------------------------------------------------------- the hub


def hub_commit(repo_id: str, revision: str | None = None, *, probe: str = "model_index.json", what: str = "--t2i-model") -> str:
    """The commit a hub id's ``revision`` points to now: asked of the hub, or offline the local cache's ref."""
    from t2i_fairness.errors import ModelLoadError

    rev = revision or "main"
    if _COMMIT.fullmatch(rev):
        return rev
    from t2i_fairness.base.hub import how_to_fix, hub_offline, offline_unless_reachable

    asked = None
    with offline_unless_reachable():
        if not hub_offline():
            try:
                from huggingface_hub import HfApi

                sha = HfApi().model_info(repo_id, revision=rev).sha
                if sha:
                    return sha
            except Exception as exc:  # the hub client raises many types: fall back to the cache
                asked = f"the hub said {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    try:
        from huggingface_hub import constants, try_to_load_from_cache
    except ImportError as exc:  # pragma: no cover - huggingface_hub comes with diffusers
        raise ModelLoadError(f"{what} {repo_id!r}: resolving a hub id needs huggingface_hub ({exc})") from exc
    found = try_to_load_from_cache(repo_id, probe, revision=rev)
    if isinstance(found, str):
        commit = Path(found).parent.name
        if _COMMIT.fullmatch(commit):
            return commit
    where = f"revision {rev!r} is not in the Hugging Face cache ({constants.HF_HUB_CACHE})"
    raise ModelLoadError(
        f"{what} {repo_id!r} could not be loaded ({asked + '; ' if asked else ''}{where}). Check the id or path; "
        + how_to_fix(repo_id)
        + " With images already in a shared cache, --t2i-model-revision COMMIT names the snapshot without the weights."
    )


_SNAPSHOT = re.compile(r"(?:^|/)(models|datasets|spaces)--(.+?)/snapshots/([0-9a-f]{40})(?:/|$)")


def hub_snapshot_identity(path: str | os.PathLike) -> str | None:
    """``hub:<repo>@<commit 12>`` when ``path`` lies in a Hugging Face cache snapshot, else ``None``."""
    m = _SNAPSHOT.search(Path(path).as_posix())
    if m is None:
        return None
    return f"hub:{m.group(2).replace('--', '/')}@{m.group(3)[:12]}"


def file_identity(path: str | os.PathLike) -> str:
    """A weights file's identity: its hub snapshot (:func:`hub_snapshot_identity`) or its digest."""
    return hub_snapshot_identity(path) or weights_digest(path)


# ----------------------------------------------------------------------------------- libraries and devices

LIBRARIES = ("torch", "torchvision", "diffusers", "transformers", "open_clip_torch", "timm")


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def library_versions(dists: Iterable[str] = LIBRARIES) -> dict[str, str | None]:
    """Installed versions (``None``: not installed), read from package metadata without importing
    (``open_clip_torch`` reported as ``open_clip``).
    """
    return {("open_clip" if d == "open_clip_torch" else d): _version(d) for d in dists}


def init_identity(*dists: str) -> str:
    """``init-`` and 8 hex digits naming the versions of the libraries that initialise random weights
    (a new version may make other weights, so cache keys say so).
    """
    versions = library_versions(dists)
    return "init-" + hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:8]


def device_class(device: str) -> str:
    """``cuda:1`` -> ``cuda``: the kind of device, which decides which kernels run."""
    return str(device).split(":", 1)[0]


def gpu_name(device: str) -> str | None:
    """The accelerator's name (``NVIDIA H100 80GB HBM3``) for a CUDA device, else ``None``."""
    if device_class(device) != "cuda":
        return None
    try:
        import torch

        index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
        return str(torch.cuda.get_device_name(index))
    except Exception:  # no CUDA after all, or a driver that cannot say
        return None


# ----------------------------------------------------------------------------------- fingerprints of others

_VERSIONED = re.compile(
    r"[0-9a-fA-F]{7,}"            # a digest or a commit
    r"|(?<![A-Za-z])v\d+"          # v1, v2.3
    r"|\d+\.\d+"                   # 1.2, 2024.05
    r"|\d{4}-?\d{2}-?\d{2}"        # a date
)


def looks_versioned(fingerprint: str) -> bool:
    """Whether a fingerprint names a version, a date, a commit or a digest.

    Example:
        >>> [looks_versioned(f) for f in ("my-model", "my-model-v3", "my-model@1a2b3c4d", "m-2024-05-01", "fakegen:v1")]
        [False, True, True, True, True]
    """
    return bool(_VERSIONED.search(fingerprint))


def remember(subject: str, identity: str) -> Remembered:
    """:meth:`DigestIndex.remember` on the active index."""
    return active_index().remember(subject, identity)
