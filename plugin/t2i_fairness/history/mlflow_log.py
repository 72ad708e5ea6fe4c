"""``--t2i-mlflow URI``: the run in an MLflow tracking server, after every local output is written.

One MLflow run per gate run, named after the model, in the experiment ``t2i-fairness``: the settings
as params, each gate's value, interval, verdict (1 pass, 0 otherwise) and p-value as metrics, the
run's verdict as a tag, ``run.json`` and the HTML report as artifacts. MLflow is an optional extra
(``pip install 't2i-fairness[mlflow]'``); a missing package or a server that cannot be reached is one
warning line, and the run's own outputs are kept as they are.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

__all__ = ["EXPERIMENT", "log_run", "metric_key"]

EXPERIMENT = "t2i-fairness"
_KEY = re.compile(r"[^A-Za-z0-9_\-. /]")


def metric_key(gate: str, what: str) -> str:
    """An MLflow-safe key (letters, digits, ``_ - . /`` and spaces; at most 250 characters).

    Example:
        >>> metric_key("test_region_coverage[synthetic-object-africa]", "value")
        'test_region_coverage.synthetic-object-africa.value'
    """
    text = _KEY.sub(".", gate.replace("[", ".").replace("]", "")).strip(".")
    return f"{text[:240]}.{what}"


def _params(options) -> dict[str, str]:
    from t2i_fairness.history.record import settings_of

    out = {}
    for key, value in settings_of(options).items():
        items = value.items() if isinstance(value, dict) else [("", value)]
        for sub, v in items:
            out[f"{key}.{sub}" if sub else key] = str(v)[:500]
    return out


def log_run(uri: str, options, session, report: str | None = None) -> str:
    """Log the run to ``uri``; returns the line the summary prints (where it went, or why not)."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        return (f"WARNING: --t2i-mlflow {uri}: mlflow is not installed (pip install 't2i-fairness[mlflow]'); "
                "nothing logged, the local outputs are kept")
    records = [r for r in session.records if r.status != "baseline"]
    try:
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(EXPERIMENT)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(EXPERIMENT)
        v = session.outcome.verdict(records)
        tags = {"t2i.verdict": v.word, "t2i.headline": v.headline[:5000], "t2i.model": options.model}
        if session.history is not None:
            tags["t2i.history_run"] = str(session.history.run_id)
        run = client.create_run(exp_id, run_name=options.model, tags=tags)
        rid = run.info.run_id
        from mlflow.entities import Metric, Param

        params = [Param(k, v) for k, v in sorted(_params(options).items())]
        metrics, stamp = [], int(time.time() * 1000)
        for r in records:
            values = {"value": r.value, "verdict": 1.0 if r.status == "pass" else 0.0, "p_value": r.p_value}
            if r.interval:
                values.update(low=r.interval[0], high=r.interval[1])
            metrics += [Metric(metric_key(r.gate, k), float(x), stamp, 0) for k, x in values.items()
                        if isinstance(x, (int, float)) and math.isfinite(float(x))]
        for i in range(0, max(len(params), len(metrics)), 100):  # the server's batch limits
            client.log_batch(rid, metrics=metrics[i:i + 100], params=params[i:i + 100])
        for path in (Path(options.artifacts) / "run.json", Path(report) if report else None):
            if path is not None and path.is_file():
                client.log_artifact(rid, str(path))
        client.set_terminated(rid, "FINISHED" if v.passed else "FAILED")
    except Exception as exc:  # noqa: BLE001  (a server's failure never fails or loses the run)
        return (f"WARNING: --t2i-mlflow {uri}: not logged ({type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}); "
                "the local outputs are kept")
    return f"MLflow: run {rid} ({options.model}) in experiment {EXPERIMENT!r} at {uri}"
