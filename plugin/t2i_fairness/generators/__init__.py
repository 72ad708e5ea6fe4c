"""Resolve ``--t2i-model`` into a generator source: a fingerprint now, the model only when needed.

Spec forms:
- ``tiny``: the built-in smoke model (a real StableDiffusionPipeline with random weights).
- ``procedural``: a seeded simulator of the synthetic reference's world (``generators/procedural.py``),
  whose values move with the seed, for measuring the gates' statistics; not a model.
- a hub id or a local diffusers folder: ``DiffusionPipeline.from_pretrained``.
- ``images:PATH``: a manifest of pre-generated images.
- ``python:module:factory``: ``factory()`` returns an object with ``fingerprint`` and ``generate``.

A warm cache never loads the model: the fingerprint (part of every image key) is known without it.
"""

from __future__ import annotations

import importlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from t2i_fairness.models.base import Generator
from t2i_fairness.errors import ModelLoadError
from t2i_fairness.generators.base import GenerationSettings

__all__ = ["GenerationSettings", "GeneratorSource", "ModelLoadError", "resolve_generator", "model_slug"]


def model_slug(spec: str) -> str:
    """The thresholds file stem for a model spec: ``runwayml/stable-diffusion-v1-5`` -> ``runwayml-stable-diffusion-v1-5``.

    Example:
        >>> model_slug("tiny"), model_slug("images:/data/dalle3/"), model_slug("python:my.mod:make")
        ('tiny', 'images-dalle3', 'python-my.mod-make')
    """
    if spec.startswith("images:"):
        spec = "images-" + Path(spec[len("images:"):].rstrip("/")).name
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", spec.replace(":", "-")).strip("-").lower()


@dataclass
class GeneratorSource:
    spec: str
    fingerprint: str
    settings: GenerationSettings  # resolved; batch_size included
    _load: Callable[[], Generator]
    _generator: Generator | None = None

    def get(self) -> Generator:
        if self._generator is None:
            self._generator = self._load()
        return self._generator

    @property
    def loaded(self) -> bool:
        return self._generator is not None


def add_factory_paths(specs, directories) -> list[str]:
    """Make ``python:module:factory`` modules of the project importable however pytest was started.

    ``python -m pytest`` puts the current directory first on ``sys.path``; the ``pytest`` script
    (``.venv/bin/pytest``) does not, so ``python:mygen:make`` with ``mygen.py`` in the project root
    imported with one and not the other. For runs with such a spec, the rootdir and the invocation
    directory are appended to ``sys.path`` (after the installed packages, so they shadow nothing).

    Args:
        specs: the run's model specs (``--t2i-model``, ``--t2i-baseline-model``); None entries are ignored.
        directories: the folders to make importable, in order.

    Returns:
        the folders added.

    Example:
        >>> add_factory_paths(["tiny"], ["/nonexistent"])
        []
    """
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


def resolve_generator(
    spec: str,
    settings: GenerationSettings,
    device: str,
    seed_for: Callable[[str, int], int],
) -> GeneratorSource:
    """Check the spec cheaply and return a lazy source; errors name the option and the fix.

    Raises:
        ModelLoadError: a local path without a pipeline, an unimportable factory, a bad manifest.
    """
    from t2i_fairness.generators.diffusers_pipe import PAPER_DEFAULTS, DiffusersGenerator, diffusers_fingerprint, tiny_model_name
    from t2i_fairness.models.configs import load_model_config

    if spec == "tiny":
        resolved = settings.resolved(load_model_config("tiny-sd")["defaults"])
        fp = diffusers_fingerprint(tiny_model_name(), resolved, device)
        return GeneratorSource(spec, fp, resolved, lambda: DiffusersGenerator.tiny(resolved, device))
    if spec == "procedural":
        from t2i_fairness.generators.procedural import smoke_procedural

        resolved = settings.resolved({"height": 64, "width": 64, "batch_size": 16})
        try:
            gen = smoke_procedural((resolved.height, resolved.width), resolved.batch_size)
        except ValueError as exc:
            raise ModelLoadError(f"--t2i-model procedural: {exc} (see --t2i-height, --t2i-width, --t2i-batch-size)") from None
        return GeneratorSource(spec, gen.fingerprint, resolved, lambda: gen, gen)
    if spec.startswith("images:"):
        from t2i_fairness.generators.manifest import ManifestGenerator

        try:
            gen = ManifestGenerator(spec[len("images:"):], seed_for)
        except ValueError as exc:
            raise ModelLoadError(str(exc)) from None
        resolved = settings.resolved({"batch_size": 32})
        return GeneratorSource(spec, gen.fingerprint, resolved, lambda: gen, gen)
    if spec.startswith("python:"):
        gen = _python_factory(spec)
        resolved = settings.resolved({"batch_size": getattr(gen, "batch_size", 8)})
        return GeneratorSource(spec, str(gen.fingerprint), resolved, lambda: gen, gen)
    local = Path(spec).expanduser()
    if spec.startswith((".", "/", "~")) or local.exists():
        if not (local / "model_index.json").exists():
            raise ModelLoadError(
                f"--t2i-model {spec!r}: no diffusers pipeline at {local.resolve()} (model_index.json not found). "
                "Point it at a folder saved with pipeline.save_pretrained(), or use a hub id, "
                "images:MANIFEST, python:module:factory, or tiny."
            )
    resolved = settings.resolved(PAPER_DEFAULTS)
    fp = diffusers_fingerprint(spec, resolved, device)
    return GeneratorSource(spec, fp, resolved, lambda: DiffusersGenerator.from_pretrained(spec, resolved, device))
