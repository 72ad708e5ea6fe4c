"""Beyond one machine: plan a selection's images, make them with an engine, then gate warm.

* :mod:`.selection`: the tests a ``-k`` / ``-m`` selection picks, found by pytest's own collection
  (in-process, ``--collect-only``), with the run's resolved options.
* :mod:`.planner`: what those tests will ask for (each family's ``needs``, computed by its study's own
  code), the distinct images per family and role, what the cache already holds, and the canonical
  batch jobs that make the rest (:func:`t2i_fairness.spine.plan.batch_jobs`).
* :mod:`.engines`: running the jobs in-process (``local``) or on Ray Data (``ray``: one generator
  actor per GPU), then, with ``--stage features``, the studies' slices so a gate run only reads.

The command line is :mod:`t2i_fairness.cli` (``t2i-fairness plan`` / ``t2i-fairness generate``).
"""
