"""What the cache keeps in the row store: image features (with the old per-file ``.npy`` layout read
and migrated) and the image index.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from t2i_fairness.base.rowstore.codec import RowStoreError, _row
from t2i_fairness.base.rowstore.store import RowStore


# --------------------------------------------------------------------------------------------- adapter
class FeatureRows:
    """``Workbench.features``' storage: rows per (encoder namespace, image key) in ``<cache root>/rows/``.

    Args:
        cache: the session's ``Cache`` (its ``root``, ``stats``, ``path``, ``fetch`` and ``remote``).
        legacy: also read (and copy in) old per-file ``features/<namespace>/<kk>/<key>.npy`` entries.

    Example:
        >>> import tempfile
        >>> from types import SimpleNamespace
        >>> cache = SimpleNamespace(root=tempfile.mkdtemp(), remote=None,
        ...                         stats=SimpleNamespace(reused={}, computed={}, corrupt=[]))
        >>> rows = FeatureRows(cache, legacy=False)
        >>> feats = rows.rows("enc01", ["k1", "k2"], lambda idx: np.ones((len(idx), 4)), kind="features:clip")
        >>> feats.shape, cache.stats.computed
        ((2, 4), {'features:clip': 2})
        >>> rows.close()
    """

    def __init__(self, cache, *, legacy: bool = True, **options):
        self.cache = cache
        self.legacy = legacy
        remote = getattr(cache, "remote", None)
        url = getattr(remote, "url", None)
        options.setdefault("on_corrupt", cache.stats.corrupt.append)
        options.setdefault("on_torn", cache.stats.corrupt.append)  # said in the summary (report.terminal.corrupt_lines)
        options.setdefault("full_as", (cache.root, "--t2i-cache-dir"))  # a full disk names the cache folder
        self.store = RowStore(Path(cache.root) / "rows", f"{url}/rows" if url else None, **options)
        self._legacy_remote: dict[str, set[str]] = {}

    def get_many(self, namespace: str, keys: Sequence[str]) -> list[np.ndarray | None]:
        """Rows of the keys (``None`` where missing), from the row store, else from old ``.npy`` files."""
        out = self.store.get_many(namespace, keys)
        if self.legacy:
            missing = [i for i, row in enumerate(out) if row is None]
            if missing:
                found = self._legacy(namespace, keys, out, missing)
                if found:
                    self.store.put_many(namespace, found)
        return out

    def put_many(self, namespace: str, keys: Sequence[str], rows) -> int:
        """Store ``rows`` (an (n, dim) array or n arrays) as float32 under ``keys``; returns how many were new."""
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
        """Stored rows reused, the missing ones computed in batches and stored.

        Args:
            compute: ``compute(indices)`` -> (len(indices), dim) features of ``keys[i]`` for those i.
            kind: the stats label (``"features:clip"``).
            progress: ``progress(total, desc)`` context manager yielding ``advance(n)`` (None: silent).
        """
        from t2i_fairness.base.memo import Memo

        memo = Memo(self.cache, "features", namespace, label=kind, entries=self.entries(namespace))
        rows = memo.get_many(list(keys), lambda idx: _float_rows(compute(idx), len(idx)), batch_size=batch_size,
                             progress=progress, desc=desc)
        return np.stack(rows) if rows else np.zeros((0, 0), np.float32)

    def entries(self, namespace: str) -> "RowEntries":
        """The rows of one namespace as a :class:`~t2i_fairness.base.memo.Memo` backend."""
        return RowEntries(self, namespace)

    def close(self) -> None:
        """Upload to the shared tier what it lacks; fsync and close (call at session end, every worker)."""
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
    """Copy every old ``features/<namespace>/<kk>/<key>.npy`` entry into the row store; returns rows imported."""
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
    """Each cached image's size and SHA-256 when written, checked when it is read.

    Key ``<image key>.<32 hex of the SHA-256>``, row ``[size]``, in the namespace ``images``.

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
                         on_torn=cache.stats.corrupt.append, auto_compact_segments=10**9 if read_only else 64,
                         full_as=(cache.root, "--t2i-cache-dir"))
        return cls(store, read_only)

    @staticmethod
    def entry(key: str, data: bytes) -> tuple[str, int]:
        """The row key and size of an image's bytes (computed where the bytes are: a writer thread)."""
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
