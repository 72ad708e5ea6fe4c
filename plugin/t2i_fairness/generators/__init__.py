"""Resolve ``--t2i-model`` into a generator source: a fingerprint now, the model only when needed.

:data:`SPEC_KINDS` lists the kinds of spec, tried in order. The fingerprint, part of every image
key, names the weights without loading them, so a warm cache never loads the model.
"""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from t2i_fairness.models.base import Generator
from t2i_fairness.errors import ModelLoadError
from t2i_fairness.generators.base import GenerationSettings

__all__ = ["GenerationSettings", "GeneratorSource", "ModelLoadError", "SPEC_KINDS", "SpecKind", "SpecRequest", "check_revision",
           "factory_fingerprint", "model_slug", "resolve_generator", "spec_kind"]


def model_slug(spec: str) -> str:
    """The thresholds file stem for a model spec: ``runwayml/stable-diffusion-v1-5`` -> ``runwayml-stable-diffusion-v1-5``."""
    if spec.startswith("images:"):
        spec = "images-" + Path(spec[len("images:"):].rstrip("/")).name
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", spec.replace(":", "-")).strip("-").lower()


@dataclass
class GeneratorSource:
    """A model spec resolved: its fingerprint now, the model itself on first :meth:`get`.

    Attributes:
        subject, weights: how the run's notes name the model and its weights' identity.
        item_key: the identity of one (prompt, seed) where each image has its own (a manifest's files).
        need: ``need() -> MemoryNeed | None``, counted before the model is built.
    """

    spec: str
    fingerprint: str
    settings: GenerationSettings  # resolved; batch_size included
    _load: Callable[[], Generator]
    _generator: Generator | None = None
    subject: str | None = None
    weights: str | None = None
    item_key: Callable[[str, int], str | None] | None = None
    notes: list[str] = field(default_factory=list)
    need: Callable[[], object] | None = None
    before_load: Callable[["GeneratorSource"], None] | None = None

    def get(self) -> Generator:
        if self._generator is None:
            if self.before_load is not None:
                self.before_load(self)
            self._generator = self._load()
        return self._generator

    def release(self) -> bool:
        """Drop the model (a later :meth:`get` builds it again); whether one was held."""
        held, self._generator = self._generator is not None, None
        return held

    @property
    def loaded(self) -> bool:
        return self._generator is not None


def add_factory_paths(specs, directories) -> list[str]:
    """Append the rootdir and invocation folders to ``sys.path`` for ``python:`` specs; returns those added."""
    if not any(str(s).startswith("python:") for s in specs if s):
        return []
    added = []
    for d in directories:
        d = str(Path(d).resolve())
        if d not in sys.path and d not in added:
            sys.path.append(d)
            added.append(d)
    return added


def _python_factory(spec: str) -> Generator:
    try:
        _, module_name, attr = spec.split(":", 2)
    except ValueError:
        raise ModelLoadError(f"--t2i-model {spec!r}: expected python:module:factory") from None
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ModelLoadError(f"--t2i-model {spec!r}: cannot import {module_name}.{attr} ({exc})") from exc
    try:
        gen = factory()
    except Exception as exc:
        raise ModelLoadError(f"--t2i-model {spec!r}: the factory raised {type(exc).__name__}: {exc}") from exc
    missing = [a for a in ("fingerprint", "generate") if not hasattr(gen, a)]
    if missing:
        raise ModelLoadError(
            f"--t2i-model {spec!r}: the factory returned {type(gen).__name__}, which lacks {missing}; "
            "a generator needs a `fingerprint` string and `generate(prompts, seeds) -> list[PIL.Image]`"
        )
    return gen


_DEFAULT_REPR = re.compile(r" at 0x[0-9a-fA-F]+>")


def factory_fingerprint(spec: str, gen) -> tuple[str, list[str]]:
    """The fingerprint of a ``python:`` factory's generator, and notes worth warning about (e.g. no version)."""
    from t2i_fairness.base.identity import looks_versioned

    raw = gen.fingerprint
    notes = []
    if callable(raw):
        try:
            value = raw()
        except Exception as exc:
            raise ModelLoadError(
                f"--t2i-model {spec!r}: its `fingerprint` is a callable, and calling it with no arguments raised "
                f"{type(exc).__name__}: {exc}; make it a string attribute naming the model and its weights version"
            ) from exc
        if not isinstance(value, str):
            raise ModelLoadError(
                f"--t2i-model {spec!r}: its `fingerprint` is a callable returning {type(value).__name__}, not a string; "
                "make it a string attribute naming the model and its weights version"
            )
        notes.append(f"--t2i-model {spec!r}: its `fingerprint` is a method; it was called once and gave {value!r}. "
                     "Make it a string attribute (the protocol's form)")
        raw = value
    if not isinstance(raw, str):
        raise ModelLoadError(
            f"--t2i-model {spec!r}: its `fingerprint` is a {type(raw).__name__} ({raw!r:.80}), not a string; "
            "give a string naming the model and its weights version, e.g. f\"my-model@{weights_digest(folder)}\" "
            "(t2i_fairness.base.identity.weights_digest)"
        )
    if not raw.strip():
        raise ModelLoadError(f"--t2i-model {spec!r}: its `fingerprint` is empty; name the model and its weights version")
    if _DEFAULT_REPR.search(raw):
        raise ModelLoadError(
            f"--t2i-model {spec!r}: its `fingerprint` {raw!r} holds a memory address, different in every process, "
            "so no image would ever be found in the cache; name the model and its weights version instead"
        )
    if not looks_versioned(raw):
        notes.append(
            f"--t2i-model {spec!r}: its fingerprint {raw!r} names no version, date, commit or digest, so when its "
            "weights change the cache serves the old model's images. Put the weights' version in it, e.g. "
            f"f\"{raw}@{{weights_digest('/path/to/weights')}}\" (t2i_fairness.base.identity.weights_digest) or a release tag"
        )
    return raw, notes


# -------------------------------------------------------------------------------- the spec kinds


@dataclass(frozen=True)
class SpecRequest:
    """What resolving a spec is given: the spec, the settings, the device, the resolved precision,
    ``seed_for(prompt, index) -> seed`` and ``--t2i-model-revision`` (a hub id's only).
    """

    spec: str
    settings: GenerationSettings
    device: str
    precision: str
    seed_for: Callable[[str, int], int]
    revision: str | None = None


@dataclass(frozen=True)
class SpecKind:
    """One kind of ``--t2i-model`` spec: ``matches(spec)`` and ``resolve(request) -> GeneratorSource``."""

    name: str
    form: str
    matches: Callable[[str], bool]
    resolve: Callable[[SpecRequest], GeneratorSource]
    hub: bool = False


def _builtin_random(config_name: str, subject: str, tiny: bool):
    def resolve(r: SpecRequest) -> GeneratorSource:
        from t2i_fairness.generators.diffusers_pipe import DiffusersGenerator, diffusers_fingerprint, tiny_model_name, tiny_weights
        from t2i_fairness.models.configs import load_model_config

        resolved = r.settings.resolved(load_model_config(config_name)["defaults"])
        weights = tiny_weights()
        fp = diffusers_fingerprint(tiny_model_name(config_name), resolved, r.device, weights, r.precision)
        load = ((lambda: DiffusersGenerator.tiny(resolved, r.device, r.precision)) if tiny
                else (lambda: DiffusersGenerator.random(config_name, resolved, r.device, r.precision)))
        return GeneratorSource(r.spec, fp, resolved, load, subject=subject or f"model {r.spec}", weights=weights,
                               need=_diffusers_need(r, resolved, config_name=config_name))

    return resolve


def _diffusers_need(r: SpecRequest, resolved: GenerationSettings, *, config_name: str | None = None, folder=None):
    """``need()`` of a diffusers source: counted when asked (building the architecture on the meta device
    takes a second), from a config or the safetensors of a folder (``folder`` may be a callable)."""
    def need():
        from t2i_fairness.generators.diffusers_pipe import diffusers_need

        where = folder() if callable(folder) else folder
        return diffusers_need(r.spec, resolved, r.device, r.precision, config_name=config_name, folder=where)

    return need


def _resolve_random(r: SpecRequest) -> GeneratorSource:  # sd15-random: SD 1.5's sizes, seeded random weights
    from t2i_fairness.generators.diffusers_pipe import RANDOM_MODELS

    return _builtin_random(RANDOM_MODELS[r.spec], "", tiny=False)(r)


def _resolve_procedural(r: SpecRequest) -> GeneratorSource:
    from t2i_fairness.generators.procedural import smoke_procedural

    resolved = r.settings.resolved({"height": 64, "width": 64, "batch_size": 16})
    try:
        gen = smoke_procedural((resolved.height, resolved.width), resolved.batch_size)
    except ValueError as exc:
        raise ModelLoadError(f"--t2i-model procedural: {exc} (see --t2i-height, --t2i-width, --t2i-batch-size)") from None
    return GeneratorSource(r.spec, gen.fingerprint, resolved, lambda: gen, gen)


def _resolve_images(r: SpecRequest) -> GeneratorSource:
    from t2i_fairness.generators.manifest import ManifestGenerator

    try:
        gen = ManifestGenerator(r.spec[len("images:"):], r.seed_for)
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from None
    resolved = r.settings.resolved({"batch_size": 32})
    return GeneratorSource(r.spec, gen.fingerprint, resolved, lambda: gen, gen, subject=f"images {gen.manifest}",
                           weights=gen.fingerprint.rpartition("@")[2], item_key=gen.item_key)


def _resolve_python(r: SpecRequest) -> GeneratorSource:
    from t2i_fairness.errors import T2IIdentityWarning

    gen = _python_factory(r.spec)
    fp, notes = factory_fingerprint(r.spec, gen)
    for note in notes:
        warnings.warn(T2IIdentityWarning(note), stacklevel=3)  # resolve_generator's caller
    resolved = r.settings.resolved({"batch_size": getattr(gen, "batch_size", 8)})
    return GeneratorSource(r.spec, fp, resolved, lambda: gen, gen, notes=notes)


def _is_local(spec: str) -> bool:
    """A path (``./x``, ``/x``, ``~/x``) or an existing folder: a local diffusers pipeline."""
    return spec.startswith((".", "/", "~")) or Path(spec).expanduser().exists()


def _resolve_local(r: SpecRequest) -> GeneratorSource:
    from t2i_fairness.base import identity
    from t2i_fairness.generators.diffusers_pipe import PAPER_DEFAULTS, DiffusersGenerator, diffusers_fingerprint

    spec, local = r.spec, Path(r.spec).expanduser()
    resolved = r.settings.resolved(PAPER_DEFAULTS)
    if not (local / "model_index.json").exists():
        raise ModelLoadError(
            f"--t2i-model {spec!r}: no diffusers pipeline at {local.resolve()} (model_index.json not found). "
            "Point it at a folder saved with pipeline.save_pretrained(), or use a hub id, "
            "images:MANIFEST, python:module:factory, or tiny."
        )
    folder = local.resolve()
    try:
        weights = identity.weights_digest(folder)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"--t2i-model {spec!r}: cannot read the pipeline's files to identify its weights ({exc})") from exc
    name = folder.name
    fp = diffusers_fingerprint(name, resolved, r.device, weights, r.precision)
    index = identity.active_index()  # the run's: loading happens later, outside the workbench's block

    def load_local() -> DiffusersGenerator:
        gen = DiffusersGenerator.from_pretrained(str(folder), resolved, r.device, name=name, weights=weights,
                                                 precision=r.precision)
        with identity.using(index):
            now = identity.weights_digest(folder)
        if now != weights:  # written while this run was going on: its images would carry the wrong key
            raise ModelLoadError(
                f"--t2i-model {spec!r}: the weights changed while this run was going on ({weights} when it "
                f"started, {now} after loading); run again once the folder is written"
            )
        return gen

    return GeneratorSource(spec, fp, resolved, load_local, subject=f"model {folder}", weights=weights,
                           need=_diffusers_need(r, resolved, folder=folder))


def _resolve_hub(r: SpecRequest) -> GeneratorSource:
    from t2i_fairness.base import identity
    from t2i_fairness.generators.diffusers_pipe import PAPER_DEFAULTS, DiffusersGenerator, diffusers_fingerprint

    resolved = r.settings.resolved(PAPER_DEFAULTS)
    commit = identity.hub_commit(r.spec, r.revision)
    fp = diffusers_fingerprint(r.spec, resolved, r.device, commit[:12], r.precision)
    return GeneratorSource(
        r.spec, fp, resolved,
        lambda: DiffusersGenerator.from_pretrained(r.spec, resolved, r.device, revision=commit, weights=commit[:12],
                                                   precision=r.precision),
        subject=f"model {r.spec}" + (f" ({r.revision})" if r.revision else ""), weights=commit[:12],
        need=_diffusers_need(r, resolved, folder=lambda: _hub_snapshot(r.spec, commit)),
    )


def _hub_snapshot(repo_id: str, commit: str) -> Path | None:
    """The local snapshot folder of a hub id at ``commit`` (``None`` when it is not downloaded yet)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub comes with diffusers
        return None
    found = try_to_load_from_cache(repo_id, "model_index.json", revision=commit)
    return Path(found).parent if isinstance(found, str) else None


def _is_random_model(spec: str) -> bool:
    from t2i_fairness.generators.diffusers_pipe import RANDOM_MODELS

    return spec in RANDOM_MODELS


SPEC_KINDS: tuple[SpecKind, ...] = (  # the first that matches decides; a hub id is whatever is left
    SpecKind("tiny", "tiny", lambda s: s == "tiny", _builtin_random("tiny-sd", "model tiny", tiny=True)),
    SpecKind("random", "sd15-random", _is_random_model, _resolve_random),
    SpecKind("procedural", "procedural", lambda s: s == "procedural", _resolve_procedural),
    SpecKind("images", "images:MANIFEST", lambda s: s.startswith("images:"), _resolve_images),
    SpecKind("python", "python:module:factory", lambda s: s.startswith("python:"), _resolve_python),
    SpecKind("local", "a local diffusers folder", _is_local, _resolve_local),
    SpecKind("hub", "a hub id (ORG/NAME)", lambda s: True, _resolve_hub, hub=True),
)


def spec_kind(spec: str) -> SpecKind:
    """The kind of a ``--t2i-model`` spec (the first of :data:`SPEC_KINDS` that matches).

    Example:
        >>> [spec_kind(s).name for s in ("tiny", "sd15-random", "images:m.csv", "python:m:f", "./ckpt", "org/sd")]
        ['tiny', 'random', 'images', 'python', 'local', 'hub']
    """
    return next(kind for kind in SPEC_KINDS if kind.matches(str(spec)))


def check_revision(spec: str, revision: str | None) -> None:
    """The one check that ``--t2i-model-revision`` goes with a hub id: an OptionError naming both
    options otherwise.
    """
    if revision is not None and not spec_kind(spec).hub:
        from t2i_fairness.errors import OptionError

        raise OptionError("--t2i-model-revision", f"{revision!r} applies to a hub id; --t2i-model {spec!r} is not one "
                          "(a local folder is named by the digest of its files)")


def resolve_generator(
    spec: str,
    settings: GenerationSettings,
    device: str,
    seed_for: Callable[[str, int], int],
    revision: str | None = None,
    precision: str | None = None,
) -> GeneratorSource:
    """Check the spec cheaply and return a lazy source whose fingerprint names the weights.

    Args:
        seed_for: ``(prompt, index) -> seed`` (manifests list an index instead of a seed).
        revision: ``--t2i-model-revision``: a hub id's branch, tag or commit.
        precision: ``--t2i-precision`` (``None`` or ``auto``: float16 on CUDA, float32 elsewhere).

    Example:
        >>> from t2i_fairness.spine.generation import derive_seed
        >>> src = resolve_generator("tiny", GenerationSettings(), "cpu", derive_seed)
        >>> src.fingerprint.startswith("diffusers:tiny-sd-"), src.loaded
        (True, False)
    """
    from t2i_fairness.models.precision import resolve as resolve_precision

    check_revision(spec, revision)
    request = SpecRequest(spec, settings, device, resolve_precision("generator", device, precision), seed_for, revision)
    return spec_kind(spec).resolve(request)
