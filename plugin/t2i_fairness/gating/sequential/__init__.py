"""Sequential gates (``--t2i-sequential``): planned looks, alpha spent over them, early passes by futility or
curtailment. ``plan`` (spending, futility levels, a plan's images), ``rules`` (one gate at one look), ``stopping`` (what a look
says of the test at ``N``: can it fail, its conditional power), ``loop``
(a study's gates, look by look), ``look`` (the typed record of where a gate stopped) and ``messages`` (what a
look says). Design and rationale: ``docs/sequential.md``."""

from t2i_fairness.gating.sequential.look import Look, Reason
from t2i_fairness.gating.sequential.loop import GROUP_PARAMETERS, GateCallSpec, Rounds
from t2i_fairness.gating.sequential.messages import cannot_fail_clause, early_record, gate_line, where_parts
from t2i_fairness.gating.sequential.plan import (NullShares, PromptUse, futility_levels, image_range, null_share,
                                                 round_sizes, sequential_images, spending_shares)
from t2i_fairness.gating.sequential.rules import (CURTAIL_GAMMA, FUTILITY_BETA, FUTILITY_MISS, REASONS, LookDecision,
                                                  SequentialEvidence, declare_futility_miss, decide_look)

__all__ = ["CURTAIL_GAMMA", "FUTILITY_BETA", "FUTILITY_MISS", "GROUP_PARAMETERS", "GateCallSpec", "Look", "LookDecision",
           "NullShares", "PromptUse", "REASONS", "Reason", "Rounds", "SequentialEvidence", "cannot_fail_clause",
           "declare_futility_miss", "decide_look", "early_record", "futility_levels", "gate_line", "image_range",
           "null_share", "round_sizes", "sequential_images", "spending_shares", "where_parts"]
