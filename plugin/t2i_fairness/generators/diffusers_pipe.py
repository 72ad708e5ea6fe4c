"""Generators backed by a ``diffusers`` pipeline: the tiny offline smoke model and real checkpoints."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

from PIL import Image

from t2i_fairness.models.configs import load_model_config
from t2i_fairness.errors import ModelLoadError
from t2i_fairness.generators.base import GenerationSettings


def _torch_dtype(device: str, precision: str | None = None):
    """The pipeline's dtype: ``precision`` (``None`` or ``auto``: float16 on CUDA, else float32)."""
    from t2i_fairness.models.precision import resolve, torch_dtype

    return torch_dtype(resolve("generator", device, precision))


def diffusers_fingerprint(name: str, settings: GenerationSettings, device: str, weights: str | None = None,
                          precision: str | None = None) -> str:
    """Identifies model, weights, settings, precision and device class without loading anything.

    Args:
        settings: the resolved generation settings (all but the batch size decide the pixels).
        weights: the weights' identity (a ``sha256-...`` digest, a hub commit, ``init-...``).
    """
    from t2i_fairness.models.precision import resolve
    from t2i_fairness.base.identity import device_class

    precision = resolve("generator", device, precision)
    ident = {"model": name, "weights": weights, "settings": settings.key(), "precision": precision,
             "device": device_class(device)}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
    return f"diffusers:{name}{'@' + weights if weights else ''}:{digest}"


TINY_DEFAULTS_CONFIG = "tiny-sd"
TINY_LIBRARIES = ("torch", "diffusers", "transformers")  # they make the tiny model's random weights


def tiny_model_name(config_name: str = TINY_DEFAULTS_CONFIG) -> str:
    """``tiny-sd-<digest of the config>`` (``sd15-random-<digest>`` for that config): the config is the weights."""
    cfg = load_model_config(config_name)
    blob = json.dumps({k: v for k, v in cfg.items() if k != "_comment"}, sort_keys=True).encode()
    return ("tiny-sd" if config_name == TINY_DEFAULTS_CONFIG else config_name) + "-" + hashlib.sha256(blob).hexdigest()[:8]


def tiny_weights() -> str:
    """The tiny model's weights identity: it has no files, its weights come from its config's seed
    through these libraries (:func:`t2i_fairness.base.identity.init_identity`)."""
    from t2i_fairness.base.identity import init_identity

    return init_identity(*TINY_LIBRARIES)


def diffusers_need(spec: str, settings: GenerationSettings, device: str, precision: str, *,
                   config_name: str | None = None, folder: str | Path | None = None):
    """What a diffusers generator needs (a :class:`~t2i_fairness.base.memory.MemoryNeed`), counted before it is built."""
    from t2i_fairness.base.memory import BYTES, MemoryNeed
    from t2i_fairness.models.memory import activation_note, count_parameters, safetensors_parameters

    if config_name is not None:
        cfg = load_model_config(config_name)
        parameters = count_parameters(lambda: pipeline_modules(cfg))
        note, detail, in_float32 = activation_note(config_name), f"counted from model_configs/{config_name}.json", True
    else:
        parameters = safetensors_parameters(folder) if folder is not None else 0
        if not parameters:
            return None
        note, detail, in_float32 = activation_note("sd15-random"), "counted from its safetensors headers", False
    at = float(note.get("at_px", 64))
    height, width, batch = settings.height or 512, settings.width or 512, settings.batch_size or 1
    fixed, per_image = (float(x) for x in note.get("activations_mb", (0, 0)))
    scale = 1024 ** 2 * BYTES.get(precision, 4) / 4
    per_item = int(per_image * height * width / (at * at) * scale)
    return MemoryNeed(f"generator {spec}", parameters, precision, int(fixed * scale) + per_item * batch, batch, in_float32,
                      per_item, detail=f"{detail}; {height}x{width}",
                      flags=("--t2i-batch-size", "--t2i-precision", "--t2i-device"))


PAPER_DEFAULTS = {"steps": 50, "guidance": 7.0, "height": 512, "width": 512, "batch_size": 8}


RANDOM_MODELS = {"sd15-random": "sd15-random"}  # --t2i-model spec -> model_configs/<name>.json (seeded random weights)


def pipeline_modules(cfg: dict) -> tuple:
    """The UNet, VAE and text encoder of a pipeline config, with the config's seeded random weights."""
    import torch
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    from t2i_fairness.models.clip_tokenizer import BOS_ID, EOS_ID, VOCAB_SIZE

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg["seed"])
        unet = UNet2DConditionModel(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg["unet"].items()})
        vae = AutoencoderKL(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg["vae"].items()})
        text_encoder = CLIPTextModel(
            CLIPTextConfig(
                **cfg["text_encoder"],
                vocab_size=VOCAB_SIZE,
                bos_token_id=BOS_ID,
                eos_token_id=EOS_ID,
                pad_token_id=EOS_ID,
            )
        )
    return unet, vae, text_encoder


def build_tiny_pipeline(config_name: str = "tiny-sd"):
    """A real ``StableDiffusionPipeline`` built offline from a ``model_configs/`` config (``tiny-sd``,
    ``sd15-random``) with weights seeded by the config alone: every machine builds the same model.
    """
    import diffusers
    from diffusers import StableDiffusionPipeline

    from t2i_fairness.models.clip_tokenizer import offline_clip_tokenizer

    cfg = load_model_config(config_name)
    unet, vae, text_encoder = pipeline_modules(cfg)
    scheduler = getattr(diffusers, cfg.get("scheduler_class", "DDIMScheduler"))(**cfg["scheduler"])
    pipe = StableDiffusionPipeline(
        unet=unet,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=offline_clip_tokenizer(),
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe, cfg


class DiffusersGenerator:
    """Wraps a diffusers text-to-image pipeline behind the ``Generator`` protocol; each image gets its own
    seeded ``torch.Generator``, so it depends on (prompt, seed, settings), not on its batch mates.
    """

    def __init__(self, pipe, name: str, settings: GenerationSettings, device: str = "cpu", num_threads: int | None = None,
                 weights: str | None = None, precision: str | None = None):
        from t2i_fairness.models.precision import resolve

        self.precision = resolve("generator", device, precision)
        dtype = _torch_dtype(device, self.precision)
        # from_pretrained loads at the dtype already; a pipeline built in float32 (tiny, sd15-random) is cast here
        self.pipe = pipe.to(device) if getattr(pipe, "dtype", dtype) == dtype else pipe.to(device, dtype)
        self.num_threads = num_threads  # CPU kernels round differently with the thread count
        self.name = name
        self.settings = settings
        self.device = device
        self.weights = weights
        self.fingerprint = diffusers_fingerprint(name, settings, device, weights, self.precision)

    @classmethod
    def tiny(cls, settings: GenerationSettings = GenerationSettings(), device: str = "cpu",
             precision: str | None = None) -> "DiffusersGenerator":
        pipe, cfg = build_tiny_pipeline()
        # Pinned threads make the smoke model's bytes the same on every machine, whatever its core count.
        return cls(pipe, tiny_model_name(), settings.resolved(cfg["defaults"]), device, num_threads=2, weights=tiny_weights(),
                   precision=precision)

    @classmethod
    def random(cls, config_name: str, settings: GenerationSettings = GenerationSettings(), device: str = "cpu",
               precision: str | None = None) -> "DiffusersGenerator":
        """A seeded random pipeline at a config's sizes (``sd15-random``, ``tiny-sd``): no download."""
        pipe, cfg = build_tiny_pipeline(config_name)
        return cls(pipe, tiny_model_name(config_name), settings.resolved(cfg["defaults"]), device,
                   weights=tiny_weights(), precision=precision)

    @classmethod
    def from_pretrained(
        cls, model: str, settings: GenerationSettings = GenerationSettings(), device: str = "cpu", *,
        revision: str | None = None, name: str | None = None, weights: str | None = None, precision: str | None = None,
    ) -> "DiffusersGenerator":
        """Load a hub id (at ``revision``) or a local diffusers folder; fails fast with a fix when it cannot."""
        from diffusers import DiffusionPipeline

        local = Path(model).expanduser()
        looks_local = model.startswith((".", "/", "~")) or local.exists()
        if looks_local and not (local / "model_index.json").exists():
            raise ModelLoadError(
                f"--t2i-model {model!r}: no diffusers pipeline at {local} (model_index.json not found). "
                "Point it at a folder saved with pipeline.save_pretrained(), or at a hub id such as "
                "runwayml/stable-diffusion-v1-5."
            )
        from t2i_fairness.base.hub import how_to_fix, offline_unless_reachable

        extra = {} if looks_local or revision is None else {"revision": revision}
        try:
            with offline_unless_reachable():
                pipe = DiffusionPipeline.from_pretrained(str(local) if looks_local else model,
                                                         torch_dtype=_torch_dtype(device, precision), **extra)
        except Exception as exc:  # the hub client raises many types; all mean "cannot load"
            raise ModelLoadError(
                f"--t2i-model {model!r} could not be loaded ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:300]}). Check the id or path; " + how_to_fix(model)
            ) from exc
        if hasattr(pipe, "set_progress_bar_config"):
            pipe.set_progress_bar_config(disable=True)
        return cls(pipe, name or model, settings.resolved(PAPER_DEFAULTS), device,
                   weights=weights if weights is not None else revision, precision=precision)

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]:
        import torch

        if len(prompts) != len(seeds):
            raise ValueError(f"generate() got {len(prompts)} prompts but {len(seeds)} seeds")
        gen_device = "cpu" if self.device == "mps" else self.device
        generators = [torch.Generator(device=gen_device).manual_seed(int(s)) for s in seeds]
        s = self.settings
        previous = torch.get_num_threads()
        if self.num_threads and self.device == "cpu":
            torch.set_num_threads(self.num_threads)
        try:
            return self._call(list(prompts), generators)
        finally:
            torch.set_num_threads(previous)

    def _call(self, prompts: list[str], generators) -> list[Image.Image]:
        import torch

        s = self.settings
        with torch.inference_mode():
            out = self.pipe(
                prompts,
                generator=generators,
                num_inference_steps=s.steps,
                guidance_scale=s.guidance,
                height=s.height,
                width=s.width,
                output_type="pil",
            )
        return list(out.images)

    # -- tokens (counting never changes an image; see TokenCounter below) ------------------------
    def token_counter(self) -> "TokenCounter | None":
        """The pipeline's own tokenizers and their limits (``None`` when it has none)."""
        if not hasattr(self, "_tokens"):
            self._tokens = TokenCounter.of_pipeline(self.pipe)
        return self._tokens

    def count_tokens(self, prompts: Sequence[str]) -> dict[str, list[int]]:
        """attribute -> full token count of each prompt with the pipeline's own tokenizers ({} without any)."""
        counter = self.token_counter()
        return counter.count(prompts) if counter is not None else {}


# ------------------------------------------------------------------------------------- tokens
# Kept apart from the fingerprint and generation code above: counting tokens never changes an image.

TOKENIZER_ATTRIBUTES = ("tokenizer", "tokenizer_2", "tokenizer_3")
T5_MAX_SEQUENCE_LENGTH = 256  # diffusers' SD3 default `max_sequence_length` for its T5 tokenizer_3


class TokenCounter:
    """The tokenizers a diffusers pipeline sends a prompt through, with the length each truncates at.

    Example:
        >>> from t2i_fairness.models.clip_tokenizer import offline_clip_tokenizer
        >>> TokenCounter({"tokenizer": (offline_clip_tokenizer(), 77)}).count(["a photo of a cat", " ".join(["बस"] * 60)])
        {'tokenizer': [7, 182]}
    """

    def __init__(self, tokenizers: dict):
        if not tokenizers:
            raise ValueError("TokenCounter needs at least one tokenizer")
        self.tokenizers = dict(tokenizers)

    @classmethod
    def of_pipeline(cls, pipe, max_sequence_length: int = T5_MAX_SEQUENCE_LENGTH) -> "TokenCounter | None":
        """The counter of a loaded pipeline's own tokenizers (``None`` when it has none)."""
        found = {}
        for attr in TOKENIZER_ATTRIBUTES:
            tok = getattr(pipe, attr, None)
            if tok is not None:
                found[attr] = (tok, max_sequence_length if attr == "tokenizer_3" else int(tok.model_max_length))
        return cls(found) if found else None

    @classmethod
    def from_pretrained(cls, model: str, max_sequence_length: int = T5_MAX_SEQUENCE_LENGTH) -> "TokenCounter":
        """The tokenizers of a hub id or local diffusers folder, without loading the pipeline's weights
        (ModelLoadError when they cannot be loaded).
        """
        from transformers import AutoTokenizer

        from t2i_fairness.base.hub import how_to_fix, offline_unless_reachable

        local = Path(model).expanduser()
        try:
            with offline_unless_reachable():
                if (local / "model_index.json").exists():
                    index = json.loads((local / "model_index.json").read_text())
                    source = str(local)
                else:
                    from huggingface_hub import hf_hub_download

                    index = json.loads(Path(hf_hub_download(model, "model_index.json")).read_text())
                    source = model
                found = {}
                for attr in TOKENIZER_ATTRIBUTES:
                    spec = index.get(attr)
                    if isinstance(spec, list) and spec and spec[0] is not None:
                        tok = AutoTokenizer.from_pretrained(source, subfolder=attr)
                        found[attr] = (tok, max_sequence_length if attr == "tokenizer_3" else int(tok.model_max_length))
        except Exception as exc:  # the hub client raises many types; all mean "cannot load"
            raise ModelLoadError(f"the tokenizers of {model!r} could not be loaded ({type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); " + how_to_fix(model)) from exc
        if not found:
            raise ModelLoadError(f"{model!r}: model_index.json names no tokenizer")
        return cls(found)

    @property
    def limits(self) -> dict[str, int]:
        return {name: limit for name, (_, limit) in self.tokenizers.items()}

    def names(self) -> dict[str, str]:
        """attribute -> ``tokenizer (CLIPTokenizer, 77)``, as reports name it."""
        return {name: f"{name} ({type(tok).__name__}, {limit})" for name, (tok, limit) in self.tokenizers.items()}

    def count(self, prompts: Sequence[str]) -> dict[str, list[int]]:
        """attribute -> full token count of each prompt, special tokens included (nothing truncated)."""
        out = {}
        for name, (tok, _) in self.tokenizers.items():
            ids = tok(list(prompts), truncation=False, add_special_tokens=True, verbose=False)["input_ids"]
            out[name] = [len(x) for x in ids]
        return out

    def specials(self, name: str) -> int:
        """Special tokens the tokenizer adds to every prompt (2 for CLIP's BOS/EOS, 1 for T5's EOS)."""
        tok, _ = self.tokenizers[name]
        return len(tok("", add_special_tokens=True)["input_ids"])

    def report(self, prompts: Sequence[str]) -> dict:
        """attribute -> :class:`~t2i_fairness.metrics.truncation.Truncation` of ``prompts``."""
        from t2i_fairness.metrics.truncation import truncation_report

        names = self.names()
        return {name: truncation_report(counts, self.limits[name], list(prompts), specials=self.specials(name),
                                        encoder=names[name])
                for name, counts in self.count(prompts).items()}

