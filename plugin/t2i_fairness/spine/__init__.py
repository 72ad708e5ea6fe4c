"""The spine: the run's options, plan, image generation and workbench, above the generators.

Its lower half moved to :mod:`t2i_fairness.base` (cache, memo, rowstore, files, identity, hub,
devices); the old names ``t2i_fairness.spine.cache`` etc. still import (thin modules that forward to
:mod:`t2i_fairness.base`).
"""
