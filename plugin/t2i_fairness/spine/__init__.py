"""The spine: the run's options, plan, image generation and workbench, above the generators (its
lower half is :mod:`t2i_fairness.base`).
"""
