"""Beyond one machine: plan a selection's images, make them with an engine, then gate warm.

:mod:`.selection` finds the selected tests, :mod:`.planner` what they will ask for and the batch
jobs that make what the cache lacks, :mod:`.engines` runs them here or on Ray Data. The command
line is :mod:`t2i_fairness.cli`.
"""
