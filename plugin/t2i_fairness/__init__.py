"""t2i-fairness: pytest gates for text-to-image models on published fairness indicators."""

from pathlib import Path

__version__ = "0.1.0"

DATA = Path(__file__).parent / "data"  # data files shipped with the package (vocabularies, smoke samples)
MODEL_CONFIGS = Path(__file__).parent / "model_configs"  # named model configs (see t2i_fairness.models.configs)
