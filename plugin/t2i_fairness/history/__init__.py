"""The run history: every gate run's gates in a SQLite store, compared across runs, and logged to MLflow.

``store`` (the file, its schema and migrations), ``record`` (what a run writes), ``compare`` (a change
beyond noise), ``view`` (what the reports show), ``expression`` (``-k``-like expressions), ``cli``
(``t2i-fairness history`` / ``compare``), ``mlflow_log`` (``--t2i-mlflow``). docs/history.md.
"""
