"""BLIP-2: the captioner c and the image feature extractor f of IndicTTI (Appendix 0.B).

IndicTTI captions images with ``Salesforce/blip2-opt-2.7b`` (greedy decoding here: one fixed,
cheap, reproducible caption per image; LAVIS defaults to 5 beams) and uses "the image encoder of
the BLIP-2 model" as f: by default the vision encoder's pooled [CLS] output (1408-d), which does
not depend on the language model; ``pooling="qformer"`` gives the mean of the 32 Q-Former outputs.
Profiles: ``paper`` (the hub checkpoint) and ``tiny`` (a ~1 M parameter seeded random model on
the bundled bert-base-uncased vocabulary, so captions are real words). Load the model once:
``Blip2ImageFeatures.from_captioner(captioner)``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from t2i_fairness.models.base import PROFILES, check_profile
from t2i_fairness.models.configs import profile_configs
from t2i_fairness.models.sentence import (
    _check_options,
    _config_hash,
    _dtype_kwargs,
    _load_pretrained,
    _resolve_source,
    _with_commit,
)

BLIP2_CONFIGS: dict[str, dict[str, Any]] = profile_configs("captioner", PROFILES)  # model_configs/captioner-<profile>.json
POOLINGS = ("vision", "qformer")


class _Blip2:
    """The loaded model, processor and their identity; shared by the captioner and the features."""

    def __init__(self, model: Any, processor: Any, *, weights_id: str, device: str, dtype: Any,
                 max_new_tokens: int, batch_size: int) -> None:
        self.model = model
        self.processor = processor
        self.weights_id = weights_id
        self.device = device
        self.dtype = dtype
        self.max_new_tokens = int(max_new_tokens)
        self.batch_size = int(batch_size)

    OPTIONS = ("weights", "max_new_tokens", "batch_size")

    @classmethod
    def load(cls, profile: str, device: str, options: dict[str, Any], owner: str,
             precision: str | None = None) -> "_Blip2":
        check_profile(profile)
        _check_options(options, cls.OPTIONS, owner)
        cfg = BLIP2_CONFIGS[profile]

        import torch
        from transformers import Blip2ForConditionalGeneration, Blip2Processor

        from t2i_fairness.models.precision import resolve, torch_dtype

        dtype = torch_dtype(resolve("captioner", device, precision))
        if "source" in cfg:
            source, weights_id = _resolve_source(options.get("weights", cfg["source"]))
            processor = _load_pretrained(Blip2Processor.from_pretrained, source, "BLIP-2 processor")
            model = _load_pretrained(Blip2ForConditionalGeneration.from_pretrained, source, "BLIP-2 model",
                                     **_dtype_kwargs(dtype))
            weights_id = _with_commit(weights_id, model)
        else:
            if "weights" in options:
                raise ValueError(f"option 'weights' only applies to profile 'paper', not {profile!r}")
            processor, model, weights_id = _build_tiny(cfg)
        model.to(device=device, dtype=dtype).eval()
        from t2i_fairness.base.identity import device_class

        return cls(model, processor, weights_id=f"{profile}/{weights_id}/{str(dtype).replace('torch.', '')}/{device_class(device)}",
                   device=device, dtype=dtype,
                   max_new_tokens=options.get("max_new_tokens", cfg["max_new_tokens"]),
                   batch_size=options.get("batch_size", 8))

    def pixels(self, images: list[Any]) -> Any:
        from t2i_fairness.models.precision import to_weights

        batch = self.processor(images=[im.convert("RGB") for im in images], return_tensors="pt")
        return to_weights(batch["pixel_values"], self.dtype, self.device)


def _image_list(images: Sequence[Any]) -> list[Any]:
    from PIL import Image

    if isinstance(images, Image.Image):
        raise TypeError("images must be a sequence of PIL images, got a single image; wrap it in a list")
    images = list(images)
    bad = sorted({type(im).__name__ for im in images if not isinstance(im, Image.Image)})
    if bad:
        raise TypeError(f"images must all be PIL.Image.Image, got {bad}")
    return images


def _build_tiny(cfg: dict[str, Any]) -> tuple[Any, Any, str]:
    """Small random BLIP-2 with the real WordPiece vocabulary; weights seeded inside fork_rng so
    building it neither depends on nor disturbs the caller's global RNG."""
    import torch
    from transformers import (AutoTokenizer, Blip2Config, Blip2ForConditionalGeneration, Blip2Processor,
                              BlipImageProcessor)

    tok_path, tok_id = _resolve_source(cfg["tokenizer"])
    tokenizer = AutoTokenizer.from_pretrained(tok_path)
    size = cfg["image_size"]
    # OpenAI-CLIP mean/std and bicubic resize are BlipImageProcessor's defaults, as for the real model.
    image_processor = BlipImageProcessor(size={"height": size, "width": size})
    processor = Blip2Processor(image_processor=image_processor, tokenizer=tokenizer,
                               num_query_tokens=cfg["num_query_tokens"])  # adds "<image>" to the tokenizer
    image_token_id = tokenizer.convert_tokens_to_ids("<image>")
    width, layers, heads, ffn = cfg["hidden_size"], cfg["layers"], cfg["heads"], cfg["intermediate_size"]
    # one width for all three towers (tiny), or each tower's own (paper-random's *_config overrides)
    config = Blip2Config(
        vision_config={**dict(hidden_size=width, intermediate_size=ffn, num_hidden_layers=layers,
                              num_attention_heads=heads, image_size=size, patch_size=cfg["patch_size"],
                              initializer_range=cfg["vision_initializer_range"]), **cfg.get("vision_config", {})},
        qformer_config={**dict(vocab_size=tokenizer.vocab_size, hidden_size=width, num_hidden_layers=layers,
                               num_attention_heads=heads, intermediate_size=ffn, encoder_hidden_size=width),
                        **cfg.get("qformer_config", {})},
        text_config={**dict(model_type="opt", vocab_size=len(tokenizer), hidden_size=width,
                            word_embed_proj_dim=width, num_hidden_layers=layers, num_attention_heads=heads,
                            ffn_dim=ffn, max_position_embeddings=cfg["max_position_embeddings"],
                            pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id,
                            eos_token_id=tokenizer.sep_token_id), **cfg.get("text_config", {})},
        num_query_tokens=cfg["num_query_tokens"],
        image_token_index=image_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg["seed"])
        model = Blip2ForConditionalGeneration(config)
    from t2i_fairness.base.identity import init_identity

    return processor, model, f"random-seed{cfg['seed']}-{_config_hash(cfg)}@{init_identity('torch', 'transformers')}/tokenizer:{tok_id}"


class Blip2Captioner:
    """Greedy BLIP-2 captions, one per image.

    Example:
        >>> from PIL import Image
        >>> captions = Blip2Captioner.from_profile("tiny").caption([Image.new("RGB", (40, 30), "red")])
        >>> len(captions), isinstance(captions[0], str)
        (1, True)
    """

    def __init__(self, blip2: _Blip2) -> None:
        self._blip2 = blip2
        self.max_new_tokens = blip2.max_new_tokens
        self.fingerprint = f"Blip2Captioner/{blip2.weights_id}/greedy-{self.max_new_tokens}"

    @classmethod
    def from_profile(cls, profile: str, device: str = "cpu", precision: str | None = None,
                     **options: Any) -> "Blip2Captioner":
        """Build the captioner of a profile (``tiny`` or ``paper``).

        Args:
            precision: ``auto`` (``None``; float16 on CUDA as the model card runs it), ``float32``,
                ``float16`` or ``bfloat16``.
            **options: ``weights`` (local directory or hub id; ``paper`` only), ``max_new_tokens``
                (30 for ``paper``, 8 for ``tiny``), ``batch_size`` (default 8).

        Raises:
            ValueError: unknown profile or option.
            ModelLoadError: ``paper`` weights are not available offline (saying how to get them).
        """
        return cls(_Blip2.load(profile, device, dict(options), "Blip2Captioner.from_profile", precision))

    def caption(self, images: Sequence[Any]) -> list[str]:
        """One caption per image, in order; greedy decoding (a TypeError unless PIL images)."""
        import torch

        b = self._blip2
        images = _image_list(images)
        out: list[str] = []
        for start in range(0, len(images), b.batch_size):
            pixel_values = b.pixels(images[start:start + b.batch_size])
            with torch.inference_mode():
                ids = b.model.generate(pixel_values=pixel_values, max_new_tokens=self.max_new_tokens,
                                       do_sample=False, num_beams=1)
            # Depending on the transformers version the output may start with the prompt
            # (<image> tokens + BOS); they are special tokens, so skipping specials drops them.
            out += [t.strip() for t in b.processor.batch_decode(ids, skip_special_tokens=True)]
        return out

    def image_features(self, pooling: str = "vision") -> "Blip2ImageFeatures":
        """The image feature extractor f sharing this captioner's weights (no second load)."""
        return Blip2ImageFeatures(self._blip2, pooling=pooling)

    def __repr__(self) -> str:
        return f"Blip2Captioner({self.fingerprint!r})"


class Blip2ImageFeatures:
    """IndicTTI's image feature extractor f: BLIP-2 image-encoder features, float32 (n, dim), not normalised.

    Example:
        >>> from PIL import Image
        >>> f = Blip2ImageFeatures.from_profile("tiny")
        >>> f.encode_images([Image.new("RGB", (40, 30), "red")]).shape
        (1, 32)
    """

    def __init__(self, blip2: _Blip2, pooling: str = "vision") -> None:
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; choose from {list(POOLINGS)}")
        self._blip2 = blip2
        self.pooling = pooling
        config = blip2.model.config
        self.dim = int(config.vision_config.hidden_size if pooling == "vision" else config.qformer_config.hidden_size)
        self.fingerprint = f"Blip2ImageFeatures/{blip2.weights_id}/{pooling}"

    @classmethod
    def from_profile(cls, profile: str, device: str = "cpu", precision: str | None = None,
                     **options: Any) -> "Blip2ImageFeatures":
        """Build f for a profile; ``precision`` and options as ``Blip2Captioner.from_profile``, plus ``pooling``."""
        options = dict(options)
        pooling = options.pop("pooling", "vision")
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; choose from {list(POOLINGS)}")
        return cls(_Blip2.load(profile, device, options, "Blip2ImageFeatures.from_profile", precision), pooling=pooling)

    @classmethod
    def from_captioner(cls, captioner: Blip2Captioner, pooling: str = "vision") -> "Blip2ImageFeatures":
        return captioner.image_features(pooling)

    def encode_images(self, images: Sequence[Any]) -> np.ndarray:
        """Float32 array (len(images), dim) (a TypeError unless PIL images)."""
        import torch

        b = self._blip2
        images = _image_list(images)
        if not images:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = []
        for start in range(0, len(images), b.batch_size):
            pixel_values = b.pixels(images[start:start + b.batch_size])
            with torch.inference_mode():
                vision = b.model.vision_model(pixel_values=pixel_values, return_dict=True)
                if self.pooling == "vision":
                    feats = vision.pooler_output
                else:
                    embeds = vision.last_hidden_state
                    queries = b.model.query_tokens.expand(embeds.shape[0], -1, -1)
                    mask = torch.ones(embeds.shape[:-1], dtype=torch.long, device=embeds.device)
                    feats = b.model.qformer(query_embeds=queries, encoder_hidden_states=embeds,
                                            encoder_attention_mask=mask, return_dict=True).last_hidden_state.mean(1)
            out.append(feats.float().cpu().numpy())
        return np.concatenate(out).astype(np.float32, copy=False)

    def __repr__(self) -> str:
        return f"Blip2ImageFeatures({self.fingerprint!r})"
