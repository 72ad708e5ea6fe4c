"""CLIP image and text embeddings through open_clip (DIG In's CLIPScore, CIS, group classifiers).

Profiles: ``paper`` (OpenAI CLIP ViT-B/32, as the papers used), ``tiny`` (a small seeded random
open_clip ``CLIP``) and ``paper-random`` (ViT-B/32 with seeded random weights). The fingerprint
names the weights (a checkpoint's digest or hub snapshot, or for random weights the config, seed
and library versions), the precision and the device class.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

from t2i_fairness import MODEL_CONFIGS
from t2i_fairness.models.configs import load_model_config
from t2i_fairness.models.base import check_profile
from t2i_fairness.base import identity

_OPEN_CLIP_CONFIGS = MODEL_CONFIGS / "open_clip"


class ClipModel:
    """Both CLIP towers behind ``encode_images`` / ``encode_texts`` (unit-normalised float32 rows)."""

    def __init__(self, model, preprocess, tokenizer, fingerprint: str, device: str = "cpu", context_length: int = 77):
        self.model = model.eval().to(device)
        self.preprocess = preprocess
        self.tokenizer = tokenizer
        self.fingerprint = fingerprint
        self.device = device
        self.context_length = context_length

    @classmethod
    def from_profile(cls, profile: str = "tiny", device: str = "cpu", precision: str | None = None) -> "ClipModel":
        """Build the profile's CLIP.

        Args:
            precision: ``auto`` (``None``; float16 on CUDA, float32 elsewhere), ``float32``, ``float16``
                or ``bfloat16``; half precision is open_clip's own mixed ``fp16``/``bf16``.

        Raises:
            ValueError: unknown profile or precision.
            ModelLoadError: paper weights are not on disk and cannot be downloaded.
        """
        import open_clip
        import torch

        from t2i_fairness.errors import ModelLoadError
        from t2i_fairness.models.precision import SHORT, resolve
        from t2i_fairness.base.hub import offline_unless_reachable

        cfg = load_model_config(f"clip-{check_profile(profile)}")
        open_clip.add_model_config(_OPEN_CLIP_CONFIGS)
        name, pretrained = cfg["model"], cfg.get("pretrained")
        short = SHORT[resolve("clip", device, precision)]
        if pretrained is None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(cfg.get("seed", 0))
                model, _, preprocess = open_clip.create_model_and_transforms(name, pretrained=None, precision=short)
            arch = open_clip.get_model_config(name)  # ours (model_configs/open_clip) or open_clip's own (ViT-B-32)
            digest = hashlib.sha256(json.dumps([arch, cfg.get("seed", 0)], sort_keys=True).encode()).hexdigest()[:12]
            fingerprint = f"open_clip:{name}:random-{digest}@{identity.init_identity('torch', 'open_clip_torch')}:{short}"
        else:
            try:
                with offline_unless_reachable():
                    model, _, preprocess = open_clip.create_model_and_transforms(
                        name, pretrained=pretrained, device=device, precision=short
                    )
            except Exception as exc:
                raise ModelLoadError(
                    f"CLIP {name} (pretrained={pretrained!r}) for --t2i-scorers paper could not be loaded "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}). Download it once on a connected "
                    f"machine (python -c \"import open_clip; open_clip.create_model_and_transforms('{name}', "
                    f"pretrained='{pretrained}')\") and point HF_HOME at that cache, or set the config's "
                    "pretrained to a local checkpoint file."
                ) from exc
            weights = _checkpoint_identity(open_clip, name, pretrained)
            fingerprint = f"open_clip:{name}:{Path(pretrained).name if os.path.isfile(pretrained) else pretrained}@{weights}:{short}"
        fingerprint += f":{identity.device_class(device)}"
        tokenizer = open_clip.get_tokenizer(name)
        return cls(model, preprocess, tokenizer, fingerprint, device)

    def encode_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        import torch

        from t2i_fairness.models.precision import to_weights, weights_dtype

        # The image tower's weights, not the model's first parameter: open_clip's fp16 keeps a few
        # embeddings in float32, and casting to one of those crashed on CUDA (FloatTensor input, HalfTensor weight).
        batch = to_weights(torch.stack([self.preprocess(im.convert("RGB")) for im in images]),
                           weights_dtype(self.model.visual), self.device)
        with torch.inference_mode():
            feats = self.model.encode_image(batch)
        feats = feats.float()
        return (feats / feats.norm(dim=-1, keepdim=True)).cpu().numpy().astype(np.float32)

    def count_tokens(self, text: str) -> int:
        """Tokens including start and end markers (CLIP's limit is 77)."""
        tok = self.tokenizer
        if getattr(tok, "reduction_fn", None) is None and all(hasattr(tok, a) for a in ("encode", "sot_token_id", "eot_token_id")):
            # open_clip's SimpleTokenizer: the ids its __call__ writes into a 10 000-wide tensor, without the
            # tensor (CIS draws tens of thousands of prompts to fit; id 0 is not counted, as there)
            return sum(1 for i in (tok.sot_token_id, *tok.encode(text), tok.eot_token_id) if i != 0)
        ids = self.tokenizer([text], context_length=10_000)[0] if _accepts_context(self.tokenizer) else None
        if ids is None:
            from t2i_fairness.models.clip_tokenizer import offline_clip_tokenizer

            return len(offline_clip_tokenizer()(text)["input_ids"])
        return int((ids != 0).sum())

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        too_long = [t for t in texts if self.count_tokens(t) > self.context_length]
        if too_long:
            raise ValueError(
                f"{len(too_long)} text(s) exceed CLIP's {self.context_length} tokens, e.g. {too_long[0]!r}; "
                "shorten the prompt (CLIP would silently truncate it)"
            )
        from t2i_fairness.models.precision import to_weights

        tokens = to_weights(self.tokenizer(list(texts)), None, self.device)  # token ids: moved, never cast
        with torch.inference_mode():
            feats = self.model.encode_text(tokens)
        feats = feats.float()
        return (feats / feats.norm(dim=-1, keepdim=True)).cpu().numpy().astype(np.float32)


def _checkpoint_identity(open_clip, name: str, pretrained: str) -> str:
    """The identity of the checkpoint open_clip loaded for ``pretrained``: a local file's digest, or the
    hub snapshot (or digest) of the file a pretrained tag resolves to.
    """
    from t2i_fairness.errors import ModelLoadError
    from t2i_fairness.base.hub import offline_unless_reachable

    if os.path.isfile(pretrained):
        return identity.weights_digest(pretrained)
    try:
        with offline_unless_reachable():
            path = open_clip.pretrained.download_pretrained(open_clip.get_pretrained_cfg(name, pretrained))
    except Exception as exc:
        raise ModelLoadError(f"CLIP {name} (pretrained={pretrained!r}): its checkpoint file cannot be found to identify "
                             f"its weights ({type(exc).__name__}: {exc})") from exc
    if not path or not os.path.isfile(path):
        raise ModelLoadError(f"CLIP {name} (pretrained={pretrained!r}): open_clip names no checkpoint file ({path!r}) "
                             "to identify its weights; set the config's pretrained to a local file")
    return identity.file_identity(path)


def _accepts_context(tokenizer) -> bool:
    import inspect

    try:
        return "context_length" in inspect.signature(tokenizer.__call__).parameters
    except (TypeError, ValueError):
        return False

