"""What a gate run writes to its history: the run's identity and settings, its gates as they arrive, its end.

The plugin's controller (the only process under xdist that sees every gate) holds one
:class:`Recorder`; a store that cannot be written is said once and never fails the run.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import warnings
from pathlib import Path
from typing import Any, Mapping

from t2i_fairness.history.store import HistoryStore

__all__ = ["Recorder", "finish_history", "sample_key", "settings_of", "thresholds_commit"]

# provenance fields that name the model, scorers, libraries or device: what differs between releases, not the sample
NOT_SAMPLE = ("model", "scorers", "t2i_fairness", "torch", "torchvision", "diffusers", "transformers", "open_clip",
              "timm", "device", "gpu", "precision")


def sample_key(provenance: Mapping[str, Any]) -> str:
    """What fixes a gate's prompts and seeds (objects, images per prompt, base seed, a family's own sample
    settings), as a short digest: two runs with the same key drew the same prompts and seeds.

    Example:
        >>> sample_key({"model": "a", "seed": 0, "objects": "bag"}) == sample_key({"model": "b", "seed": 0, "objects": "bag"})
        True
    """
    kept = {k: v for k, v in sorted(provenance.items()) if k not in NOT_SAMPLE}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def thresholds_commit(path: str | Path) -> str | None:
    """The last git commit of the thresholds file (``+modified`` when it has uncommitted changes); None outside git."""
    p = Path(path)
    if not p.is_file():
        return None
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", *args], cwd=p.parent, capture_output=True, text=True, timeout=10,
                                  check=True).stdout.strip()

        commit = git("log", "-1", "--format=%H", "--", p.name)
        if not commit:
            return None
        return commit + ("+modified" if git("status", "--porcelain", "--", p.name) else "")
    except (OSError, subprocess.SubprocessError):
        return None


def settings_of(options) -> dict[str, Any]:
    """The run's core settings as plain values (each family's frozen options as their fields)."""
    from dataclasses import asdict, fields, is_dataclass

    out: dict[str, Any] = {}
    for f in fields(options):
        if f.name in ("families", "canary_spec"):
            continue
        value = getattr(options, f.name)
        out[f.name] = value if isinstance(value, (int, float, bool, type(None))) else str(value)
    for name, part in options.families.items():
        if is_dataclass(part):
            out[name] = {k: (v if isinstance(v, (int, float, bool, type(None))) else str(v))
                         for k, v in asdict(part).items()}
    return out


class Recorder:
    """One run's writer: the run row on its first gate, each gate as it arrives, the end at session finish."""

    def __init__(self, path: Path, options, warn=None):
        self.path = Path(path)
        self.options = options
        self.run_id: int | None = None
        self.store: HistoryStore | None = None
        self.error: str | None = None
        self.warn = warn or (lambda text: warnings.warn(text, stacklevel=2))

    def _failed(self, exc: Exception) -> None:
        if self.error is None:
            self.error = f"history not written to {self.path}: {exc}"
            self.warn(f"t2i-fairness: {self.error} (the run's other outputs are kept)")

    def _begin(self, record: Mapping[str, Any]) -> bool:
        if self.run_id is not None:
            return True
        if self.error is not None:
            return False
        prov = dict(record.get("provenance") or {})
        o = self.options
        meta = {"model": o.model + (f"@{o.model_revision}" if o.model_revision else ""),
                "model_identity": str(prov.get("model") or o.model), "scorers": o.scorers,
                "scorers_identity": json.dumps({k: v for k, v in prov.items() if "scorer" in k}, sort_keys=True,
                                               default=str),
                "seed": o.seed, "settings": settings_of(o), "thresholds": str(o.thresholds),
                "thresholds_commit": thresholds_commit(o.thresholds), "alpha": o.alpha}
        try:
            self.store = HistoryStore(self.path)
            self.run_id = self.store.begin_run(meta)
        except Exception as exc:  # noqa: BLE001  (a history never fails the run)
            self._failed(exc)
            return False
        return True

    def gate(self, record: Mapping[str, Any]) -> None:
        """A gate record as it arrives (a dict of a :class:`~t2i_fairness.gating.session.GateRecord`)."""
        if record.get("status") == "baseline" or not self._begin(record):
            return
        try:
            self.store.add_gates(self.run_id, [(record, sample_key(record.get("provenance") or {}))])
        except Exception as exc:  # noqa: BLE001
            self._failed(exc)

    def finish(self, session, exit_status: int) -> int | None:
        """The run's end: every record again (their adjusted p-values), the verdict, ``finished`` or
        ``interrupted``. Returns the run id (None when nothing was recorded)."""
        records = [r.to_dict() for r in session.records if r.status != "baseline"]
        if records and self.run_id is None:
            self._begin(records[0])
        if self.run_id is None or self.store is None:
            return None
        outcome = session.outcome
        v = outcome.verdict([r for r in session.records if r.status != "baseline"])
        status = "interrupted" if (outcome.interrupted or outcome.stopped) else "finished"
        try:
            self.store.add_gates(self.run_id, [(r, sample_key(r.get("provenance") or {})) for r in records])
            self.store.finish_run(self.run_id, status, verdict=v.headline, exit_status=int(exit_status),
                                  selection=outcome.selection.line())
        except Exception as exc:  # noqa: BLE001
            self._failed(exc)
            return None
        return self.run_id


def finish_history(recorder: Recorder, session, exit_status: int) -> None:
    """The run's end in its history, and the view its reports show (``session.history``)."""
    run_id = recorder.finish(session, exit_status)
    if run_id is None or recorder.store is None:
        return
    from t2i_fairness.history.view import history_view

    try:
        session.history = history_view(recorder.store, run_id, alpha=recorder.options.alpha)
    except Exception as exc:  # noqa: BLE001  (a history never fails the run)
        recorder._failed(exc)
    finally:
        recorder.store.close()
