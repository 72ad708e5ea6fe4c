"""DIG In's options: none of its own.

DIG In reads the core options it shares with Decomposed-DIG: ``--t2i-objects``,
``--t2i-images-per-prompt``, ``--t2i-reference``, ``--t2i-nearest-k`` and ``--t2i-dedupe``
(:mod:`t2i_fairness.spine.options`).
"""

from __future__ import annotations

OPTIONS: tuple = ()
