"""The human audit of a run's judged shares: its sample and labelling page, its labels, its audited evidence.

``t2i-fairness audit RUN`` draws the sample (:mod:`.sample`) of the judgements a run wrote (:mod:`.units`) and
writes the labelling page (:mod:`.page`); ``--t2i-audit LABELS.csv`` reads the labels (:mod:`.labels`) and decides
each gate over a judged share on prediction-powered evidence (:mod:`.audited`). Docs: docs/decisions.md.
"""

from t2i_fairness.audit.audited import Audited, agreement, audited
from t2i_fairness.audit.labels import Labels, LabelsError, labels_for, read_labels
from t2i_fairness.audit.sample import Drawn, draw_sample
from t2i_fairness.audit.units import JudgedShare, JudgedUnit, judged_units, write_judged

__all__ = ["Audited", "Drawn", "JudgedShare", "JudgedUnit", "Labels", "LabelsError", "agreement", "audited",
           "draw_sample", "judged_units", "labels_for", "read_labels", "write_judged"]
