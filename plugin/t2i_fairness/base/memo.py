"""The one "read from the cache, else compute" loop behind every cached value but images.

Features, masks, captions, text tables and k-NN radii are all cached the same way: looked up per
key, computed in batches when missing, written back, and counted as reused or computed in the
run's summary. :class:`Memo` is that loop, once. Where the entries live is its **entries** backend:

* :class:`FileEntries` (the default): one file per key under ``<cache>/<kind>/<namespace>/``, read
  through the shared store when ``--t2i-cache-dir`` is an fsspec URL and written to both (masks,
  captions, text tables, manifolds: few, or large, values). Every file carries a CRC-32 trailer
  (:meth:`Cache.write` with ``checksum=True``): an entry with flipped bytes, or one written before
  entries had checksums, is reported and computed again;
* the feature row store (:meth:`t2i_fairness.base.rowstore.FeatureRows.entries`): many small
  rows per segment file, one ``write()`` per batch (``Workbench.features``).

A backend has ``lookup(keys) -> [value or None]`` and ``store(keys, values)``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Protocol, Sequence

from t2i_fairness.base.cache import Cache, content_key

__all__ = ["Entries", "FileEntries", "Memo", "namespace_of", "no_progress"]


def namespace_of(**identity: Any) -> str:
    """The namespace folder of values that depend on ``identity`` (e.g. ``encoder=<fingerprint>``).

    Example:
        >>> namespace_of(encoder="CLIP:v1") == namespace_of(encoder="CLIP:v1") != namespace_of(encoder="CLIP:v2")
        True
    """
    return content_key(**identity)[:16]


@contextlib.contextmanager
def no_progress(total: int, desc: str):
    yield lambda n: None


class Entries(Protocol):
    """Where a :class:`Memo` keeps its values."""

    def lookup(self, keys: Sequence[str]) -> list[Any | None]:
        """The stored value of each key, or ``None``."""

    def store(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        """Store values (one per key; keys may already be stored by another process)."""


class FileEntries:
    """One file per entry at ``<cache>/<kind>/<namespace>/<key[:2]>/<key><suffix>`` (atomic writes,
    the shared store behind it when there is one; a corrupt entry is reported, removed, recomputed).

    Args:
        cache: the session's :class:`~t2i_fairness.base.cache.Cache`.
        kind, namespace, suffix: the path parts.
        encode, decode: value <-> bytes (``decode`` raises ``CorruptEntry``).

    Example:
        >>> import tempfile
        >>> entries = FileEntries(Cache(tempfile.mkdtemp()), "squares", "", ".txt", lambda v: str(v).encode(), int)
        >>> entries.store(["3"], [9]); entries.lookup(["3", "4"]), entries.path("3").name
        ([9, None], '3.txt')
    """

    def __init__(self, cache: Cache, kind: str, namespace: str, suffix: str,
                 encode: Callable[[Any], bytes], decode: Callable[[bytes], Any]):
        self.cache, self.kind, self.namespace, self.suffix = cache, kind, namespace, suffix
        self.encode, self.decode = encode, decode

    def path(self, key: str):
        return self.cache.path(self.kind, key, self.suffix, self.namespace)

    def lookup(self, keys: Sequence[str]) -> list[Any | None]:
        return [self.cache.read(self.path(k), self.decode, checksum=True) for k in keys]

    def store(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        for key, value in zip(keys, values):
            self.cache.write(self.path(key), self.encode(value), checksum=True)


class Memo:
    """Cached values of one kind.

    Args:
        cache: the session's :class:`~t2i_fairness.base.cache.Cache`.
        kind: the top folder (``features``, ``masks``, ``captions``, ``manifolds``, ...).
        namespace: the folder under ``kind`` (:func:`namespace_of` what every value depends on
            besides its key, such as an encoder's fingerprint; ``""`` for none).
        suffix: the file suffix (``.npy``, ``.json``, ...).
        encode, decode: value <-> bytes; ``decode`` raises
            :class:`~t2i_fairness.base.cache.CorruptEntry` for an unreadable entry, which is then
            reported, removed and computed again.
        label: how the summary counts these (``features:CLIP``); default ``kind``.
        entries: where the values live (default :class:`FileEntries` of the arguments above;
            ``suffix``, ``encode`` and ``decode`` are then unused).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as root:
        ...     memo = Memo(Cache(root), "squares", namespace_of(v=1), ".txt", lambda v: str(v).encode(), lambda b: int(b))
        ...     first = memo.get_many(["2", "3"], lambda idx: [int(k) ** 2 for k in (["2", "3"][i] for i in idx)])
        ...     again = memo.get_many(["3", "4"], lambda idx: [16 for _ in idx])
        ...     first, again, memo.cache.stats.computed["squares"], memo.cache.stats.reused["squares"]
        ([4, 9], [9, 16], 3, 1)
    """

    def __init__(self, cache: Cache, kind: str, namespace: str, suffix: str = "",
                 encode: Callable[[Any], bytes] | None = None, decode: Callable[[bytes], Any] | None = None,
                 label: str | None = None, *, entries: Entries | None = None):
        self.cache = cache
        self.kind = kind
        self.namespace = namespace
        self.label = label or kind
        if entries is None:
            if encode is None or decode is None:
                raise ValueError(f"Memo {kind!r}: give encode and decode (file entries), or entries=")
            entries = FileEntries(cache, kind, namespace, suffix, encode, decode)
        self.entries = entries

    def path(self, key: str):
        """The file of ``key`` (file entries only)."""
        return self.entries.path(key)

    def _count(self, attr: str, n: int) -> None:
        if n:
            counts = getattr(self.cache.stats, attr)
            counts[self.label] = counts.get(self.label, 0) + n

    def lookup(self, keys: Sequence[str]) -> list[Any | None]:
        """The cached value of each key, or ``None`` (nothing is computed or counted)."""
        return self.entries.lookup(keys)

    def get_many(
        self,
        keys: Sequence[str],
        compute: Callable[[list[int]], Sequence[Any]],
        *,
        batch_size: int = 32,
        chunks: Callable[[list[int]], Iterable[list[int]]] | None = None,
        progress=None,
        desc: str = "computing",
    ) -> list[Any]:
        """The value of every key: cached ones read, missing ones computed and written.

        Args:
            keys: one cache key per value wanted (repeats are fine).
            compute: ``compute(indices)`` returns the values of ``keys[i]`` for those indices, in order.
            batch_size: indices per ``compute`` call (when ``chunks`` is not given).
            chunks: split the missing indices into ``compute`` calls yourself (e.g. by total size).
            progress: ``progress(total, desc)`` context manager yielding ``advance(n)``.
            desc: the progress bar's label.

        Raises:
            RuntimeError: ``compute`` returned another number of values than it was asked for.
        """
        values: list[Any | None] = self.lookup(keys)
        todo = [i for i, v in enumerate(values) if v is None]
        self._count("reused", len(keys) - len(todo))
        if not todo:
            return values
        parts = list(chunks(todo)) if chunks else [todo[s:s + batch_size] for s in range(0, len(todo), batch_size)]
        with (progress or no_progress)(len(todo), desc) as advance:
            for part in parts:
                made = list(compute(part))
                if len(made) != len(part):
                    raise RuntimeError(f"{self.label}: computing {len(part)} value(s) returned {len(made)}")
                self.entries.store([keys[i] for i in part], made)
                for i, value in zip(part, made):
                    values[i] = value
                advance(len(part))
        self._count("computed", len(todo))
        return values

    def get(self, key: str, make: Callable[[], Any]) -> Any:
        """One value: read from the cache, or ``make()`` it and write it."""
        return self.get_many([key], lambda idx: [make() for _ in idx])[0]
