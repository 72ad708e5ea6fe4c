"""Every error and warning class of the package, in one place.

- :class:`ModelLoadError`: a model (generator or scorer) cannot be loaded. The plugin ends the
  session with its message, which names the model and says how to fix it; every adapter raises
  it (never a bare ``RuntimeError``) so that a missing checkpoint stops the run within seconds.
- :class:`OptionError`: a bad option value; the plugin turns it into ``pytest.UsageError`` and the
  ``t2i-fairness`` command line into exit status 2. Its message starts with the option's name.
- Warnings a run can emit: :class:`T2IProvenanceWarning`, :class:`T2ISmallSampleWarning`,
  :class:`IndicModelWarning`, :class:`T2IIdentityWarning`, :class:`T2ITruncationWarning`,
  :class:`T2IInconclusiveWarning`.
"""

from __future__ import annotations

__all__ = [
    "IndicModelWarning",
    "ModelLoadError",
    "OptionError",
    "T2IError",
    "T2IIdentityWarning",
    "T2IInconclusiveWarning",
    "T2IProvenanceWarning",
    "T2ISmallSampleWarning",
    "T2ITruncationWarning",
]


class T2IError(Exception):
    """Base class of the package's own errors."""


class ModelLoadError(T2IError, RuntimeError):
    """A model could not be loaded; the message names it and says how to fix it.

    Example:
        >>> raise ModelLoadError("ViT vit_base_patch16_224: weights not in the Hugging Face cache; set HF_HOME")
        Traceback (most recent call last):
        ...
        t2i_fairness.errors.ModelLoadError: ViT vit_base_patch16_224: weights not in the Hugging Face cache; set HF_HOME
    """


class OptionError(T2IError, ValueError):
    """A command-line option has a bad value.

    Args:
        option: the flag, e.g. ``--t2i-objects``.
        message: what is wrong and what is accepted.

    Example:
        >>> str(OptionError("--t2i-seed", "must be an integer, got 'x'"))
        "--t2i-seed: must be an integer, got 'x'"
    """

    def __init__(self, option: str, message: str):
        self.option = option
        self.message = message
        super().__init__(f"{option}: {message}" if option else message)


class T2IProvenanceWarning(UserWarning):
    """A gate's bound was set under other settings (model, scorers, sample sizes, versions, device).

    Kept importable; a run no longer warns once per gate: it states what differs, for how many gates and
    what it means once, at the top of the summary (and in the HTML report, JUnit, Allure and run.json)."""


class T2IInconclusiveWarning(UserWarning):
    """A gate's estimate misses its bound, but the evidence does not decide at this sample size."""


class T2ISmallSampleWarning(UserWarning):
    """A figure rests on too few values to be stable (a percentile of few images, a tiny group)."""


class IndicModelWarning(UserWarning):
    """An IndicTTI model fell back to another one (say, the sentence encoder), so values are not comparable."""


class T2IIdentityWarning(UserWarning):
    """A model's identity cannot be trusted to change with its weights (a ``python:`` factory whose
    fingerprint is a method, or names no version), so the cache may serve another model's images."""


class T2ITruncationWarning(UserWarning):
    """The generator's tokenizer truncates prompts: some images come from part of their prompt."""
