"""The spine: the run's options, plan, image generation and workbench, above the generators.

Its lower half lives in :mod:`t2i_fairness.base` (cache, memo, rowstore, files, identity, hub,
devices).
"""
