"""The session object tests ask for: one generator, one cache, scorer models loaded once (plain
Python: fixtures hand it to tests, other tools use it directly).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
import re
from typing import Callable, Iterable, Sequence

import numpy as np
from PIL import Image

from t2i_fairness import __version__
from t2i_fairness.errors import ModelLoadError
from t2i_fairness.base import identity
from t2i_fairness.base.cache import Cache, content_key, decode_array, encode_array
from t2i_fairness.base.memo import Memo, namespace_of, no_progress

from t2i_fairness.base.memory import ModelUse
from t2i_fairness.base.rowstore import FeatureRows, ImageIndex
from t2i_fairness.spine.residency import Resident

_no_progress = no_progress  # the name the project's tests import
from t2i_fairness.spine.generation import ImageFactory, ImageRef, Progress, derive_seed, tqdm_progress
from t2i_fairness.generators import GenerationSettings, GeneratorSource, resolve_generator
from t2i_fairness.base.devices import RunContext
from t2i_fairness.models.registry import PROCEDURAL, config_profile
from t2i_fairness.spine.options import T2IOptions

_no_progress = no_progress  # the name older tests and scripts import from here


class Workbench:
    """Generation, features and scorers for one test session.

    Args:
        fatal: called with the message when a model cannot be loaded (the plugin ends the session).
        wrap: wraps the generator source (``--t2i-canary``).
        generate_on: the device whose images to name when another machine makes them (Ray GPU
            workers); scorers stay on this machine's device.
        run: the run's :class:`~t2i_fairness.base.devices.RunContext` (default: decided from ``options``).
        read_only: look at the cache and write nothing (``t2i-fairness plan``).
    """

    def __init__(self, options: T2IOptions, progress: Progress | None = None, fatal: Callable[[str], None] | None = None,
                 wrap: Callable[[GeneratorSource], GeneratorSource] | None = None, generate_on: str | None = None,
                 run: RunContext | None = None, read_only: bool = False):
        self.options = options
        self.fatal = fatal
        self.run = run if run is not None else RunContext.decide(options.device, options.precision)
        self.device = self.run.device
        self.cache = _make_cache(options.cache_dir, options.cache_mirror)
        if not read_only:
            self.cache.check_writable()
        from t2i_fairness.spine.rates import StepClock, device_label

        # every computing step's bar says its expected time (stored rate, else after its first items)
        self.progress = StepClock(progress or (tqdm_progress if options.progress else no_progress), self.cache,
                                  device_label(self.device))
        settings = GenerationSettings(options.steps, options.guidance, options.height, options.width, options.batch_size)
        # Weights digests are remembered in the cache (identity/), so a warm run reads no weights;
        # the summary reports their cost and any identity that changed since the last run.
        self.digests = identity.DigestIndex(self.cache.root / "identity", read_only=read_only)
        self.cache.stats.digests = self.digests.stats
        with identity.using(self.digests):
            self.source: GeneratorSource = resolve_generator(
                options.model, settings, generate_on or self.device, lambda prompt, index: derive_seed(prompt, index, options.seed),
                revision=options.model_revision, precision=self.run.precision,
            )
            self._sources = [self.source]  # the model's source, and a wrapper around it: released together
            if wrap is not None:  # e.g. a canary (t2i_fairness.canaries): its fingerprint keeps its images apart
                self.source = wrap(self.source)
                self._sources.insert(0, self.source)
            self._sources[-1].before_load = self._before_generator_load  # the model's own source, wrapped or not
            if self.source.spec.startswith("images:"):
                self._note(self.source.subject, self.source.weights, "images whose files changed are read anew",
                           "what was cached under them is used again", what="images")
            else:
                self._note(self.source.subject, self.source.weights, "its images are generated anew",
                           "what was cached under them is used again")
        self.cache.stats.identity.extend(self.source.notes)
        self.feature_rows = FeatureRows(self.cache)  # features: rows in segment files, not a file per row
        # every image's size and digest as written, in the same row store (planning: a look-only one)
        index = ImageIndex.of(self.cache, read_only=True) if read_only else ImageIndex(self.feature_rows.store)
        self.factory = ImageFactory(self.source, self.cache, options.seed, self.progress, index=index)
        if not self.source.spec.startswith("images:"):  # the per-image time, for t2i-fairness plan's estimate
            self.factory.on_measured = self._store_rate
        self.rate_device = generate_on or self.device
        self._scorers: dict[str, Resident] = {}
        self._builds: dict[str, str] = {}  # name -> what built it (one name, one model)
        self._shared: dict = {}
        self._versions = identity.library_versions()
        self.use = ModelUse()  # what this workbench loaded and released (the run's summary)
        self.generated_first = False  # every planned image made before the gates ran (generation first)

    def _store_rate(self, seconds: float, images: int) -> None:
        """Store this run's generation time per image so far (:mod:`t2i_fairness.spine.rates`)."""
        import dataclasses

        from t2i_fairness.spine.rates import Rate, device_label, store_rate

        store_rate(self.cache, Rate(seconds / images, images, device_label(self.rate_device), self.source.fingerprint,
                                    dataclasses.asdict(self.source.settings), "run"))

    def _note(self, subject: str | None, ident: str | None, made_anew: str, reused: str, what: str = "weights") -> None:
        """Record ``subject``'s identity in the cache; a change since the last run becomes a summary note."""
        if subject and ident:
            note = identity.remember(subject, ident).note(made_anew, reused, what)
            if note:
                self.cache.stats.identity.append(note)

    @property
    def planned_images_per_prompt(self) -> int:
        """``--t2i-images-per-prompt`` of the fixed-N run (a look's view keeps it while showing fewer)."""
        return int(getattr(self, "_planned", self.options.images_per_prompt))

    def at_images(self, n: int) -> "Workbench":
        """This workbench at the first ``n`` images per prompt of the fixed-N run (a sequential look):
        same generator, cache and scorers, and the fixed-N run's provenance.

        Raises:
            ValueError: ``n`` outside ``1..--t2i-images-per-prompt``.
        """
        import copy
        import dataclasses

        planned = self.planned_images_per_prompt
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= planned:
            raise ValueError(f"a look at {n!r} images per prompt: must be 1..{planned} (--t2i-images-per-prompt)")
        view = copy.copy(self)  # shares the factory, cache, scorers and the shared values (keys name their counts)
        view.options = dataclasses.replace(self.options, images_per_prompt=n)
        view._planned = planned
        view.provenance = getattr(self, "_full_provenance", self.provenance)
        view._full_provenance = view.provenance
        return view

    # -- generation ---------------------------------------------------------------------------
    def images(self, prompts: Sequence[str], n: int | None = None, desc: str = "generating") -> list[list[ImageRef]]:
        """``n`` images per prompt (default ``--t2i-images-per-prompt``), generated only when missing."""
        try:
            return self.factory.images(prompts, n or self.options.images_per_prompt, desc)
        except ModelLoadError as exc:
            if self.fatal:
                self.fatal(str(exc))
            raise

    # -- scorers ------------------------------------------------------------------------------
    def scorer(self, name: str, build: str | Callable[[str, RunContext], object] | None = None) -> Resident:
        """The session's scorer ``name``, built once from the ``--t2i-scorers`` profile after checking it fits.

        Returns a :class:`~t2i_fairness.spine.residency.Resident`, which the run releases once no
        remaining gate needs it and which rebuilds itself if used again; keep it as long as you like.

        Args:
            build: a registered kind (:data:`t2i_fairness.models.registry.SCORERS`), or
                ``build(profile, run) -> model`` (its ``kind`` attribute, if any, names its memory need).
                Default: ``name`` is a registered kind.

        Raises:
            ValueError: neither ``build`` nor ``name`` is a registered kind, or ``name`` was built by another
                ``build`` earlier in the session (a study would be served the other model).
            ModelLoadError: it cannot be loaded or does not fit; ``fatal`` is called first.
        """
        registered = build is None or isinstance(build, str)
        how = f"kind {build or name}" if registered else f"builder {getattr(build, '__qualname__', build)}"
        if self._builds.setdefault(name, how) != how:
            raise ValueError(f"scorer {name!r} is built by {self._builds[name]} in this session; asked again "
                             f"with {how}: give the other model another name")
        if name not in self._scorers:
            from t2i_fairness.models.registry import scorer_kind

            kind = scorer_kind(build or name).name if registered else getattr(build, "kind", None)
            builder = scorer_kind(kind).build if registered else build
            if registered and self.options.scorers == PROCEDURAL:  # the procedural scorers' set error rates
                builder = functools.partial(builder, miss=self.options.procedural_miss)
                kind = None if scorer_kind(kind).procedural else kind  # reads the truth: no weights, no memory need
            elif not registered:  # a study's own builder gets the configs' profile
                builder = lambda profile, run, own=build: own(config_profile(profile), run)  # noqa: E731
            load = lambda: self._load_scorer(name, kind, builder)  # noqa: E731
            self._scorers[name] = Resident(name, load, load())
        return self._scorers[name]

    def _load_scorer(self, name: str, kind: str | None, builder: Callable[[str, RunContext], object]) -> object:
        from t2i_fairness.base.memory import check_fits

        profile = self.options.scorers
        try:
            need = None
            if kind is not None:
                from t2i_fairness.models.memory import scorer_need

                need = scorer_need(kind, config_profile(profile), self.device, self.run.precision)
            if need is not None:
                need = dataclasses.replace(need, model=f"scorer {name} ({kind}, {profile})")
                if self.options.sequential:  # rounds generate as they go: the generator stays beside the scorers
                    need = dataclasses.replace(need, flags=tuple(need.flags) + ("--t2i-fixed-n",))
                self.use.needs[f"scorer {name}"] = need.total
            check_fits(need, self.device)
            with identity.using(self.digests):
                scorer = builder(profile, self.run)
                if name not in self._scorers:  # its identity, once (a model built again is the same one)
                    fingerprint = getattr(scorer, "fingerprint", None)
                    self._note(f"scorer {name} ({profile})", fingerprint if isinstance(fingerprint, str) else None,
                               "its features are computed anew", "its cached features are used again")
        except ModelLoadError as exc:
            if self.fatal:
                self.fatal(str(exc))
            raise
        self.use.load(f"scorer {name}")
        return scorer

    def _before_generator_load(self, source: GeneratorSource) -> None:
        """Check that the generator fits before it is built (one line naming what to change if not)."""
        from t2i_fairness.base.memory import check_fits

        need = source.need() if source.need is not None else None
        if need is not None:
            self.use.needs[f"generator {source.spec}"] = need.total
        check_fits(need, self.device)  # NotEnoughMemoryError: a ModelLoadError, reported by images()
        self.use.load(f"generator {source.spec}")

    def release(self, *, generator: bool = True, keep: Iterable[str] | None = ()) -> list[str]:
        """Release the generator (``generator``) and every scorer not in ``keep`` (``None``: keep all), and
        give the memory back to the system; they are rebuilt if used later. Returns what was released.
        """
        from t2i_fairness.base.memory import give_back

        released = []
        if generator and any([s.release() for s in self._sources]):
            released.append(f"generator {self.source.spec}")
        if keep is not None:
            keep = set(keep)
            released += [f"scorer {n}" for n, r in self._scorers.items() if n not in keep and r.release()]
        for model in released:
            self.use.release(model)
        if released:
            give_back()
        return released

    # -- features -----------------------------------------------------------------------------
    def features(
        self,
        encoder,
        refs: Sequence[ImageRef],
        batch_size: int = 32,
        desc: str = "encoding",
        encode: Callable[[Sequence[Image.Image]], np.ndarray] | None = None,
    ) -> np.ndarray:
        """Features of images, cached per (image key, encoder fingerprint) in the feature row store; (n, dim) float32.

        ``encode`` defaults to ``encoder.encode_images``; another method (with a distinct ``kind`` in its
        fingerprint) caches a different view.
        """
        encode = encode or encoder.encode_images
        kind = "features:" + getattr(encoder, "kind", re.split(r"[:/]", encoder.fingerprint)[0])
        namespace = namespace_of(encoder=encoder.fingerprint)
        memo = Memo(self.cache, "features", namespace, label=kind, entries=self.feature_rows.entries(namespace))

        def compute(idx: list[int]) -> list[np.ndarray]:
            return list(np.asarray(encode([refs[i].load() for i in idx]), dtype=np.float32))

        rows = memo.get_many([r.key for r in refs], compute, batch_size=batch_size, progress=self.progress, desc=desc)
        return np.stack(rows) if rows else np.zeros((0, 0), np.float32)

    def close(self) -> None:
        """Flush and close the feature row store (uploading to the shared tier); idempotent."""
        self.feature_rows.close()

    def memo(self, kind: str, namespace: str, suffix: str, encode, decode, label: str | None = None) -> Memo:
        """A :class:`~t2i_fairness.base.memo.Memo` on this session's cache."""
        return Memo(self.cache, kind, namespace, suffix, encode, decode, label)

    def shared(self, key, make: Callable[[], object]):
        """A value made once per session and shared by every study that asks (reference sets, prompt images)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def text_features(self, encoder, texts: Sequence[str]) -> np.ndarray:
        """Text embeddings (not cached: texts are few and cheap to encode)."""
        unique = list(dict.fromkeys(texts))
        table = dict(zip(unique, encoder.encode_texts(unique)))
        return np.stack([table[t] for t in texts])

    # -- provenance ---------------------------------------------------------------------------
    def provenance(self) -> dict:
        """The settings a measured value depends on, stored with every bound: beyond what image keys name,
        the device class, the GPU's name and the libraries' versions (a bound measured under others warns).
        """
        try:
            import torch

            torch_version = str(torch.__version__)
        except ImportError:
            torch_version = None
        o = self.options
        versions = {k: v for k, v in self._versions.items() if k != "torch"}
        return {
            "model": self.source.fingerprint,
            "scorers": o.scorers,
            "objects": ",".join(o.objects),
            "images_per_prompt": o.images_per_prompt,
            "seed": o.seed,
            "t2i_fairness": __version__,
            "torch": torch_version,
            **versions,
            "device": identity.device_class(self.device),
            "gpu": self._gpu(),
        }

    def _gpu(self) -> str | None:
        if not hasattr(self, "_gpu_name"):
            self._gpu_name = identity.gpu_name(self.device)
        return self._gpu_name


def _make_cache(location, mirror_root: Path) -> Cache:
    """A local folder, or for an fsspec URL a local mirror (``<mirror_root>/<digest>``) in front of it."""
    from t2i_fairness.base.cache import is_url

    if not is_url(location):
        return Cache(location)
    url = str(location)
    mirror = Path(mirror_root) / content_key(url=url)[:16]
    try:
        return Cache(mirror, remote=url)
    except (ImportError, ValueError) as exc:
        raise OSError(f"--t2i-cache-dir {url!r}: cannot open this fsspec URL ({exc})") from exc
