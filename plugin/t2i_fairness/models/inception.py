"""InceptionV3 pool features and class probabilities, computed the way DIG In's released code does.

The 2048-d average-pool features of torchvision's ImageNet InceptionV3 after a long-edge centre
crop, bilinear ``Resize(299)`` and ImageNet normalisation (docs/fidelity.md); one forward pass
also gives the logits of the Inception Score. Profiles in ``model_configs/inception-<profile>.json``:
``paper`` (``IMAGENET1K_V1``, from the torch hub cache or ``weights=``, downloading only with
``allow_download=True``) and ``tiny`` (seeded random weights at 75 px). Also the pieces the other
vision adapters share: the long-edge centre crop and the "weights are not available" error.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any, Mapping, Sequence

import numpy as np

from t2i_fairness.base.identity import device_class, init_identity
from t2i_fairness.errors import ModelLoadError
from PIL import Image

from t2i_fairness.models.base import PROFILES, check_profile
from t2i_fairness.models.configs import profile_configs
from t2i_fairness.models.precision import resolve as resolve_precision, to_weights

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# the profiles' settings: model_configs/inception-<profile>.json
INCEPTION_CONFIGS: dict[str, dict[str, Any]] = profile_configs("inception", PROFILES)

DTYPES = ("float32", "float16", "bfloat16")
MIN_INCEPTION_SIZE = 75  # below this torchvision's InceptionV3 runs out of spatial extent


# ----------------------------------------------------------------------------- shared helpers


def center_crop_box(width: int, height: int) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the centred square of side ``min(width, height)``, offsets rounded
    half to even as torchvision's ``center_crop`` does (a 5-px excess crops 2 then 3).
    """
    side = min(width, height)
    left = int(round((width - side) / 2.0))
    top = int(round((height - side) / 2.0))
    return left, top, left + side, top + side


def center_crop_long_edge(image: Image.Image) -> Image.Image:
    """Crop the long edge so the image becomes the centred square of its short side (DIG In)."""
    return image.crop(center_crop_box(*image.size))


def square_resize(image: Image.Image, size: int, resample: int = Image.BILINEAR) -> Image.Image:
    """Centre crop on the long edge then resize to ``size`` x ``size`` (bilinear for pixels)."""
    cropped = center_crop_long_edge(image)
    if cropped.size == (size, size):
        return cropped
    return cropped.resize((size, size), resample=resample)


def to_normalized_array(image: Image.Image, size: int, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """RGB, centre crop, resize, [0, 1], (x - mean) / std -> float32 (3, size, size)."""
    pixels = np.asarray(square_resize(image.convert("RGB"), size), dtype=np.float32) / 255.0
    pixels = (pixels - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return np.ascontiguousarray(pixels.transpose(2, 0, 1))


def preprocess_batch(images: Sequence[Image.Image], size: int, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """Centre-cropped, resized, normalised network input: float32 (n, 3, size, size)."""
    images = check_images(images)
    if not images:
        return np.zeros((0, 3, size, size), np.float32)
    return np.stack([to_normalized_array(im, size, mean, std) for im in images])


def check_images(images: Sequence[Image.Image], argument: str = "images") -> list[Image.Image]:
    """Validate a batch of PIL images at the public boundary (never ``assert`` on user input)."""
    if isinstance(images, Image.Image):
        raise TypeError(f"{argument} must be a sequence of PIL images, got a single image; wrap it in a list")
    images = list(images)
    for i, image in enumerate(images):
        if not isinstance(image, Image.Image):
            raise TypeError(f"{argument}[{i}] must be a PIL.Image.Image, got {type(image).__name__}")
    return images


def check_options(options: Mapping[str, Any], allowed: Sequence[str], owner: str) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for {owner}; valid options: {sorted(allowed)}")


def config_hash(config: Mapping[str, Any]) -> str:
    """Short stable hash of one of our config dicts (JSON, sorted keys)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]


def file_digest(path: str | os.PathLike) -> str:
    """First 12 hex digits of the file's SHA-256: local weight files enter fingerprints by content,
    so two different files with the same name never share cached features (~0.2 s per 100 MB, read
    once: :mod:`t2i_fairness.base.identity` remembers it until the file changes)."""
    from t2i_fairness.base.identity import file_digest as remembered_digest

    return remembered_digest(path)[:12]


def torch_dtype(name: str) -> Any:
    import torch

    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; choose from {list(DTYPES)}")
    return getattr(torch, name)


def weights_unavailable(what: str, model_id: str, *, where: str, how: str, cause: BaseException | None = None) -> ModelLoadError:
    """The one error every ``paper`` loader raises when its weights are not on this machine: the model,
    where we looked, and the ways out (copy the cache, pass a local path, use ``tiny``).
    """
    said = f" (loader said: {str(cause).splitlines()[0] if str(cause) else type(cause).__name__})" if cause else ""
    return ModelLoadError(
        f"cannot load the {what} {model_id!r}: its weights are not available offline ({where}). "
        f"Fix: {how} For offline tests use profile='tiny'.{said}"
    )


def seeded_init(seed: int):
    """Context manager: ``torch.manual_seed(seed)`` inside ``fork_rng`` (global RNG untouched)."""
    import torch

    class _Seeded:
        def __enter__(self) -> None:
            self._fork = torch.random.fork_rng(devices=[])
            self._fork.__enter__()
            torch.manual_seed(seed)

        def __exit__(self, *exc: Any) -> None:
            self._fork.__exit__(*exc)

    return _Seeded()


# ----------------------------------------------------------------------------- building the network


def _inception_weights_enum(tag: str) -> Any:
    from torchvision.models import Inception_V3_Weights

    valid = [w.name for w in Inception_V3_Weights]
    if tag not in valid:
        raise ValueError(f"unknown InceptionV3 weights {tag!r}; choose from {valid}")
    return Inception_V3_Weights[tag]


def _build_paper_inception(tag: str, weights: str | None, allow_download: bool) -> tuple[Any, str]:
    """torchvision InceptionV3 with ImageNet weights; returns (model, weights id for the fingerprint)."""
    import torch
    from torchvision.models import inception_v3

    enum = _inception_weights_enum(tag)
    model_id = f"torchvision Inception_V3_Weights.{tag}"
    filename = os.path.basename(enum.url)
    if weights is not None:
        if not os.path.isfile(weights):
            raise FileNotFoundError(f"InceptionV3 weights file {weights!r} (option weights=) does not exist")
        # aux_logits=True: the checkpoint holds the auxiliary head's weights too.
        model = inception_v3(weights=None, aux_logits=True, init_weights=False, transform_input=False)
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        weights_id = f"file:{os.path.basename(weights)}:sha256-{file_digest(weights)}"
    else:
        cached = os.path.join(torch.hub.get_dir(), "checkpoints", filename)
        if not os.path.isfile(cached) and not allow_download:
            raise weights_unavailable(
                "InceptionV3", model_id,
                where=f"{cached} does not exist and allow_download=False",
                how=(f"on a connected machine run `python -c \"import torchvision; "
                     f"torchvision.models.inception_v3(weights='{tag}')\"` and copy {filename} to {cached} "
                     f"(or set TORCH_HOME to a directory whose hub/checkpoints holds it), pass "
                     f"weights='/path/to/{filename}', or pass allow_download=True on a connected machine."),
            )
        try:
            # aux_logits stays True as torchvision requires for these weights; transform_input=False
            # as DIG In passes (the weights' own default would re-normalise the input).
            model = inception_v3(weights=enum, transform_input=False)
        except Exception as err:  # URLError, hash mismatch, truncated file ...
            raise weights_unavailable(
                "InceptionV3", model_id, where=f"loading {enum.url} via {cached} failed",
                how=f"download {filename} on a connected machine into {os.path.dirname(cached)} or pass weights=.",
                cause=err,
            ) from err
        weights_id = f"torchvision:{tag}:{filename}"
    # The auxiliary classifier only runs in training; drop it as torchvision does for aux_logits=False.
    model.aux_logits = False
    model.AuxLogits = None
    return model, weights_id


def _build_random_inception(init: str, seed: int) -> Any:
    import torch
    from torchvision.models import inception_v3

    if init != "kaiming_fan_in":
        raise ValueError(f"unknown init {init!r} for the tiny InceptionV3; choose from ['kaiming_fan_in']")
    with seeded_init(seed):
        model = inception_v3(weights=None, aux_logits=False, init_weights=False, transform_input=False)
        for module in model.modules():
            if isinstance(module, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(module.weight, mode="fan_in", nonlinearity="relu")
            elif isinstance(module, torch.nn.Linear):
                torch.nn.init.normal_(module.weight, std=1.0 / math.sqrt(module.in_features))
                torch.nn.init.zeros_(module.bias)
    return model


# ----------------------------------------------------------------------------- the adapter


class InceptionFeatures:
    """InceptionV3 2048-d pool features (DIG In's feature space) and ImageNet class probabilities.

    ``fingerprint`` names architecture, weights, preprocessing, dtype, device class and profile.

    Example:
        >>> from PIL import Image
        >>> InceptionFeatures.from_profile("tiny").encode_images([Image.new("RGB", (96, 64), "red")]).shape
        (1, 2048)
    """

    OPTIONS = ("weights", "allow_download", "image_size", "dtype", "seed", "batch_size")
    dim = 2048
    num_classes = 1000

    def __init__(self, model: Any, *, config: Mapping[str, Any], profile: str, weights_id: str,
                 device: str = "cpu", batch_size: int = 16) -> None:
        import torch

        self.config = dict(config)
        self.profile = profile
        self.device = device
        self.batch_size = int(batch_size)
        self.image_size = int(config["image_size"])
        self._dtype = torch_dtype(config["dtype"])
        self.model = model.eval().to(device=device, dtype=self._dtype)
        self._pool: list[Any] = []
        self.model.avgpool.register_forward_hook(lambda _m, _i, out: self._pool.append(out))
        preprocessing = (f"centercrop-long-edge,resize{self.image_size}-bilinear,"
                         f"mean{tuple(config['mean'])},std{tuple(config['std'])}")
        self.fingerprint = (f"InceptionFeatures:{profile}:{config['arch']}:{weights_id}:{preprocessing}:"
                            f"{config['dtype']}:{device_class(device)}:{config_hash(self.config)}")

    @classmethod
    def from_profile(cls, profile: str, device: str = "cpu", precision: str | None = None,
                     **options: Any) -> "InceptionFeatures":
        """Build the ``tiny`` or ``paper`` InceptionV3.

        Args:
            precision: ``auto`` (``None``; float32 everywhere, as DIG In ran it), ``float32``,
                ``float16`` or ``bfloat16``; the option ``dtype`` wins.
            **options: ``weights`` (local .pth), ``allow_download``, ``image_size``, ``dtype``,
                ``seed`` (tiny), ``batch_size``.

        Raises:
            ValueError: unknown profile or option.
            ModelLoadError: paper weights not available offline (saying how to provide them).
        """
        check_profile(profile)
        check_options(options, cls.OPTIONS, f"InceptionFeatures ({profile})")
        config = dict(INCEPTION_CONFIGS[profile])
        config["dtype"] = resolve_precision("inception", device, precision)
        for key in ("image_size", "dtype", "seed"):
            if key in options:
                config[key] = options[key]
        if int(config["image_size"]) < MIN_INCEPTION_SIZE:
            raise ValueError(f"image_size must be >= {MIN_INCEPTION_SIZE} for InceptionV3, got {config['image_size']}")
        torch_dtype(config["dtype"])  # validate early
        if config["weights"] is not None:  # paper
            if "seed" in options:
                raise ValueError("seed= only applies to profile='tiny' (random weights)")
            model, weights_id = _build_paper_inception(config["weights"], options.get("weights"),
                                                       bool(options.get("allow_download", False)))
        else:
            if "weights" in options or "allow_download" in options:
                raise ValueError("weights= and allow_download= only apply to profile='paper'")
            model = _build_random_inception(config["init"], int(config["seed"]))
            weights_id = f"random:{config['init']}:seed{config['seed']}@{init_identity('torch', 'torchvision')}"
        return cls(model, config=config, profile=profile, weights_id=weights_id, device=device,
                   batch_size=options.get("batch_size", 16))

    # -- public API ---------------------------------------------------------------------------

    def preprocess(self, images: Sequence[Image.Image]) -> np.ndarray:
        """The network input for ``images``: float32 (n, 3, image_size, image_size)."""
        return preprocess_batch(images, self.image_size, self.config["mean"], self.config["std"])

    def encode_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """2048-d pool features, float32 (n, 2048)."""
        return self.features_and_probabilities(images)[0]

    def class_probabilities(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Softmax of the 1000 ImageNet logits, float32 (n, 1000); input of the Inception Score."""
        return self.features_and_probabilities(images)[1]

    def features_and_probabilities(self, images: Sequence[Image.Image]) -> tuple[np.ndarray, np.ndarray]:
        """Both outputs from one forward pass: (features (n, 2048), probabilities (n, 1000))."""
        import torch

        pixels = self.preprocess(images)
        feats, probs = [np.zeros((0, self.dim), np.float32)], [np.zeros((0, self.num_classes), np.float32)]
        for start in range(0, len(pixels), self.batch_size):
            x = to_weights(torch.from_numpy(pixels[start:start + self.batch_size]), self._dtype, self.device)
            self._pool.clear()
            with torch.inference_mode():
                logits = self.model(x)
                pool = self._pool.pop().flatten(1)
                p = torch.softmax(logits.float(), dim=1)
            feats.append(pool.float().cpu().numpy())
            probs.append(p.cpu().numpy())
        return (np.concatenate(feats).astype(np.float32, copy=False),
                np.concatenate(probs).astype(np.float32, copy=False))

    def __repr__(self) -> str:
        return f"InceptionFeatures(profile={self.profile!r}, image_size={self.image_size}, device={self.device!r})"
