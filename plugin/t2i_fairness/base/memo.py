"""The one "read from the cache, else compute" loop behind every cached value but images.

Features, masks, captions, text tables and k-NN radii are looked up per key, computed in batches
when missing, written back and counted in the run's summary by :class:`Memo`. Where entries live
is its backend, anything with ``lookup(keys) -> [value or None]`` and ``store(keys, values)``:
:class:`FileEntries` (one checksummed file per key, the shared store behind it) or the feature
row store (:meth:`t2i_fairness.base.rowstore.FeatureRows.entries`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Protocol, Sequence

from t2i_fairness.base.cache import Cache, EntryLock, content_key

__all__ = ["Entries", "FileEntries", "Memo", "namespace_of", "no_progress"]


def namespace_of(**identity: Any) -> str:
    """The namespace folder of values that depend on ``identity`` (e.g. ``encoder=<fingerprint>``)."""
    return content_key(**identity)[:16]


@contextlib.contextmanager
def no_progress(total: int, desc: str):
    yield lambda n: None


def _opened(progress, total: int, desc: str, step: tuple[str, str]):
    """``progress(total, desc)``; one that times steps (``takes_step``) is also told which (kind, namespace)."""
    if getattr(progress, "takes_step", False):
        return progress(total, desc, step=step)
    return (progress or no_progress)(total, desc)


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
        kind: the top folder (``features``, ``masks``, ``captions``, ``manifolds``, ...).
        namespace: the folder under ``kind``: :func:`namespace_of` what every value depends on
            besides its key, such as an encoder's fingerprint (``""`` for none).
        encode, decode: value <-> bytes; ``decode`` raises
            :class:`~t2i_fairness.base.cache.CorruptEntry` for an entry to compute again.
        label: how the summary counts these (``features:CLIP``); default ``kind``.
        entries: where the values live (default :class:`FileEntries` of the arguments above).

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

    def _count(self, attr: str, n: int, keys=()) -> None:
        if n:
            counts = getattr(self.cache.stats, attr)
            counts[self.label] = counts.get(self.label, 0) + n
        note = getattr(self.cache.stats, "note", None)  # the keys, for the run's distinct counts (CacheStats)
        if note is not None:
            note(attr, self.label, keys)

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

        Missing keys are computed under per-key locks, so a key another process is computing is waited
        for and read: each value is computed once, however the work is sharded.

        Args:
            compute: ``compute(indices)`` returns the values of ``keys[i]`` for those indices, in order.
            batch_size: indices per ``compute`` call (when ``chunks`` is not given).
            chunks: split the missing indices into ``compute`` calls yourself (e.g. by total size).
            progress: ``progress(total, desc)`` context manager yielding ``advance(n)``.

        Raises:
            RuntimeError: ``compute`` returned another number of values than it was asked for.
        """
        values: list[Any | None] = self.lookup(keys)
        todo = [i for i, v in enumerate(values) if v is None]
        reused = len(keys) - len(todo)
        read = [keys[i] for i, v in enumerate(values) if v is not None]  # the keys behind the counts
        if not todo:
            self._count("reused", reused, read)
            return values
        split = chunks or (lambda idx: [idx[s:s + batch_size] for s in range(0, len(idx), batch_size)])
        computed = 0
        made_here: set[str] = set()
        with _opened(progress, len(todo), desc, (self.kind, self.namespace)) as advance:
            pending = todo
            while pending:
                theirs: list[int] = []  # keys another process is computing now: waited for below
                for part in split(pending):
                    locks, mine = self._try_locks([keys[i] for i in part])
                    try:
                        ours = [i for i in part if keys[i] in mine]
                        theirs += [i for i in part if keys[i] not in mine]
                        step = len(ours)
                        # finished by another process since we looked (a repeat of a key this call made is
                        # computed again, as before the locks: what a caller's counts rely on)
                        done_meanwhile = self._fill_from_cache(keys, [i for i in ours if keys[i] not in made_here], values)
                        reused += len(done_meanwhile)
                        read += [keys[i] for i in done_meanwhile]
                        ours = [i for i in ours if i not in done_meanwhile]
                        if ours:
                            made = list(compute(ours))
                            if len(made) != len(ours):
                                raise RuntimeError(f"{self.label}: computing {len(ours)} value(s) returned {len(made)}")
                            self.entries.store([keys[i] for i in ours], made)
                            for i, value in zip(ours, made):
                                values[i] = value
                                made_here.add(keys[i])
                            computed += len(ours)
                        advance(step)
                    finally:
                        for lock in locks:
                            lock.release()
                for key in dict.fromkeys(keys[i] for i in theirs):  # wait for each holder, one lock at a time
                    self._lock(key).acquire().release()
                found = self._fill_from_cache(keys, theirs, values)
                reused += len(found)
                read += [keys[i] for i in found]
                advance(len(found))
                pending = [i for i in theirs if i not in found]  # its holder failed: compute them ourselves
        self._count("reused", reused, read)
        self._count("computed", computed, made_here)
        return values

    def _lock(self, key: str):
        """The per-key lock other processes computing the same entry take (``<cache>/locks/``)."""
        from pathlib import Path

        folder = Path(self.cache.root) / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        return EntryLock(folder / f"memo-{content_key(kind=self.kind, namespace=self.namespace, key=key)}.lock")

    def _try_locks(self, keys: Sequence[str]) -> tuple[list, set[str]]:
        """Locks taken without waiting on the distinct ``keys``, and the keys they cover."""
        locks, mine = [], set()
        for key in dict.fromkeys(keys):
            lock = self._lock(key)
            try:
                lock.acquire(timeout=0)
            except Exception:  # filelock.Timeout: another process holds it
                continue
            locks.append(lock)
            mine.add(key)
        return locks, mine

    def _fill_from_cache(self, keys: Sequence[str], indices: Sequence[int], values: list) -> set[int]:
        """Look ``indices`` up again (another process may have stored them); fill ``values``, return those found."""
        if not indices:
            return set()
        found = set()
        for i, value in zip(indices, self.entries.lookup([keys[i] for i in indices])):
            if value is not None:
                values[i] = value
                found.add(i)
        return found

    def get(self, key: str, make: Callable[[], Any]) -> Any:
        """One value: read from the cache, or ``make()`` it and write it."""
        return self.get_many([key], lambda idx: [make() for _ in idx])[0]
