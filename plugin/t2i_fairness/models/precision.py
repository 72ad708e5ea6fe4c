"""The precision every model runs at: one table of defaults, one place inputs meet the weights' dtype.

``--t2i-precision`` sets it for a run: ``auto`` (default) takes each model's default on its device
from :data:`AUTO_ON_CUDA` (every other device runs float32); ``float32``, ``float16`` or ``bfloat16``
puts every model (the generator and each scorer) at that precision.

* :data:`AUTO_ON_CUDA`: what each model runs at on CUDA under ``auto``: what the papers' released code
  and model cards use there (diffusers' and open_clip's float16, BLIP-2's float16 from its model card;
  InceptionV3, the ViT, Grounding DINO + SAM, BERT and the sentence encoder in float32, as released).
* :func:`resolve`: a model kind, a device and a requested precision -> the precision it runs at.
  Every adapter's ``from_profile`` takes ``precision=`` and resolves it here. The run's request travels
  explicitly, in the frozen :class:`~t2i_fairness.base.devices.RunContext` the workbench hands to every
  builder (no context variable: a model built outside a run gets ``auto`` unless told otherwise).
* :func:`to_weights`: the one boundary where inputs are moved to the device and floating tensors cast
  to the weights' dtype (:func:`weights_dtype`); every adapter calls it, none casts on its own.
  Outputs leave the adapters as float32 (what the cache stores) whatever the precision.

The precision is part of every model's fingerprint, so features or images made at one precision are
never read back for another. Fingerprints written before this option existed were all float32 ones;
where an adapter's fingerprint had no precision field, float32 keeps that form
(:func:`fingerprint_suffix` is empty for it) and any other precision adds one, so the tiny model's
identities, and the bounds measured under them, stay valid.
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
    """``precision`` if it is one of :data:`CHOICES`.

    Raises:
        ValueError: any other value (the message names ``flag`` and the choices).

    Example:
        >>> check("bfloat16")
        'bfloat16'
        >>> check("fp8")
        Traceback (most recent call last):
        ...
        ValueError: --t2i-precision: unknown precision 'fp8'; choose from auto, float32, float16, bfloat16
    """
    if precision not in CHOICES:
        raise ValueError(f"{flag}: unknown precision {precision!r}; choose from {', '.join(CHOICES)}")
    return precision


def resolve(kind: str, device: str, requested: str | None = None) -> str:
    """The precision a model of ``kind`` runs at on ``device``.

    Args:
        kind: a key of :data:`AUTO_ON_CUDA`.
        device: a torch device string (``cpu``, ``cuda``, ``cuda:1``, ``mps``).
        requested: ``auto``, a precision, or ``None`` (``auto``).

    Raises:
        ValueError: an unknown kind or precision.

    Example:
        >>> resolve("generator", "cuda:1"), resolve("inception", "cuda"), resolve("generator", "cpu")
        ('float16', 'float32', 'float32')
        >>> resolve("inception", "cuda", "bfloat16")
        'bfloat16'
    """
    if kind not in AUTO_ON_CUDA:
        raise ValueError(f"unknown model kind {kind!r}; known: {sorted(AUTO_ON_CUDA)}")
    requested = check("auto" if requested is None else requested, "precision")
    if requested != "auto":
        return requested
    return AUTO_ON_CUDA[kind] if str(device).startswith("cuda") else "float32"


def torch_dtype(precision: str) -> Any:
    """``"bfloat16"`` -> ``torch.bfloat16``.

    Raises:
        ValueError: not one of :data:`PRECISIONS`.

    Example:
        >>> torch_dtype("float16")
        torch.float16
    """
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose from {list(PRECISIONS)}")
    return getattr(torch, precision)


def fingerprint_suffix(precision: str, sep: str = "/") -> str:
    """What a fingerprint that had no precision field gains: nothing for float32 (its old form), else
    ``sep + precision``.

    Example:
        >>> fingerprint_suffix("float32"), fingerprint_suffix("bfloat16")
        ('', '/bfloat16')
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose from {list(PRECISIONS)}")
    return "" if precision == "float32" else f"{sep}{precision}"


def weights_dtype(module: Any) -> Any:
    """The dtype holding most of ``module``'s floating parameters (by element count).

    Mixed-precision models keep a few small tensors in float32 (open_clip's fp16 CLIP keeps its
    positional and class embeddings; the first parameter is one of them), so the first parameter's
    dtype is not the one the input layer expects; the bulk of the weights is.

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
    """Inputs on ``device``, floating tensors cast to ``dtype`` (the weights'); integer and boolean
    tensors (token ids, masks) keep theirs. A tensor, or a mapping of them (a tokenizer's or
    processor's output) whose non-tensor values pass through.

    Args:
        inputs: a tensor or a mapping of names to tensors.
        dtype: the weights' dtype (:func:`weights_dtype` or the precision's).
        device: where the model is.

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
