"""Decomposed ViT features: the CLS token of a ViT-B/16 computed from object or background patches only.

Decomposed-DIG (Sureddy et al., Sec. 3.2): Obj-only features exclude the background patches,
BG-only the object patches, Full-image none; the feature is the last layer's CLS token after the
final norm. Patches are excluded by a ``-inf`` attention mask on their keys, equal to deleting
them as the released code does, and preprocessing follows ``get_features_patch_vit.py``
(docs/fidelity.md). Images left without patches get a NaN row (``valid_rows``). Profiles in
``model_configs/vit-<profile>.json``: ``paper`` (``vit_base_patch16_224.augreg_in21k_ft_in1k``,
offline unless ``allow_download=True``; ``tag="orig_in21k_ft_in1k"`` for the released code's
weights) and ``tiny`` (a small seeded random ViT at 64 px).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np
from PIL import Image

from t2i_fairness.base.identity import device_class, file_identity, init_identity
from t2i_fairness.models.base import PROFILES, check_profile
from t2i_fairness.models.configs import profile_configs
from t2i_fairness.models.inception import (
    preprocess_batch,
    check_images,
    check_options,
    config_hash,
    file_digest,
    seeded_init,
    torch_dtype,
    weights_unavailable,
)
from t2i_fairness.models.precision import resolve as resolve_precision, to_weights
from t2i_fairness.models.segmenter import check_mask, patch_membership, resize_mask_like_image

MODES = ("full", "obj", "bg")

VIT_CONFIGS: dict[str, dict[str, Any]] = profile_configs("vit", PROFILES)  # model_configs/vit-<profile>.json

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def _create_timm(config: Mapping[str, Any], **kwargs: Any) -> Any:
    import timm

    return timm.create_model(config["architecture"], img_size=config["img_size"],
                             patch_size=config["patch_size"], **dict(config["arch_overrides"]), **kwargs)


def build_vit(config: Mapping[str, Any], *, weights: str | None = None, allow_download: bool = False,
              cache_dir: str | None = None) -> tuple[Any, str]:
    """The timm ViT of ``config``: pretrained (paper) or seeded random (``tag`` None); returns
    (model, weights id). Also used by the tests to build the paper architecture with random weights."""
    if config.get("tag") is None:
        with seeded_init(int(config.get("seed", 0))):
            model = _create_timm(config, pretrained=False)
        return model, f"random:seed{config.get('seed', 0)}@{init_identity('torch', 'timm')}"

    from timm.models import get_pretrained_cfg

    name = f"{config['architecture']}.{config['tag']}"
    try:
        pretrained_cfg = get_pretrained_cfg(name, allow_unregistered=False)
    except RuntimeError:  # timm: "Invalid pretrained tag" / no pretrained cfgs
        pretrained_cfg = None
    if pretrained_cfg is None:
        import timm

        raise ValueError(f"unknown timm weights {name!r}; choose from {timm.list_pretrained(config['architecture'] + '.*')}")
    hub_id = pretrained_cfg.hf_hub_id or name
    if weights is not None:
        if not os.path.isfile(weights):
            raise FileNotFoundError(f"ViT weights file {weights!r} (option weights=) does not exist")
        overlay, weights_id = {"file": weights}, f"file:{os.path.basename(weights)}:sha256-{file_digest(weights)}"
    else:
        cached = None
        if pretrained_cfg.hf_hub_id:
            from huggingface_hub import try_to_load_from_cache

            for filename in _WEIGHT_FILES:
                found = try_to_load_from_cache(pretrained_cfg.hf_hub_id, filename, cache_dir=cache_dir)
                if isinstance(found, str):
                    cached = found
                    break
        if cached is None and not allow_download:
            raise weights_unavailable(
                "ViT", hub_id,
                where=f"none of {list(_WEIGHT_FILES)} is in the Hugging Face cache "
                      f"{cache_dir or '(HF_HOME)'} and allow_download=False",
                how=(f"on a connected machine run `hf download {hub_id}` (or timm.create_model('{name}', "
                     f"pretrained=True)) and copy the cache here, point HF_HOME (or cache_dir=) at a cache that "
                     f"holds it, or pass weights='/path/to/model.safetensors'."),
            )
        overlay = {"file": cached} if cached else None
        weights_id = f"timm:{name}"
    try:
        model = _create_timm(config, pretrained=True, pretrained_cfg_overlay=overlay)
    except Exception as err:  # network errors, corrupt files, mismatched checkpoints
        raise weights_unavailable("ViT", hub_id, where="timm could not load the pretrained weights",
                                  how="check the file, or download it again on a connected machine.",
                                  cause=err) from err
    if weights is None:
        if cached is None and pretrained_cfg.hf_hub_id:  # just downloaded: find the file it loaded
            from huggingface_hub import try_to_load_from_cache

            for filename in _WEIGHT_FILES:
                found = try_to_load_from_cache(pretrained_cfg.hf_hub_id, filename, cache_dir=cache_dir)
                if isinstance(found, str):
                    cached = found
                    break
        # the hub snapshot the file came from, or its digest (a timm URL download, a copied file)
        weights_id += f"@{file_identity(cached)}" if cached else "@unidentified"
    return model, weights_id


class MaskedViTFeatures:
    """CLS features of a ViT computed from all, object-only or background-only patches.

    ``fingerprint`` names architecture, weights, preprocessing (with the mask rule), dtype and profile.

    Example:
        >>> from PIL import Image
        >>> image, mask = Image.new("RGB", (80, 64), "gray"), np.zeros((64, 80), bool)
        >>> mask[:32, :40] = True
        >>> MaskedViTFeatures.from_profile("tiny").encode([image], [mask], mode="obj").shape
        (1, 64)
    """

    OPTIONS = ("weights", "allow_download", "cache_dir", "tag", "dtype", "seed", "batch_size")

    def __init__(self, model: Any, *, config: Mapping[str, Any], profile: str, weights_id: str,
                 device: str = "cpu", batch_size: int = 32) -> None:
        self.config = dict(config)
        self.profile = profile
        self.device = device
        self.batch_size = int(batch_size)
        self._dtype = torch_dtype(config["dtype"])
        self.model = model.eval().to(device=device, dtype=self._dtype)
        self.img_size = int(config["img_size"])
        self.patch_size = int(config["patch_size"])
        grid = tuple(self.model.patch_embed.grid_size)
        if grid[0] != grid[1] or grid[0] * self.patch_size != self.img_size:
            raise ValueError(f"expected a square grid of {self.patch_size}-px patches covering {self.img_size} px, "
                             f"got grid {grid}")
        self.grid = grid[0]
        self.num_prefix_tokens = int(getattr(self.model, "num_prefix_tokens", 1))
        if getattr(self.model, "cls_token", None) is None:
            raise ValueError("MaskedViTFeatures needs a ViT with a CLS token")
        self.dim = int(self.model.embed_dim)
        preprocessing = (f"centercrop-long-edge,resize{self.img_size}-bilinear,mean{tuple(config['mean'])},"
                         f"std{tuple(config['std'])};mask:same-crop,nearest,any-pixel-per-{self.patch_size}px-patch")
        self.fingerprint = (f"MaskedViTFeatures:{profile}:{config['architecture']}:{weights_id}:{preprocessing}:"
                            f"{config['dtype']}:{device_class(device)}:{config_hash(self.config)}")

    @classmethod
    def from_profile(cls, profile: str, device: str = "cpu", precision: str | None = None,
                     **options: Any) -> "MaskedViTFeatures":
        """Build the ``tiny`` or ``paper`` ViT.

        Args:
            precision: ``auto`` (``None``), ``float32``, ``float16`` or ``bfloat16``; the option ``dtype`` wins.
            **options: paper: ``weights`` (local file), ``allow_download``, ``cache_dir``, ``tag``;
                tiny: ``seed``; both: ``batch_size`` and ``dtype``.

        Raises:
            ValueError: unknown profile, option or tag.
            ModelLoadError: paper weights not available offline (naming the hub id).
        """
        check_profile(profile)
        check_options(options, cls.OPTIONS, f"MaskedViTFeatures ({profile})")
        config = dict(VIT_CONFIGS[profile])
        config["dtype"] = resolve_precision("vit", device, precision)
        for key in ("dtype", "seed", "tag"):
            if key in options:
                config[key] = options[key]
        torch_dtype(config["dtype"])
        paper_only, tiny_only = ("weights", "allow_download", "cache_dir", "tag"), ("seed",)
        wrong = [k for k in (tiny_only if profile == "paper" else paper_only) if k in options]
        if wrong:
            raise ValueError(f"option(s) {wrong} do not apply to profile={profile!r}")
        model, weights_id = build_vit(config, weights=options.get("weights"),
                                      allow_download=bool(options.get("allow_download", False)),
                                      cache_dir=options.get("cache_dir"))
        return cls(model, config=config, profile=profile, weights_id=weights_id, device=device,
                   batch_size=options.get("batch_size", 32))

    # -- preprocessing --------------------------------------------------------------------------

    def preprocess(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Network input: float32 (n, 3, img_size, img_size)."""
        return preprocess_batch(images, self.img_size, self.config["mean"], self.config["std"])

    def object_patches(self, mask: np.ndarray) -> np.ndarray:
        """bool (grid * grid,) in token order: patches holding at least one object pixel of ``mask``
        (a mask of the original image, put through the image's crop and a nearest resize)."""
        resized = resize_mask_like_image(mask, self.img_size)
        return patch_membership(resized, self.patch_size, self.grid).ravel()

    def included_patches(self, images: Sequence[Image.Image], masks: Sequence[np.ndarray] | None,
                         mode: str) -> np.ndarray:
        """bool (n, grid * grid): the patch tokens each image's CLS may attend to in ``mode``."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose from {list(MODES)}")
        images = check_images(images)
        n_patches = self.grid * self.grid
        if mode == "full":
            return np.ones((len(images), n_patches), bool)
        if masks is None:
            raise ValueError(f"mode={mode!r} needs one mask per image; got masks=None")
        masks = list(masks)
        if len(masks) != len(images):
            raise ValueError(f"got {len(images)} images but {len(masks)} masks; expected one mask per image")
        rows = []
        for i, (image, mask) in enumerate(zip(images, masks)):
            obj = self.object_patches(check_mask(mask, image, argument=f"masks[{i}]"))
            rows.append(obj if mode == "obj" else ~obj)
        return np.stack(rows) if rows else np.zeros((0, n_patches), bool)

    # -- features --------------------------------------------------------------------------------

    def encode(self, images: Sequence[Image.Image], masks: Sequence[np.ndarray] | None = None,
               mode: str = "full") -> np.ndarray:
        """CLS features, float32 (n, dim); rows with no included patch are NaN.

        Args:
            masks: one bool (height, width) object mask per image (ignored for ``mode="full"``).
            mode: "full", "obj" (object patches only) or "bg" (background patches only).

        Raises:
            ValueError: unknown mode, missing masks, or a mask whose shape is not its image's.
        """
        keep = self.included_patches(images, masks, mode)
        return self.encode_patches(self.preprocess(images), keep)

    def encode_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Full-image CLS features (the ``ImageEncoder`` protocol): float32 (n, dim)."""
        return self.encode(images, None, "full")

    def encode_patches(self, pixels: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """CLS features of preprocessed ``pixels`` (n, 3, S, S) attending only to ``keep`` (n, grid*grid)
        patch tokens (plus the prefix tokens). Rows whose ``keep`` is all False are NaN."""
        import torch

        keep = np.asarray(keep, bool)
        if keep.shape != (len(pixels), self.grid * self.grid):
            raise ValueError(f"keep must have shape {(len(pixels), self.grid * self.grid)}, got {keep.shape}")
        out = [np.zeros((0, self.dim), np.float32)]
        for start in range(0, len(pixels), self.batch_size):
            x = to_weights(torch.from_numpy(pixels[start:start + self.batch_size]), self._dtype, self.device)
            k = torch.from_numpy(keep[start:start + self.batch_size]).to(self.device)
            attn_mask = None
            if not bool(k.all()):
                prefix = torch.ones(k.shape[0], self.num_prefix_tokens, dtype=torch.bool, device=self.device)
                keys = torch.cat([prefix, k], dim=1)  # (b, tokens)
                attn_mask = torch.zeros(keys.shape, dtype=self._dtype, device=self.device)
                attn_mask = attn_mask.masked_fill(~keys, float("-inf"))[:, None, None, :]  # (b, 1, 1, tokens)
            with torch.inference_mode():
                tokens = self.model.forward_features(x, attn_mask=attn_mask)
            cls = tokens[:, 0].float().cpu().numpy()
            cls[~keep[start:start + self.batch_size].any(axis=1)] = np.nan
            out.append(cls)
        return np.concatenate(out).astype(np.float32, copy=False)

    @staticmethod
    def valid_rows(features: np.ndarray) -> np.ndarray:
        """bool (n,): rows that are real features (not the NaN of "no patch in this mode")."""
        return ~np.isnan(np.asarray(features)).any(axis=1)

    def __repr__(self) -> str:
        return f"MaskedViTFeatures(profile={self.profile!r}, img_size={self.img_size}, device={self.device!r})"
