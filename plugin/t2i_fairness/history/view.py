"""What a run's reports show of its history: each gate's earlier values, and what changed since the last run.

"The last run of this suite" is the latest earlier run in the same store that finished (not interrupted
or killed) and measured any of this run's gates; the comparison is :func:`~t2i_fairness.history.compare.compare_gates`
over the gates both measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from t2i_fairness.history.compare import GateChange, compare_gates
from t2i_fairness.history.store import GateRow, HistoryStore, RunRow

__all__ = ["HistoryView", "history_view", "previous_run"]

TREND_RUNS = 12  # earlier values a trend shows


@dataclass
class HistoryView:
    """A run's place in its history (a plain object the report layer reads)."""

    store: str
    run_id: int
    previous: RunRow | None = None
    changes: list[GateChange] = field(default_factory=list)
    trends: dict[str, list[GateRow]] = field(default_factory=dict)  # gate -> earlier rows, oldest first
    alpha: float = 0.05

    @property
    def changed(self) -> list[GateChange]:
        return [c for c in self.changes if c.changed]

    def summary_line(self) -> str:
        """The terminal summary's line."""
        if self.previous is None:
            return f"history: run #{self.run_id} recorded in {self.store}; no earlier finished run of these gates"
        compared = sum(1 for c in self.changes if c.p_value is not None or c.changed)
        changed = self.changed
        worse = sum(1 for c in changed if c.regressed)
        return (f"history: run #{self.run_id} in {self.store}; since {self.previous.label}: {len(changed)} of "
                f"{compared} gate(s) changed beyond noise ({worse} regressed; Holm at {self.alpha:g}); "
                f"t2i-fairness compare {self.previous.id} {self.run_id} --t2i-history {self.store} shows each")

    def to_dict(self) -> dict:
        return {"store": self.store, "run": self.run_id, "previous": self.previous.id if self.previous else None,
                "alpha": self.alpha, "changed": [{"gate": c.gate, "delta": c.delta, "interval": c.interval,
                                                  "p_adjusted": c.p_adjusted, "regressed": c.regressed}
                                                 for c in self.changed]}


def previous_run(store: HistoryStore, run_id: int, gates: set[str]) -> RunRow | None:
    """The latest finished run before ``run_id`` that measured any of ``gates``."""
    for run in reversed(store.runs()):
        if run.id >= run_id or run.state != "finished":
            continue
        if gates & {g.gate for g in store.gates(run.id)}:
            return run
    return None


def history_view(store: HistoryStore, run_id: int, alpha: float = 0.05, trend_runs: int = TREND_RUNS) -> HistoryView:
    """The view of run ``run_id``: trends of its gates and the changes since the last run of these gates."""
    mine = store.gates(run_id)
    view = HistoryView(str(store.path), run_id, alpha=alpha)
    view.trends = {g.gate: store.series(g.gate, before=run_id, limit=trend_runs) for g in mine}
    view.previous = previous_run(store, run_id, {g.gate for g in mine})
    if view.previous is not None:
        view.changes = [c for c in compare_gates(store.gates(view.previous.id), mine, alpha) if c.b is not None]
    return view
