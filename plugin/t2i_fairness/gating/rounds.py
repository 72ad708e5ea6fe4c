"""The round loop's old home: :mod:`t2i_fairness.gating.sequential.loop` (re-exported)."""

from t2i_fairness.gating.sequential.loop import GROUP_PARAMETERS, GateCallSpec, Rounds

__all__ = ["GROUP_PARAMETERS", "GateCallSpec", "Rounds"]
