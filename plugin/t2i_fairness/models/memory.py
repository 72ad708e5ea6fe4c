"""What a model needs before it is built: parameters counted from its config, activations from its note.

Parameters (and floating buffers) are counted by building the architecture on torch's ``meta``
device, from the named config, a cached ``config.json`` or a checkpoint's safetensors headers; a
model whose config is not on this machine has no estimate. Activations come from the config's
``_memory`` note (outside every fingerprint; docs/memory.md), scaled by the precision's bytes.
:func:`scorer_need` gives a :class:`~t2i_fairness.base.memory.MemoryNeed`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from t2i_fairness.base.memory import BYTES, MemoryNeed
from t2i_fairness.models.configs import _read

__all__ = ["activation_note", "count_parameters", "safetensors_parameters", "scorer_need"]

MB = 1024 ** 2


def count_parameters(build: Callable[[], Any]) -> int:
    """Parameters and floating buffers of what ``build()`` makes, built on the ``meta`` device.

    Example:
        >>> import torch
        >>> count_parameters(lambda: [torch.nn.Linear(10, 4), torch.nn.LayerNorm(4)])
        52
    """
    import torch

    with torch.device("meta"):
        built = build()
    modules = built if isinstance(built, (list, tuple)) else [built]
    return int(sum(t.numel() for m in modules if isinstance(m, torch.nn.Module)
                   for t in [*m.parameters(), *m.buffers()] if t.is_floating_point()))


def safetensors_parameters(folder: str | os.PathLike) -> int:
    """Elements of every floating tensor in the ``*.safetensors`` files under ``folder``, from their
    headers only (``x.safetensors`` counted, not its ``x.fp16`` twin).

    Example:
        >>> import tempfile, struct
        >>> header = json.dumps({"w": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 48]}}).encode()
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = (Path(d) / "unet").mkdir()
        ...     _ = (Path(d) / "unet" / "m.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(48))
        ...     safetensors_parameters(d)
        12
    """
    total = 0
    files = sorted(Path(folder).rglob("*.safetensors"))
    names = {f.name for f in files}
    for f in files:
        parts = f.name.split(".")
        if len(parts) > 2 and ".".join(parts[:-2] + parts[-1:]) in names:  # a variant (fp16) of a file counted
            continue
        with open(f, "rb") as fh:
            size = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(size))
        for name, info in header.items():
            if name != "__metadata__" and str(info.get("dtype", "")).startswith(("F", "BF")):
                n = 1
                for d in info.get("shape", []):
                    n *= int(d)
                total += n
    return total


def activation_note(config_name: str) -> dict:
    """The ``_memory`` note of a config: what ``bench/bench_memory.py`` measured (empty when nothing was)."""
    return dict(_read(config_name).get("_memory") or {})


def _activations(note: dict, precision: str, batch: int | None) -> tuple[int, int, int]:
    """(activations at the batch, bytes per item, batch) from a config's ``_memory`` note."""
    batch = int(note.get("batch", 1) if batch is None else batch)
    fixed, per_item = (float(x) for x in note.get("activations_mb", (0, 0)))
    scale = BYTES.get(precision, 4) / 4
    return int((fixed + per_item * batch) * MB * scale), int(per_item * MB * scale), batch


def _pretrained(model_class: Callable, source: str) -> Callable[[], Any]:
    """The architecture of a transformers checkpoint (a folder, or a hub id in the local cache) from its config."""
    def build():
        from transformers import AutoConfig

        return model_class(AutoConfig.from_pretrained(source, local_files_only=True))

    return build


def _scorer_architecture(kind: str, profile: str, options: dict) -> tuple[Callable[[], Any], bool, str]:
    """(build the architecture, built in float32 then cast, the config it comes from) of a scorer."""
    from t2i_fairness.models.base import check_profile

    check_profile(profile)
    name = f"{kind}-{profile}"
    if kind == "inception":
        from t2i_fairness.models.inception import _build_random_inception

        return (lambda: _build_random_inception("kaiming_fan_in", 0)), True, name  # torchvision loads float32
    if kind == "vit":
        from t2i_fairness.models.vit import VIT_CONFIGS, _create_timm

        cfg = VIT_CONFIGS[profile]
        return (lambda: _create_timm(cfg, pretrained=False)), True, name  # timm builds and loads float32
    if kind == "clip":
        def clip():
            import open_clip

            from t2i_fairness.models.clip import _OPEN_CLIP_CONFIGS
            from t2i_fairness.models.configs import load_model_config

            open_clip.add_model_config(_OPEN_CLIP_CONFIGS)
            return open_clip.create_model(load_model_config(name)["model"], pretrained=None, device="meta")

        return clip, True, name  # open_clip builds float32, then casts
    if kind == "segmenter":
        from t2i_fairness.models.segmenter import SEGMENTER_CONFIGS, random_models

        cfg = SEGMENTER_CONFIGS[profile]
        if isinstance(cfg["detector"], str):  # paper: the checkpoints' own configs
            from transformers import GroundingDinoForObjectDetection, SamModel

            det, sam = str(options.get("detector", cfg["detector"])), str(options.get("sam", cfg["sam"]))
            return (lambda: [_pretrained(GroundingDinoForObjectDetection, det)(), _pretrained(SamModel, sam)()]), True, name
        return (lambda: random_models(cfg)), True, name
    if kind == "captioner":
        from t2i_fairness.models.captioner import BLIP2_CONFIGS, _build_tiny

        cfg = BLIP2_CONFIGS[profile]
        if "source" in cfg:
            from transformers import Blip2ForConditionalGeneration

            return _pretrained(Blip2ForConditionalGeneration, str(options.get("weights", cfg["source"]))), False, name
        return (lambda: _build_tiny(cfg)[1]), True, name
    if kind == "masked_lm":
        from t2i_fairness.models.masked_lm import MLM_CONFIGS

        cfg = MLM_CONFIGS[profile]
        from transformers import BertConfig, BertForMaskedLM

        if "source" in cfg:
            return _pretrained(BertForMaskedLM, str(options.get("weights", cfg["source"]))), True, name
        return (lambda: BertForMaskedLM(BertConfig(**cfg["bert"]))), True, name
    if kind == "sentence":
        from t2i_fairness.models.sentence import SENTENCE_MODELS, SENTENCE_PROFILES, _resolve_source

        model = options.get("model", SENTENCE_PROFILES[profile])
        cfg = SENTENCE_MODELS[model]
        if "random" in cfg:
            from transformers import MPNetConfig, MPNetModel

            return (lambda: MPNetModel(MPNetConfig(**cfg["random"]["config"]), add_pooling_layer=False)), True, \
                f"sentence-{model}"
        from transformers import AutoModel

        source = _resolve_source(str(options.get("weights", cfg["source"])))[0]
        return _pretrained(AutoModel.from_config, source), True, f"sentence-{model}"
    raise ValueError(f"no memory estimate for scorer kind {kind!r}")


def scorer_need(kind: str, profile: str, device: str, precision: str | None = None, batch: int | None = None,
                **options: Any) -> MemoryNeed | None:
    """What a registered scorer kind needs on ``device`` at ``precision``; ``None`` when its config is
    not on this machine.

    Example:
        >>> need = scorer_need("inception", "paper-random", "cpu")
        >>> need.parameters, need.precision, need.batch  # InceptionV3 without its auxiliary head
        (23869000, 'float32', 16)
    """
    from t2i_fairness.models.precision import resolve

    precision = resolve(kind, device, precision)
    build, in_float32, config = _scorer_architecture(kind, profile, options)
    try:
        parameters = count_parameters(build)
    except OSError:  # a paper checkpoint's config is not in the local cache
        return None
    activations, per_item, batch = _activations(activation_note(config), precision, batch)
    return MemoryNeed(f"scorer {kind} ({profile})", parameters, precision, activations, batch, in_float32, per_item,
                      detail=f"counted from model_configs/{config}.json")
