"""Named model configs (``model_configs/*.json``), the way open_clip's factory keeps them.

Every model is built from a named config: the generators (``tiny-sd``, ``sd15-random``) and each
scorer per profile, ``<kind>-<profile>.json``. Keys starting with ``_`` are notes for people and
never enter a fingerprint; ``add_model_config(path)`` registers more configs without code changes.
"""

from __future__ import annotations

import json
from pathlib import Path

from t2i_fairness import MODEL_CONFIGS as _CONFIG_DIR

_EXTRA: dict[str, Path] = {}


def add_model_config(path: str | Path) -> None:
    """Register a JSON config file (or every JSON in a folder) under its file stem."""
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    for f in files:
        _EXTRA[f.stem] = f


def list_model_configs() -> list[str]:
    return sorted({p.stem for p in _CONFIG_DIR.glob("*.json")} | set(_EXTRA))


def _read(name: str) -> dict:
    path = _EXTRA.get(name, _CONFIG_DIR / f"{name}.json")
    if not path.exists():
        raise ValueError(f"no model config {name!r}; available: {list_model_configs()}")
    return json.loads(path.read_text())


def load_model_config(name: str) -> dict:
    """The config ``name`` (``model_configs/<name>.json`` or one added), without its ``_`` notes; a
    ValueError listing the available ones for an unknown name.

    Example:
        >>> cfg = load_model_config("inception-tiny")
        >>> cfg["image_size"], "_comment" in cfg
        (75, False)
    """
    return {k: v for k, v in _read(name).items() if not k.startswith("_")}


def profile_configs(kind: str, profiles) -> dict[str, dict]:
    """``{profile: load_model_config(f"{kind}-{profile}")}`` for each profile."""
    return {profile: load_model_config(f"{kind}-{profile}") for profile in profiles}
