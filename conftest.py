"""The suite's fixtures and options come from the installed ``t2i_fairness`` pytest plugin (its
``t2i_fairness.fixtures`` are this repository's ``fixtures/``), so the same gates run here, from a
model team's repository, or with ``pytest --pyargs t2i_fairness`` from any directory."""
