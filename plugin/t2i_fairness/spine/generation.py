"""Lazy, batched, cached image generation with seeds that do not depend on how work is split.

An image is identified by (generator fingerprint, prompt, seed, settings); the fingerprint names the
weights (a digest or a commit), precision and device class. Its seed comes from
(prompt, image index, base seed) alone, and its batch is canonical: the images of one prompt with
indices ``[b * batch_size, (b + 1) * batch_size)`` (cut at the number of images per prompt). Batched
kernels change a few pixel values with batch composition, so canonical batches are what makes the
same settings give the same bytes whatever the order, the cache state or the sharding.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager, Iterator, Sequence

from PIL import Image

from t2i_fairness.base.cache import Cache, content_key, decode_png, encode_png
from t2i_fairness.generators import GeneratorSource


def derive_seed(prompt: str, index: int, base_seed: int = 0) -> int:
    """A 32-bit seed from (prompt, image index, base seed) only.

    Example:
        >>> derive_seed("bag in Africa", 0) == derive_seed("bag in Africa", 0)
        True
        >>> derive_seed("bag in Africa", 0) != derive_seed("bag in Africa", 1)
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


def _image_is_sound(path: Path) -> bool | None:
    """True if readable, False if present but corrupt, None if missing."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        decode_png(data)
    except Exception:
        return False
    return True


class ImageFactory:
    """Makes the images a test asks for, only those missing, in canonical batches.

    Args:
        source: the generator (loaded on first need).
        cache: where images live.
        base_seed: ``--t2i-seed``; changes every image's seed.
        progress: a context manager factory showing progress on long work.
    """

    def __init__(self, source: GeneratorSource, cache: Cache, base_seed: int = 0, progress: Progress = tqdm_progress):
        self.source = source
        self.cache = cache
        self.base_seed = base_seed
        self.progress = progress
        self.batch_size = max(1, int(source.settings.batch_size or 1))

    def ref(self, prompt: str, index: int) -> ImageRef:
        """The cache entry of one image: its key names everything that decides its pixels.

        The generator's fingerprint (model, weights digest or commit, settings, precision, device
        class; see :mod:`t2i_fairness.generators`), or for a source whose images each have their own
        identity (a manifest's files) that image's; then the prompt, the seed and the settings. New
        weights give new keys, so nothing cached under the old ones is touched.
        """
        seed = derive_seed(prompt, index, self.base_seed)
        item = self.source.item_key(prompt, seed) if self.source.item_key is not None else None
        key = content_key(generator=item or self.source.fingerprint, prompt=prompt, seed=seed,
                          settings=self.source.settings.key())
        return ImageRef(key, self.cache.path("images", key, ".png"), prompt, index, seed)

    def images(self, prompts: Sequence[str], n: int, desc: str = "generating") -> list[list[ImageRef]]:
        """``n`` images of each prompt (a list per prompt, in prompt order), generating the missing ones.

        Raises:
            ValueError: ``n`` < 1, no prompts, or the generator cannot serve a prompt (e.g. a manifest lacks it).
        """
        if n < 1:
            raise ValueError(f"images per prompt must be >= 1, got {n}")
        if not prompts:
            raise ValueError("images() got an empty prompt set: nothing to generate or score; check the objects, "
                             "regions or languages the test selects (--t2i-objects, the prompt file)")
        refs = [[self.ref(p, i) for i in range(n)] for p in dict.fromkeys(prompts)]
        by_prompt = {row[0].prompt: row for row in refs}
        batches: list[list[ImageRef]] = []
        missing_count = 0
        for row in refs:
            for start in range(0, n, self.batch_size):
                batch = row[start : start + self.batch_size]
                states = [_image_is_sound(r.path) if self.cache.fetch(r.path) else None for r in batch]
                for r, st in zip(batch, states):
                    if st is False:
                        self.cache.stats.corrupt.append(str(r.path))
                if all(states):
                    self.cache.stats.from_cache += len(batch)
                    continue
                self.cache.stats.from_cache += sum(1 for st in states if st)
                missing_count += sum(1 for st in states if not st)
                batches.append(batch)
        if batches:
            self._generate(batches, missing_count, desc)
        return [by_prompt[p] for p in prompts]

    def _generate(self, batches: list[list[ImageRef]], total: int, desc: str) -> None:
        generator = self.source.get()
        check = getattr(generator, "check_available", None)
        if check is not None:
            flat = [r for b in batches for r in b]
            check([r.prompt for r in flat], [r.seed for r in flat])
        deferred = []
        with self.progress(total, desc) as advance:
            for batch in batches:
                lock = self.cache.lock(batch[0].path.with_suffix(f".b{len(batch)}"))
                try:
                    lock.acquire(timeout=0)
                except Exception:  # another worker is making this batch: come back to it
                    deferred.append((batch, lock))
                    continue
                try:
                    advance(self._make(generator, batch))
                finally:
                    lock.release()
            for batch, lock in deferred:
                with lock:
                    advance(self._make(generator, batch))

    def make_batch(self, batch: Sequence[ImageRef], only: Sequence[ImageRef] | None = None, wait: bool = True) -> int | None:
        """Generate one canonical batch under its lock (the lock the pytest path takes) and write its
        missing images, or only those of ``only``; the batch is generated whole, so the bytes are the
        pytest path's. Returns how many images were written, or ``None`` when ``wait`` is false and
        another process holds the batch.

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
            return self._make(generator, batch, only)
        finally:
            lock.release()

    def _make(self, generator, batch: list[ImageRef], only: Sequence[ImageRef] | None = None) -> int:
        """Generate one canonical batch and write the images still missing (of ``only`` when given);
        returns how many were written."""
        wanted = set(batch if only is None else only)
        todo = [r for r in batch if r in wanted and _image_is_sound(r.path) is not True]
        if not todo:
            return 0
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
        for r, im in zip(batch, images):
            if r in todo:
                rgb = im.convert("RGB")
                if rgb.getextrema() == ((0, 0), (0, 0), (0, 0)):  # a safety checker's blank, or NaN pixels cast to 0
                    self.cache.stats.blank.append(f"{r.prompt!r} (seed {r.seed})")
                self.cache.write(r.path, encode_png(rgb))
        self.cache.stats.generated += len(batch)  # the generator made (and a paid API bills) the whole batch
        self.cache.stats.regenerated += len(batch) - len(todo)
        return len(todo)
