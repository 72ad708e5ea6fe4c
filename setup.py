"""Package layout (the rest of the metadata is in pyproject.toml).

The repository keeps the suite where a reader expects it: the gate tests in ``fairness_tests/`` and
their fixtures in ``fixtures/`` at the top level, the package in ``plugin/t2i_fairness``. The wheel
ships all three as one package, so ``pip install t2i-fairness`` gives a model team every gate:
``fairness_tests/`` becomes ``t2i_fairness.fairness_tests`` and ``fixtures/`` ``t2i_fairness.fixtures``
(no second copy of any file; ``pip install -e .`` maps the same names onto the checkout).
"""

from setuptools import find_packages, setup

SUITE = {"t2i_fairness.fairness_tests": "fairness_tests", "t2i_fairness.fixtures": "fixtures"}

setup(
    packages=find_packages("plugin") + list(SUITE),
    package_dir={"": "plugin", **SUITE},
)
