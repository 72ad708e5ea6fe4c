"""Named model configs (``model_configs/*.json``), the way open_clip's factory keeps them.

``add_model_config(path)`` registers more configs without code changes.
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


def load_model_config(name: str) -> dict:
    path = _EXTRA.get(name, _CONFIG_DIR / f"{name}.json")
    if not path.exists():
        raise ValueError(f"no model config {name!r}; available: {list_model_configs()}")
    return json.loads(path.read_text())
