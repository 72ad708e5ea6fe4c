"""Moved to :mod:`t2i_fairness.base.rowstore`; this name stays importable (it forwards every attribute)."""

from t2i_fairness.base import rowstore as _moved


def __getattr__(name: str):
    return getattr(_moved, name)


def __dir__() -> list[str]:
    return dir(_moved)
