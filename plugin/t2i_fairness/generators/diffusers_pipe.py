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


def _torch_dtype(device: str):
    import torch

    return torch.float16 if device.startswith("cuda") else torch.float32


def diffusers_fingerprint(name: str, settings: GenerationSettings, device: str, weights: str | None = None) -> str:
    """Identifies model, weights, settings, precision and device class without loading anything
    (cache keys need it first).

    Args:
        name: what the model is called (a hub id, a folder's name, the tiny config's name).
        settings: the resolved generation settings (the batch size excepted, they decide the pixels).
        device: where it runs; its class (``cpu``, ``cuda``, ``mps``) picks the kernels, and CUDA runs
            in float16.
        weights: the weights' identity: a folder's ``sha256-...`` digest, a hub commit, the tiny
            model's ``init-...`` (see :mod:`t2i_fairness.spine.identity`).

    Example:
        >>> s = GenerationSettings(steps=2, guidance=7.0, height=64, width=64)
        >>> a = diffusers_fingerprint("ckpt", s, "cpu", "sha256-aaaa")
        >>> a.startswith("diffusers:ckpt@sha256-aaaa:"), a == diffusers_fingerprint("ckpt", s, "cpu", "sha256-bbbb")
        (True, False)
        >>> diffusers_fingerprint("ckpt", s, "cuda:0", "w") == diffusers_fingerprint("ckpt", s, "cuda:1", "w")
        True
    """
    from t2i_fairness.spine.identity import device_class

    precision = "float16" if device.startswith("cuda") else "float32"
    ident = {"model": name, "weights": weights, "settings": settings.key(), "precision": precision,
             "device": device_class(device)}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
    return f"diffusers:{name}{'@' + weights if weights else ''}:{digest}"


TINY_DEFAULTS_CONFIG = "tiny-sd"
TINY_LIBRARIES = ("torch", "diffusers", "transformers")  # they make the tiny model's random weights


def tiny_model_name(config_name: str = TINY_DEFAULTS_CONFIG) -> str:
    cfg = load_model_config(config_name)
    blob = json.dumps({k: v for k, v in cfg.items() if k != "_comment"}, sort_keys=True).encode()
    return "tiny-sd-" + hashlib.sha256(blob).hexdigest()[:8]


def tiny_weights() -> str:
    """The tiny model's weights identity: it has no files, its weights come from its config's seed
    through these libraries (:func:`t2i_fairness.spine.identity.init_identity`)."""
    from t2i_fairness.spine.identity import init_identity

    return init_identity(*TINY_LIBRARIES)


PAPER_DEFAULTS = {"steps": 50, "guidance": 7.0, "height": 512, "width": 512, "batch_size": 8}


def build_tiny_pipeline(config_name: str = "tiny-sd"):
    """A real ``StableDiffusionPipeline`` built offline from small configs with seeded random weights.

    The weights depend only on the config and its ``seed``, so every machine builds the same model.
    """
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    from t2i_fairness.models.clip_tokenizer import BOS_ID, EOS_ID, VOCAB_SIZE, offline_clip_tokenizer

    cfg = load_model_config(config_name)
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
    scheduler = DDIMScheduler(**cfg["scheduler"])
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
    """Wraps a diffusers text-to-image pipeline behind the ``Generator`` protocol.

    Each image gets its own seeded ``torch.Generator``, so an image depends on (prompt, seed,
    settings) and not on which other images share its batch (up to float rounding in batched
    kernels; the cache keys images one by one).
    """

    def __init__(self, pipe, name: str, settings: GenerationSettings, device: str = "cpu", num_threads: int | None = None,
                 weights: str | None = None):
        self.pipe = pipe.to(device)
        self.num_threads = num_threads  # CPU kernels round differently with the thread count
        self.name = name
        self.settings = settings
        self.device = device
        self.weights = weights
        self.fingerprint = diffusers_fingerprint(name, settings, device, weights)

    @classmethod
    def tiny(cls, settings: GenerationSettings = GenerationSettings(), device: str = "cpu") -> "DiffusersGenerator":
        pipe, cfg = build_tiny_pipeline()
        # Pinned threads make the smoke model's bytes the same on every machine, whatever its core count.
        return cls(pipe, tiny_model_name(), settings.resolved(cfg["defaults"]), device, num_threads=2, weights=tiny_weights())

    @classmethod
    def from_pretrained(
        cls, model: str, settings: GenerationSettings = GenerationSettings(), device: str = "cpu", *,
        revision: str | None = None, name: str | None = None, weights: str | None = None,
    ) -> "DiffusersGenerator":
        """Load a hub id or a local diffusers folder; fp16 on CUDA. Fails fast with a fix when it cannot.

        Args:
            model: a hub id or a folder saved with ``save_pretrained()``.
            settings: generation settings (unset ones take the paper defaults).
            device: torch device.
            revision: for a hub id, the commit to load (the one its fingerprint names).
            name, weights: the fingerprint's parts (default: ``model`` and ``revision``).

        Raises:
            ModelLoadError: no pipeline at a local path, or the weights cannot be loaded.
        """
        from diffusers import DiffusionPipeline

        local = Path(model).expanduser()
        looks_local = model.startswith((".", "/", "~")) or local.exists()
        if looks_local and not (local / "model_index.json").exists():
            raise ModelLoadError(
                f"--t2i-model {model!r}: no diffusers pipeline at {local} (model_index.json not found). "
                "Point it at a folder saved with pipeline.save_pretrained(), or at a hub id such as "
                "runwayml/stable-diffusion-v1-5."
            )
        from t2i_fairness.spine.hub import how_to_fix, offline_unless_reachable

        extra = {} if looks_local or revision is None else {"revision": revision}
        try:
            with offline_unless_reachable():
                pipe = DiffusionPipeline.from_pretrained(str(local) if looks_local else model,
                                                         torch_dtype=_torch_dtype(device), **extra)
        except Exception as exc:  # the hub client raises many types; all mean "cannot load"
            raise ModelLoadError(
                f"--t2i-model {model!r} could not be loaded ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:300]}). Check the id or path; " + how_to_fix(model)
            ) from exc
        if hasattr(pipe, "set_progress_bar_config"):
            pipe.set_progress_bar_config(disable=True)
        return cls(pipe, name or model, settings.resolved(PAPER_DEFAULTS), device,
                   weights=weights if weights is not None else revision)

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
