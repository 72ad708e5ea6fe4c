"""The precision every model runs at: one table of defaults, one place inputs meet the weights' dtype.

``--t2i-precision auto`` (default) takes each model's CUDA default from :data:`AUTO_ON_CUDA` (what
the papers' code and model cards use; other devices run float32); ``float32``, ``float16`` or
``bfloat16`` put every model there. Every adapter resolves its precision with :func:`resolve` and
moves inputs with :func:`to_weights`, none casts on its own; outputs leave as float32. The
precision is in every fingerprint (float32 keeps the older form, :func:`fingerprint_suffix`).
docs/precision.md has the measurements.
"""

from __future__ import annotations

from typing import Any, Mapping

PRECISIONS = ("float32", "float16", "bfloat16")
CHOICES = ("auto",) + PRECISIONS
SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}  # open_clip's names

# What ``auto`` gives on CUDA, per model kind; every other device (cpu, mps) runs float32.
AUTO_ON_CUDA: dict[str, str] = {
    "generator": "float16",  # diffusers pipelines in fp16 (torch_dtype=torch.float16), as every SD model card
    "clip": "float16",  # open_clip's precision="fp16" (OpenAI's own mixed fp16: layer norms in float32)
    "inception": "float32",  # DIG In's get_features_inceptionv3.py runs float32
    "vit": "float32",  # Decomposed-DIG's released code runs float32
    "segmenter": "float32",  # LangSAM (Grounding DINO + SAM) loads float32
    "captioner": "float16",  # BLIP-2 (blip2-opt-2.7b) in float16, as its model card runs it on a GPU
    "masked_lm": "float32",  # bert-base-uncased, float32 as the word-level paper's fill-mask pipeline
    "sentence": "float32",  # sentence-transformers' default
}


def check(precision: str, flag: str = "--t2i-precision") -> str:
    """``precision`` if it is one of :data:`CHOICES`, else a ValueError naming ``flag`` and the choices."""
    if precision not in CHOICES:
        raise ValueError(f"{flag}: unknown precision {precision!r}; choose from {', '.join(CHOICES)}")
    return precision


def resolve(kind: str, device: str, requested: str | None = None) -> str:
    """The precision a model of ``kind`` (a key of :data:`AUTO_ON_CUDA`) runs at on ``device``.

    Raises:
        ValueError: an unknown kind or precision.

    Example:
        >>> resolve("generator", "cuda:1"), resolve("inception", "cuda"), resolve("generator", "cpu")
        ('float16', 'float32', 'float32')
    """
    if kind not in AUTO_ON_CUDA:
        raise ValueError(f"unknown model kind {kind!r}; known: {sorted(AUTO_ON_CUDA)}")
    requested = check("auto" if requested is None else requested, "precision")
    if requested != "auto":
        return requested
    return AUTO_ON_CUDA[kind] if str(device).startswith("cuda") else "float32"


def torch_dtype(precision: str) -> Any:
    """``"bfloat16"`` -> ``torch.bfloat16`` (a ValueError for anything not in :data:`PRECISIONS`)."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose from {list(PRECISIONS)}")
    return getattr(torch, precision)


def fingerprint_suffix(precision: str, sep: str = "/") -> str:
    """What a fingerprint that had no precision field gains: nothing for float32 (its old form), else
    ``sep + precision`` (``/bfloat16``).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose from {list(PRECISIONS)}")
    return "" if precision == "float32" else f"{sep}{precision}"


def weights_dtype(module: Any) -> Any:
    """The dtype holding most of ``module``'s floating parameters (by element count): mixed-precision
    models keep a few small tensors, sometimes the first, in float32.

    Example:
        >>> import torch
        >>> m = torch.nn.Sequential(torch.nn.Linear(8, 8).half(), torch.nn.LayerNorm(8))
        >>> weights_dtype(m)
        torch.float16
    """
    import torch

    counts: dict[Any, int] = {}
    for p in module.parameters():
        if p.is_floating_point():
            counts[p.dtype] = counts.get(p.dtype, 0) + p.numel()
    return max(counts, key=counts.get) if counts else torch.float32


def to_weights(inputs: Any, dtype: Any, device: Any) -> Any:
    """Inputs (a tensor or a mapping of them) on ``device``, floating tensors cast to the weights'
    ``dtype``; integer and boolean tensors and non-tensor values pass unchanged.

    Example:
        >>> import torch
        >>> out = to_weights({"pixel_values": torch.zeros(1, 3), "input_ids": torch.ones(1, 2, dtype=torch.long)},
        ...                  torch.bfloat16, "cpu")
        >>> out["pixel_values"].dtype, out["input_ids"].dtype
        (torch.bfloat16, torch.int64)
    """
    if isinstance(inputs, Mapping):
        return {k: to_weights(v, dtype, device) for k, v in inputs.items()}
    if hasattr(inputs, "is_floating_point"):
        return inputs.to(device, dtype) if inputs.is_floating_point() else inputs.to(device)
    return inputs
