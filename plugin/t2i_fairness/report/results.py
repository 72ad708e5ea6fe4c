"""The run's gates as one JSON file (``<--t2i-artifacts>/gates.json``): every record, and how the run decided.

Written by the controller at the end of a session, for machines: the calibration benchmark reads it,
and so can a team's own tooling (sample-size plans, dashboards).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from t2i_fairness.gating.session import GateSession
from t2i_fairness.spine.files import atomic_write_bytes

RESULTS_FILE = "gates.json"


def _plain(x):
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def results(session: GateSession, exitstatus: int | None = None) -> dict:
    """The JSON-able summary of a run.

    Example:
        >>> from pathlib import Path
        >>> results(GateSession(Path("t.yaml")))["records"]
        []
    """
    return _plain({
        "thresholds": str(session.thresholds_path),
        "exitstatus": None if exitstatus is None else int(exitstatus),
        "multiplicity": session.multiplicity,
        "alpha": session.alpha,
        "escalated": list(session.escalated),
        "canary": dict(session.canary_counts),
        "records": [r.to_dict() for r in session.records],
    })


def write_results(session: GateSession, folder: Path, exitstatus: int | None = None) -> Path:
    """Write :func:`results` to ``folder / gates.json`` atomically; returns the path."""
    path = Path(folder) / RESULTS_FILE
    atomic_write_bytes(path, json.dumps(results(session, exitstatus), indent=1, sort_keys=True, default=str).encode())
    return path
