"""The last run's gate records as ``t2i-fairness plan`` reads them (``<artifacts>/run.json``)."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["last_run_gates"]


def last_run_gates(artifacts) -> tuple[Path, list[dict] | None, str | None]:
    """``(path, records, problem)``: the gate records of ``<artifacts>/run.json``; ``records`` is ``None`` with the
    reason in ``problem`` when there is no such file or it cannot be read.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> last_run_gates(d)[1:]
        (None, 'no run')
        >>> _ = (d / "run.json").write_text('{"gates": [{"gate": "g"}]}')
        >>> last_run_gates(d)[1:]
        ([{'gate': 'g'}], None)
    """
    path = Path(artifacts) / "run.json"
    if not path.is_file():
        return path, None, "no run"
    try:
        return path, list(json.loads(path.read_text()).get("gates", [])), None
    except (OSError, ValueError, AttributeError) as exc:
        return path, None, f"could not be read ({exc})"
