"""Lazy, batched, cached image generation with seeds that do not depend on how work is split.

An image is identified by (generator fingerprint, prompt, seed, settings); its seed comes from
(prompt, image index, base seed) alone, and its batch is canonical: one prompt's indices
``[b * batch_size, (b + 1) * batch_size)``. Batched kernels round pixels differently with batch
composition, so canonical batches give the same bytes whatever the order, cache or sharding.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager, Iterator, Sequence

from PIL import Image

from t2i_fairness.errors import DiskFullError
from t2i_fairness.base.cache import Cache, CorruptEntry, content_key, decode_png, encode_png
from t2i_fairness.base.rowstore import ImageIndex
from t2i_fairness.generators import GeneratorSource


def derive_seed(prompt: str, index: int, base_seed: int = 0) -> int:
    """A 32-bit seed from (prompt, image index, base seed) only.

    Example:
        >>> derive_seed("bag in Africa", 0) == derive_seed("bag in Africa", 0) != derive_seed("bag in Africa", 1)
        True
    """
    digest = hashlib.sha256(f"{base_seed}\x1f{index}\x1f{prompt}".encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big")


@dataclass(frozen=True)
class ImageRef:
    """A generated image in the cache: where it is and what made it."""

    key: str
    path: Path
    prompt: str
    index: int
    seed: int

    def load(self) -> Image.Image:
        with Image.open(self.path) as im:
            return im.convert("RGB")


Progress = Callable[[int, str], ContextManager[Callable[[int], None]]]


@contextlib.contextmanager
def tqdm_progress(total: int, desc: str) -> Iterator[Callable[[int], None]]:
    from tqdm import tqdm

    with tqdm(total=total, desc=desc, unit="img", file=sys.stderr, mininterval=2.0, dynamic_ncols=True) as bar:
        yield bar.update


class ImageFactory:
    """Makes the images a test asks for, only those missing, in canonical batches.

    Args:
        source: the generator (loaded on first need).
        base_seed: ``--t2i-seed``; changes every image's seed.
        write_threads: threads that encode and write a batch while the next one generates (default
            up to 4; ``0`` writes each batch first). The bytes and counts are the same either way.
    """

    def __init__(self, source: GeneratorSource, cache: Cache, base_seed: int = 0, progress: Progress = tqdm_progress,
                 write_threads: int | None = None, index: ImageIndex | None = None):
        self.write_threads = write_threads
        self._index = index  # every image's size and digest as written (default: one on the cache's row store)
        self.measured = [0.0, 0]  # seconds generating (model loading excluded, writes included), images made
        self.on_measured: Callable[[float, int], None] | None = None  # told the totals after each generating call
        self.clock = None  # a spine.rates.RunClock: the run's images planned and time left, shown on each progress line
        self.source = source
        self.cache = cache
        self.base_seed = base_seed
        self.progress = progress
        self.batch_size = max(1, int(source.settings.batch_size or 1))

    def ref(self, prompt: str, index: int) -> ImageRef:
        """The cache entry of one image: the generator's fingerprint (or a manifest image's own identity),
        the prompt, the seed and the settings; new weights give new keys.
        """
        seed = derive_seed(prompt, index, self.base_seed)
        item = self.source.item_key(prompt, seed) if self.source.item_key is not None else None
        key = content_key(generator=item or self.source.fingerprint, prompt=prompt, seed=seed,
                          settings=self.source.settings.key())
        return ImageRef(key, self.cache.path("images", key, ".png"), prompt, index, seed)

    def keys(self, prompt: str, n: int) -> Iterator[str]:
        """The cache keys of images ``0 .. n-1`` of ``prompt``, as :meth:`ref` gives them, built once per
        prompt (planning computes keys of many images).
        """
        if self.source.item_key is not None:  # each image has its own identity: ref() knows it
            yield from (self.ref(prompt, i).key for i in range(n))
            return
        import json

        head = (f'{{"generator":{json.dumps(self.source.fingerprint, default=str)},'
                f'"prompt":{json.dumps(prompt)},"seed":').encode("utf-8")
        tail = (',"settings":' + json.dumps(self.source.settings.key(), sort_keys=True, separators=(",", ":"),
                                            default=str) + "}").encode("utf-8")
        salt = f"{self.base_seed}\x1f".encode("utf-8")
        text = f"\x1f{prompt}".encode("utf-8")
        sha = hashlib.sha256
        for i in range(n):
            seed = int.from_bytes(sha(salt + str(i).encode() + text).digest()[:4], "big")
            yield sha(head + str(seed).encode() + tail).hexdigest()[:40]

    @property
    def index(self) -> ImageIndex:
        """The images' index (:class:`~t2i_fairness.base.rowstore.ImageIndex`): what each was when written."""
        if self._index is None:
            self._index = ImageIndex.of(self.cache)
        return self._index

    def states(self, refs: Sequence[ImageRef]) -> list[bool | None]:
        """Per cached image: ``True`` (sound), ``False`` (corrupt) or ``None`` (missing; fetched from the
        shared store first). An image whose bytes match its index entry (size and SHA-256) is sound
        without decoding; one without an entry is decoded once and given one.
        """
        datas: list[bytes | None] = []
        for r in refs:
            try:
                datas.append(r.path.read_bytes() if self.cache.fetch(r.path) else None)
            except FileNotFoundError:
                datas.append(None)
        there = [i for i, d in enumerate(datas) if d is not None]
        known = self.index.check([refs[i].key for i in there], [datas[i] for i in there])
        out: list[bool | None] = [None] * len(refs)
        adopt = []
        for i, ok in zip(there, known):
            if ok:
                out[i] = True
                continue
            try:
                decode_png(datas[i])
            except CorruptEntry:
                out[i] = False
                continue
            out[i] = True
            adopt.append(ImageIndex.entry(refs[i].key, datas[i]))
        self.index.add(adopt)
        return out

    def state(self, ref: ImageRef) -> bool | None:
        """:meth:`states` of one image."""
        return self.states([ref])[0]

    def sound(self, ref: ImageRef) -> bool:
        """Whether a cached image is there and sound (:meth:`state` is ``True``)."""
        return self.state(ref) is True

    def images(self, prompts: Sequence[str], n: int, desc: str = "generating") -> list[list[ImageRef]]:
        """``n`` images of each prompt (a list per prompt, in prompt order), generating the missing ones.

        Raises:
            ValueError: ``n`` < 1, no prompts, or a prompt the generator cannot serve (a manifest lacks it).
        """
        if n < 1:
            raise ValueError(f"images per prompt must be >= 1, got {n}")
        if not prompts:
            raise ValueError("images() got an empty prompt set: nothing to generate or score; check the objects, "
                             "regions or languages the test selects (--t2i-objects, the prompt file)")
        refs = [[self.ref(p, i) for i in range(n)] for p in dict.fromkeys(prompts)]
        by_prompt = {row[0].prompt: row for row in refs}
        batches: list[tuple[list[ImageRef], list[ImageRef]]] = []  # (canonical batch, its images missing now)
        missing_count = 0
        for row in refs:
            for start in range(0, n, self.batch_size):
                batch = row[start : start + self.batch_size]
                states = [self.state(r) for r in batch]
                for r, st in zip(batch, states):
                    if st is False:
                        self.cache.stats.corrupt.append(str(r.path))
                if all(states):
                    self.cache.stats.from_cache += len(batch)
                    _note_keys(self.cache.stats, "from_cache_keys", batch)
                    continue
                self.cache.stats.from_cache += sum(1 for st in states if st)
                _note_keys(self.cache.stats, "from_cache_keys", [r for r, st in zip(batch, states) if st])
                missing_count += sum(1 for st in states if not st)
                batches.append((batch, [r for r, st in zip(batch, states) if not st]))
        if batches:
            self._generate(batches, missing_count, desc)
        return [by_prompt[p] for p in prompts]

    def _generate(self, batches: list[tuple[list[ImageRef], list[ImageRef]]], total: int, desc: str) -> None:
        generator = self.source.get()
        check = getattr(generator, "check_available", None)
        if check is not None:
            flat = [r for b, _ in batches for r in b]
            check([r.prompt for r in flat], [r.seed for r in flat])
        deferred = []
        start, made = time.perf_counter(), self.cache.stats.generated
        clock = self.clock
        if clock is not None:
            desc = f"{desc} [{clock.describe(self.measured)}]"
        with self.progress(total, desc) as shown, _Writer(self.cache, self.write_threads, self.index) as writer:
            def advance(n: int) -> None:
                shown(n)
                if clock is not None:
                    clock.written += n

            # a batch's images are encoded and written on the writer's threads while the next batch
            # generates; its lock is released (here, on this thread) once they are all written
            def make_holding(batch, missing, lock) -> None:
                try:
                    writer.check()  # a write of the batch in flight failed (a full disk): generate nothing more
                    pending = self._make(generator, batch, writer=writer, missing=missing)
                except BaseException:
                    lock.release()
                    raise
                writer.after(pending, lock, advance)

            for batch, missing in batches:
                lock = self.cache.lock(batch[0].path.with_suffix(f".b{len(batch)}"))
                try:
                    lock.acquire(timeout=0)
                except Exception:  # another worker is making this batch: come back to it
                    deferred.append((batch, missing, lock))
                    continue
                make_holding(batch, missing, lock)
            for batch, missing, lock in deferred:
                writer.drain()  # hold no lock while waiting for one: two workers would wait on each other
                lock.acquire()
                make_holding(batch, missing, lock)
        self._measure(start, made)

    def _measure(self, start: float, made: int) -> None:
        """Add the time since ``start`` and the images generated since the count was ``made`` to the totals."""
        if self.cache.stats.generated > made:
            self.measured[0] += time.perf_counter() - start
            self.measured[1] += self.cache.stats.generated - made
            if self.on_measured is not None:
                self.on_measured(*self.measured)

    def make_batch(self, batch: Sequence[ImageRef], only: Sequence[ImageRef] | None = None, wait: bool = True) -> int | None:
        """Generate one canonical batch under its lock and write its missing images (or those of ``only``).

        Returns how many were written, or ``None`` when ``wait`` is false and another process holds it.

        Raises:
            ModelLoadError: the generator cannot be loaded; anything the generator raises.
        """
        batch = list(batch)
        lock = self.cache.lock(batch[0].path.with_suffix(f".b{len(batch)}"))
        try:
            lock.acquire(timeout=-1 if wait else 0)
        except Exception:  # filelock.Timeout: another process is making this batch
            return None
        try:
            for r in batch:
                self.cache.fetch(r.path)
            generator = self.source.get()
            check = getattr(generator, "check_available", None)
            if check is not None:
                check([r.prompt for r in batch], [r.seed for r in batch])
            start, made = time.perf_counter(), self.cache.stats.generated
            written = self._make(generator, batch, only)
            self._measure(start, made)
            return written
        finally:
            lock.release()

    def _make(self, generator, batch: list[ImageRef], only: Sequence[ImageRef] | None = None,
              writer: "_Writer | None" = None, missing: Sequence[ImageRef] = ()):
        """Generate one canonical batch and write the images still missing (of ``only`` when given).

        Without ``writer`` returns how many were written; with one, returns the pending batch for its
        threads. Images another process wrote meanwhile count as from the cache.
        """
        wanted = [r for r in batch if r in set(batch if only is None else only)]
        todo = [r for r, st in zip(wanted, self.states(wanted)) if st is not True]
        self.cache.stats.from_cache += sum(1 for r in missing if r not in todo)
        _note_keys(self.cache.stats, "from_cache_keys", [r for r in missing if r not in todo])
        if not todo:
            return 0 if writer is None else _Pending([], [])
        images = generator.generate([r.prompt for r in batch], [r.seed for r in batch])
        if len(images) != len(batch):
            raise RuntimeError(
                f"generator {self.source.spec!r} returned {len(images)} images for {len(batch)} prompts"
            )
        for r, im in zip(batch, images):
            if not isinstance(im, Image.Image):
                raise TypeError(
                    f"generator {self.source.spec!r} returned {type(im).__name__} instead of a PIL image "
                    f"for prompt {r.prompt!r} (seed {r.seed}); generate(prompts, seeds) must return PIL images"
                )
        self.cache.stats.generated += len(batch)  # the generator made (and a paid API bills) the whole batch
        self.cache.stats.regenerated += len(batch) - len(todo)
        _note_keys(self.cache.stats, "generated_keys", todo)
        jobs = [(r, im) for r, im in zip(batch, images) if r in todo]
        if writer is None:
            written = [_store_image(self.cache, r, im) for r, im in jobs]
            self.index.add(entry for _, entry in written)
            for (r, _), (blank, _) in zip(jobs, written):
                self._note_blank(r, blank)
            return len(todo)
        return _Pending(jobs, [writer.submit(r, im) for r, im in jobs])

    def _note_blank(self, ref: ImageRef, blank: bool) -> None:
        if blank:  # a safety checker's blank, or NaN pixels cast to 0
            self.cache.stats.blank.append(f"{ref.prompt!r} (seed {ref.seed})")


def _note_keys(stats, name: str, refs) -> None:
    """Add the images' keys to ``stats.<name>`` (the run's distinct counts: :class:`~t2i_fairness.base.cache.CacheStats`)."""
    keys = getattr(stats, name, None)
    if keys is not None:
        keys.update(r.key for r in refs)


def _store_image(cache: Cache, ref: ImageRef, image: Image.Image) -> tuple[bool, tuple[str, int]]:
    """Encode one image as PNG and write it atomically; returns whether it is all black and its index entry.

    Raises:
        OSError: the entry cannot be written; the message names its path.
    """
    path = ref.path
    rgb = image if image.mode == "RGB" else image.convert("RGB")  # (convert() of an RGB image is a copy)
    blank = rgb.getbbox() is None  # no non-zero pixel (a fast C scan; the same test as getextrema() == all zeros)
    data = encode_png(rgb)
    try:
        cache.write(path, data)
    except DiskFullError:
        raise  # already names the cache folder and what was kept (the run stops on it)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write the generated image {str(path)!r} to the cache: "
                                 f"{exc.strerror or exc}") from exc
    return blank, ImageIndex.entry(ref.key, data)


@dataclass
class _Pending:
    """One batch's images handed to the writer, and their futures (in batch order)."""

    jobs: list
    futures: list


class _Writer:
    """Encodes and writes generated images on a few threads while the caller generates the next batch.

    At most one batch is in flight: :meth:`after` finishes the previous one (writes, lock, progress,
    in batch order). On an error every started write is finished, the pending lock released and the
    first error raised. PNG encoding and file writes release the GIL.
    """

    def __init__(self, cache: Cache, threads: int | None = None, index: ImageIndex | None = None):
        import os
        from concurrent.futures import ThreadPoolExecutor

        self.cache = cache
        self.threads = max(1, min(4, os.cpu_count() or 1)) if threads is None else int(threads)
        self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="t2i-png") if self.threads > 0 else None
        self.index = index  # each batch's images are recorded in it once written
        self._waiting = None  # (pending, lock, advance) of the batch in flight

    def submit(self, ref: ImageRef, image: Image.Image):
        if self.pool is not None:
            return self.pool.submit(_store_image, self.cache, ref, image)
        from concurrent.futures import Future

        done: Future = Future()  # no threads: written now, before the next batch generates
        try:
            done.set_result(_store_image(self.cache, ref, image))
        except Exception as exc:
            done.set_exception(exc)
        return done

    def after(self, pending: "_Pending", lock, advance) -> None:
        """Keep ``pending`` in flight (released with ``lock``, counted with ``advance``); finish the one before."""
        previous, self._waiting = self._waiting, (pending, lock, advance)
        if previous is not None:
            self._finish(*previous)

    def check(self) -> None:
        """Raise now the first error of a write of the batch in flight that has already failed (that batch
        finished first), so that nothing more is generated for a disk that cannot hold it."""
        waiting = self._waiting
        if waiting is not None and any(f.done() and f.exception() is not None for f in waiting[0].futures):
            self.drain()

    def drain(self) -> None:
        """Finish the batch in flight (its writes done, its lock released)."""
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            self._finish(*waiting)

    def _finish(self, pending: "_Pending", lock, advance) -> None:
        from concurrent.futures import wait

        wait(pending.futures)  # every write of the batch done (or failed) before its lock goes
        try:
            written = [f.result() for f in pending.futures]  # the first failed write raises, naming its path
            if self.index is not None:
                self.index.add(entry for _, entry in written)  # before the lock goes: a reader finds the entry
        finally:
            lock.release()
        for (ref, _), (blank, _) in zip(pending.jobs, written):
            if blank:  # a safety checker's blank, or NaN pixels cast to 0
                self.cache.stats.blank.append(f"{ref.prompt!r} (seed {ref.seed})")
        advance(len(pending.jobs))

    def __enter__(self) -> "_Writer":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        waiting, self._waiting = self._waiting, None
        try:
            if waiting is not None:
                if exc_type is None:
                    self._finish(*waiting)
                else:  # finish what was started, keep the error that is on its way
                    try:
                        self._finish(*waiting)
                    except Exception:
                        pass
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True)
