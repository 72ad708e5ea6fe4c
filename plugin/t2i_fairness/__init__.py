"""t2i-fairness: pytest gates for text-to-image models on published fairness indicators."""

__version__ = "0.1.0"
