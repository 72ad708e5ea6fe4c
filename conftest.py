"""The suite's fixtures live in ``fixtures/``; the plugin itself (options, ``t2i``, ``gate``) is installed
as the ``t2i_fairness`` pytest plugin."""

pytest_plugins = [
    "fixtures.generation",
    "fixtures.scores",
    "fixtures.dig",
    "fixtures.indic",
    "fixtures.decomposed",
    "fixtures.word_influence",
    "fixtures.cis",
]
