"""Vision adapters: InceptionV3 (DIG In), masked ViT (Decomposed-DIG), LangSAM and folder masks.

Everything runs offline on tiny seeded models; the ``paper`` profiles are exercised through their
fail-fast path (no weights here) and, where cheap, through their architecture with random weights.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from t2i_fairness.models.base import ImageEncoder, Segmenter
from t2i_fairness.models.inception import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    INCEPTION_CONFIGS,
    InceptionFeatures,
    center_crop_box,
    to_normalized_array,
)
from t2i_fairness.models.segmenter import (
    FolderMasks,
    LangSAMSegmenter,
    caption_for,
    patch_membership,
    resize_mask_like_image,
)
from t2i_fairness.models.vit import VIT_CONFIGS, MaskedViTFeatures, build_vit


@pytest.fixture(autouse=True)
def _single_thread():
    # Byte-level comparisons need a fixed thread count (the thread count changes a few pixel values by 1).
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def noise_images(n: int, seed: int = 0) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (40 + 13 * i, 90 - 7 * i, 3), dtype=np.uint8)) for i in range(n)]


def scene(seed: int) -> Image.Image:
    """A coloured rectangle on a plain background, 64-400 px (what the tiny segmenter doc measured)."""
    r = np.random.default_rng(seed)
    w, h = int(r.integers(64, 400)), int(r.integers(64, 400))
    image = Image.new("RGB", (w, h), tuple(int(c) for c in r.integers(0, 255, 3)))
    x0, y0 = int(r.integers(0, w // 2)), int(r.integers(0, h // 2))
    ImageDraw.Draw(image).rectangle([x0, y0, x0 + w // 3, y0 + h // 3], fill=tuple(int(c) for c in r.integers(0, 255, 3)))
    return image


@pytest.fixture(scope="module")
def inception():
    return InceptionFeatures.from_profile("tiny")


@pytest.fixture(scope="module")
def vit():
    return MaskedViTFeatures.from_profile("tiny")


@pytest.fixture(scope="module")
def langsam():
    return LangSAMSegmenter.from_profile("tiny")


# ============================================================================ docstring examples


@pytest.mark.parametrize("module", ["inception", "vit", "segmenter"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"t2i_fairness.models.{module}"), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# ============================================================================ preprocessing


@pytest.mark.parametrize("size", [(5, 3), (8, 3), (3, 8), (7, 7), (640, 427)])
def test_center_crop_box_matches_torchvision(size):
    from torchvision.transforms import functional as F

    rng = np.random.default_rng(1)
    image = Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
    ours = np.asarray(image.crop(center_crop_box(*image.size)))
    theirs = np.asarray(F.center_crop(image, min(image.size)))
    assert ours.shape == theirs.shape and (ours == theirs).all()


def test_center_crop_on_long_edge_by_hand():
    # 8 wide x 3 high, column c has value 10 * c: the excess of 5 columns is split 2 left / 3 right
    # (torchvision rounds 2.5 half-to-even), so columns 2, 3, 4 remain.
    columns = np.tile((10 * np.arange(8, dtype=np.uint8))[None, :, None], (3, 1, 3))
    out = to_normalized_array(Image.fromarray(columns), 3, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    assert out.shape == (3, 3, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out[0, 0], np.array([20, 30, 40]) / 255.0, rtol=0, atol=1e-7)
    # Tall image: 2 wide x 5 high, rows valued 50 * r; excess 3 -> top offset round(1.5) = 2.
    rows = np.tile((50 * np.arange(5, dtype=np.uint8))[:, None, None], (1, 2, 3))
    out = to_normalized_array(Image.fromarray(rows), 2, IMAGENET_MEAN, IMAGENET_STD)
    expected_red = (np.array([100, 150]) / 255.0 - IMAGENET_MEAN[0]) / IMAGENET_STD[0]
    np.testing.assert_allclose(out[0, :, 0], expected_red, rtol=0, atol=1e-6)


def test_inception_preprocess_equals_dig_in_pipeline(inception):
    """DIG In: CenterCropLongEdge -> Resize -> ToTensor -> Normalize(0.5) -> wrapper's (x+1)/2 and ImageNet."""
    import torchvision.transforms as T

    size = inception.image_size
    dig_in = T.Compose([T.Lambda(lambda im: T.functional.center_crop(im, min(im.size))), T.Resize(size),
                        T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3)])
    images = noise_images(3) + [Image.new("RGBA", (120, 75), (10, 200, 30, 128))]
    for image in images:
        x = dig_in(image.convert("RGB"))
        x = ((x + 1.0) / 2.0 - torch.tensor(IMAGENET_MEAN)[:, None, None]) / torch.tensor(IMAGENET_STD)[:, None, None]
        np.testing.assert_allclose(inception.preprocess([image])[0], x.numpy(), rtol=0, atol=2e-6)


def test_vit_preprocess_equals_released_decomposed_dig_pipeline(vit):
    import torchvision.transforms as T

    released = T.Compose([T.Lambda(lambda im: T.functional.center_crop(im, min(im.size))), T.Resize(vit.img_size),
                          T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    for image in noise_images(3, seed=5):
        np.testing.assert_allclose(vit.preprocess([image])[0], released(image).numpy(), rtol=0, atol=2e-6)


# ============================================================================ InceptionV3


def test_inception_shapes_dtypes_and_protocol(inception):
    images = noise_images(3)
    feats = inception.encode_images(images)
    probs = inception.class_probabilities(images)
    assert isinstance(inception, ImageEncoder)
    assert feats.shape == (3, 2048) and feats.dtype == np.float32 and np.isfinite(feats).all()
    assert probs.shape == (3, 1000) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert not np.allclose(feats[0], feats[1])  # random weights still tell images apart
    assert inception.encode_images([]).shape == (0, 2048)


def test_inception_deterministic_and_batching(inception):
    images = noise_images(5)
    a, b = inception.encode_images(images), inception.encode_images(images)
    assert a.tobytes() == b.tobytes()
    small = InceptionFeatures.from_profile("tiny", batch_size=2)
    assert small.fingerprint == inception.fingerprint  # batch size is not part of the features
    np.testing.assert_allclose(small.encode_images(images), a, rtol=1e-4, atol=1e-6)


def test_inception_tiny_fingerprint_stable_seeded_and_rng_untouched(inception):
    state = torch.random.get_rng_state()
    again = InceptionFeatures.from_profile("tiny")
    assert torch.equal(state, torch.random.get_rng_state())
    assert again.fingerprint == inception.fingerprint
    assert again.encode_images(noise_images(1)).tobytes() == inception.encode_images(noise_images(1)).tobytes()
    assert inception.fingerprint.startswith("InceptionFeatures:tiny:torchvision.inception_v3:random:kaiming_fan_in:seed0@init-")
    assert ":float32:cpu:" in inception.fingerprint  # dtype and device class
    assert "resize75" in inception.fingerprint
    other = InceptionFeatures.from_profile("tiny", seed=1)
    assert other.fingerprint != inception.fingerprint
    assert not np.allclose(other.encode_images(noise_images(1)), inception.encode_images(noise_images(1)))


def test_inception_paper_fails_fast_without_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # an empty torch hub cache
    start = time.perf_counter()
    with pytest.raises(RuntimeError) as info:
        InceptionFeatures.from_profile("paper")
    assert time.perf_counter() - start < 5
    message = str(info.value)
    assert "Inception_V3_Weights.IMAGENET1K_V1" in message
    assert "inception_v3_google-0cc3c7bd.pth" in message and "weights=" in message and "tiny" in message


def test_inception_paper_loads_a_local_weights_file(tmp_path, inception):
    """The ``weights=`` path runs the paper loader (aux head in the checkpoint, 299 px)."""
    from torchvision.models import inception_v3

    with torch.random.fork_rng():
        torch.manual_seed(3)
        reference = inception_v3(weights=None, aux_logits=True, init_weights=False, transform_input=False)
    path = tmp_path / "inception_v3_google-0cc3c7bd.pth"
    torch.save({k: v.half() for k, v in reference.state_dict().items()}, path)  # half: smaller file
    paper = InceptionFeatures.from_profile("paper", weights=str(path))
    assert paper.image_size == 299 and paper.model.AuxLogits is None and not paper.model.transform_input
    assert paper.fingerprint.startswith("InceptionFeatures:paper:torchvision.inception_v3:file:inception_v3_google-0cc3c7bd.pth:sha256-")
    assert paper.fingerprint != inception.fingerprint
    feats, probs = paper.features_and_probabilities(noise_images(1))
    assert feats.shape == (1, 2048) and probs.shape == (1, 1000)


def test_inception_option_errors_list_choices(inception):
    with pytest.raises(ValueError, match=r"unknown scorer profile 'big'.*\['tiny', 'paper', 'paper-random'\]"):
        InceptionFeatures.from_profile("big")
    with pytest.raises(ValueError, match=r"unknown precision 'fp8'; choose from auto, float32, float16, bfloat16"):
        InceptionFeatures.from_profile("tiny", precision="fp8")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['sede'\].*valid options"):
        InceptionFeatures.from_profile("tiny", sede=1)
    with pytest.raises(ValueError, match="image_size must be >= 75"):
        InceptionFeatures.from_profile("tiny", image_size=64)
    with pytest.raises(ValueError, match=r"unknown dtype 'fp8'"):
        InceptionFeatures.from_profile("tiny", dtype="fp8")
    with pytest.raises(TypeError, match="single image"):
        inception.encode_images(Image.new("RGB", (8, 8)))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"images\[1\] must be a PIL.Image.Image, got ndarray"):
        inception.encode_images([Image.new("RGB", (8, 8)), np.zeros((8, 8, 3))])
    assert INCEPTION_CONFIGS["paper"]["image_size"] == 299


# ============================================================================ masks -> patches


def test_patch_membership_by_hand():
    mask = np.zeros((4, 6), bool)
    mask[0, 5] = True  # top-right patch
    mask[3, 0] = True  # bottom-left patch
    assert patch_membership(mask, 2, (2, 3)).astype(int).tolist() == [[0, 0, 1], [1, 0, 0]]
    assert patch_membership(np.ones((4, 4), bool), 2, 2).all()
    with pytest.raises(ValueError, match=r"mask has shape \(4, 6\).*needs \(4, 4\)"):
        patch_membership(mask, 2, 2)


def test_mask_follows_the_image_crop_and_nearest_resize():
    # 4 high x 8 wide: the crop keeps columns 2..5 (same rule as the image); x2 nearest upsampling.
    mask = np.zeros((4, 8), bool)
    mask[1, 2] = True  # first kept column
    mask[0, 1] = True  # cropped away
    out = resize_mask_like_image(mask, 8)
    expected = np.zeros((8, 8), bool)
    expected[2:4, 0:2] = True
    assert out.dtype == bool and (out == expected).all()


def test_object_patches_use_the_preprocessed_geometry(vit):
    # A 128 x 64 image becomes the centred 64 x 64 square; a single object pixel at x = 32 + 20, y = 40
    # lands in patch row 2, column 1 of the 4 x 4 grid.
    mask = np.zeros((64, 128), bool)
    mask[40, 52] = True
    obj = vit.object_patches(mask).reshape(4, 4)
    assert obj.sum() == 1 and obj[2, 1]


# ============================================================================ masked ViT


def removal_reference(features: MaskedViTFeatures, pixels: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The released code's way: drop the excluded tokens after the position embedding."""
    m = features.model
    out = []
    with torch.no_grad():
        for i in range(len(pixels)):
            x = m._pos_embed(m.patch_embed(torch.from_numpy(pixels[i:i + 1])))
            prefix = torch.arange(features.num_prefix_tokens)
            kept = features.num_prefix_tokens + torch.from_numpy(np.flatnonzero(keep[i]))
            x = m.norm(m.blocks(m.norm_pre(x[:, torch.cat([prefix, kept])])))
            out.append(x[0, 0].numpy())
    return np.stack(out)


def random_masks(images, seed, density=0.003):
    rng = np.random.default_rng(seed)
    return [rng.random((im.height, im.width)) < density for im in images]


@pytest.mark.parametrize("fused", [True, False], ids=["sdpa", "explicit-softmax"])
def test_masked_attention_equals_token_removal_tiny(vit, fused):
    previous = [blk.attn.fused_attn for blk in vit.model.blocks]
    for blk in vit.model.blocks:
        blk.attn.fused_attn = fused
    try:
        images = noise_images(6, seed=2)
        masks = random_masks(images, seed=3)
        for mode in ("obj", "bg"):
            keep = vit.included_patches(images, masks, mode)
            assert 0 < keep.sum() < keep.size  # the masks really exclude some patches
            got = vit.encode(images, masks, mode)
            want = removal_reference(vit, vit.preprocess(images), keep)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    finally:
        for blk, value in zip(vit.model.blocks, previous):
            blk.attn.fused_attn = value


def test_masked_attention_equals_token_removal_paper_architecture():
    """ViT-B/16 at 224 px (the paper's structure) with random weights: ~1 s to build, 0.5 s/image."""
    config = dict(VIT_CONFIGS["paper"], tag=None, seed=0)
    model, weights_id = build_vit(config)
    big = MaskedViTFeatures(model, config=config, profile="paper", weights_id=weights_id)
    assert (big.grid, big.dim, len(big.model.blocks)) == (14, 768, 12)
    images = noise_images(1, seed=4)  # 40 x 90 -> crop to 40 x 40 starting at x = 25
    masks = [np.zeros((40, 90), bool)]
    masks[0][5:20, 30:50] = True  # an off-centre blob, about 6 x 9 of the 14 x 14 patches
    keep = big.included_patches(images, masks, "obj")
    assert 0 < keep.sum() < keep.size
    np.testing.assert_allclose(big.encode(images, masks, "obj"), removal_reference(big, big.preprocess(images), keep),
                               rtol=1e-4, atol=1e-5)


def test_vit_modes_shapes_edge_cases_and_protocol(vit):
    images = noise_images(3, seed=6)
    empty = [np.zeros((im.height, im.width), bool) for im in images]
    full_mask = [np.ones((im.height, im.width), bool) for im in images]
    full = vit.encode_images(images)
    assert isinstance(vit, ImageEncoder)
    assert full.shape == (3, vit.dim) and full.dtype == np.float32 and np.isfinite(full).all()
    assert vit.encode(images, None, "full").tobytes() == full.tobytes()
    # Everything is object -> obj == full; nothing is object -> bg == full (paper: unsegmented images
    # enter BG-only whole).
    np.testing.assert_allclose(vit.encode(images, full_mask, "obj"), full, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vit.encode(images, empty, "bg"), full, rtol=1e-5, atol=1e-6)
    # No patch left for the mode -> a NaN row (the caller's "no segmentation").
    assert np.isnan(vit.encode(images, empty, "obj")).all()
    assert np.isnan(vit.encode(images, full_mask, "bg")).all()
    # A mixed batch: only the unsegmented image is NaN; the others match their own single-image run.
    mixed = [random_masks(images[:1], 7, 0.01)[0], empty[1], full_mask[2]]
    obj = vit.encode(images, mixed, "obj")
    assert vit.valid_rows(obj).tolist() == [True, False, True]
    np.testing.assert_allclose(obj[0], vit.encode(images[:1], mixed[:1], "obj")[0], rtol=1e-5, atol=1e-6)
    assert vit.encode([], [], "obj").shape == (0, vit.dim)


def test_vit_deterministic_fingerprint_and_rng(vit):
    images = noise_images(2, seed=8)
    masks = random_masks(images, seed=9)
    assert vit.encode(images, masks, "bg").tobytes() == vit.encode(images, masks, "bg").tobytes()
    state = torch.random.get_rng_state()
    again = MaskedViTFeatures.from_profile("tiny")
    assert torch.equal(state, torch.random.get_rng_state())
    assert again.fingerprint == vit.fingerprint
    assert again.encode(images, masks, "obj").tobytes() == vit.encode(images, masks, "obj").tobytes()
    assert vit.fingerprint.startswith("MaskedViTFeatures:tiny:vit_base_patch16_224:random:seed0@init-")
    assert "nearest" in vit.fingerprint
    config = dict(VIT_CONFIGS["paper"])  # what from_profile('paper') fingerprints, on a cheap model
    paper_like = MaskedViTFeatures(build_vit(dict(VIT_CONFIGS["tiny"]))[0], config=dict(config, img_size=64),
                                   profile="paper", weights_id="timm:vit_base_patch16_224.augreg_in21k_ft_in1k")
    assert paper_like.fingerprint != vit.fingerprint and ":paper:" in paper_like.fingerprint


def test_vit_argument_errors(vit):
    images = noise_images(2)
    with pytest.raises(ValueError, match=r"unknown mode 'object'; choose from \['full', 'obj', 'bg'\]"):
        vit.encode(images, None, "object")
    with pytest.raises(ValueError, match="needs one mask per image"):
        vit.encode(images, None, "obj")
    with pytest.raises(ValueError, match="2 images but 1 masks"):
        vit.encode(images, random_masks(images[:1], 0), "bg")
    with pytest.raises(ValueError, match=r"masks\[1\] has shape \(3, 3\)"):
        vit.encode(images, [random_masks(images[:1], 0)[0], np.zeros((3, 3), bool)], "obj")
    with pytest.raises(ValueError, match=r"option\(s\) \['weights'\] do not apply to profile='tiny'"):
        MaskedViTFeatures.from_profile("tiny", weights="x.safetensors")


def test_vit_paper_fails_fast_without_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(RuntimeError) as info:
        MaskedViTFeatures.from_profile("paper", cache_dir=str(tmp_path))
    assert time.perf_counter() - start < 5
    message = str(info.value)
    assert "timm/vit_base_patch16_224.augreg_in21k_ft_in1k" in message
    assert "hf download" in message and "HF_HOME" in message and "weights=" in message
    with pytest.raises(RuntimeError, match="timm/vit_base_patch16_224.orig_in21k_ft_in1k"):
        MaskedViTFeatures.from_profile("paper", cache_dir=str(tmp_path), tag="orig_in21k_ft_in1k")
    with pytest.raises(ValueError, match="unknown timm weights 'vit_base_patch16_224.nope'; choose from"):
        MaskedViTFeatures.from_profile("paper", tag="nope")


def test_vit_paper_loader_reads_a_local_file_and_the_hub_cache(tmp_path):
    """The paper loading code on the tiny architecture: ``weights=`` and a populated HF cache."""
    from safetensors.torch import save_file

    tiny, _ = build_vit(dict(VIT_CONFIGS["tiny"]))
    path = tmp_path / "model.safetensors"
    save_file(tiny.state_dict(), str(path))
    config = dict(VIT_CONFIGS["tiny"], tag="augreg_in21k_ft_in1k")
    loaded, weights_id = build_vit(config, weights=str(path))
    assert weights_id.startswith("file:model.safetensors:sha256-")
    assert all(torch.equal(a, b) for a, b in zip(tiny.state_dict().values(), loaded.state_dict().values()))
    # The layout huggingface_hub writes: models--org--name/{refs/main, snapshots/<rev>/file}.
    repo = tmp_path / "cache" / "models--timm--vit_base_patch16_224.augreg_in21k_ft_in1k"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    (repo / "snapshots" / ("0" * 40)).mkdir(parents=True)
    os.link(path, repo / "snapshots" / ("0" * 40) / "model.safetensors")
    cached, weights_id = build_vit(config, cache_dir=str(tmp_path / "cache"))
    assert weights_id == "timm:vit_base_patch16_224.augreg_in21k_ft_in1k@hub:timm/vit_base_patch16_224.augreg_in21k_ft_in1k@" + "0" * 12  # the snapshot loaded
    assert all(torch.equal(a, b) for a, b in zip(tiny.state_dict().values(), cached.state_dict().values()))


# ============================================================================ LangSAM


def test_caption_is_lower_case_with_a_full_stop():
    assert caption_for("Cooking Pot") == "cooking pot."
    assert caption_for(" bag. ") == "bag."
    with pytest.raises(ValueError, match="non-empty string"):
        caption_for("  ")


def test_langsam_tiny_masks(langsam):
    assert isinstance(langsam, Segmenter)
    image = scene(1)
    mask = langsam.segment(image, "bag")
    assert mask.shape == (image.height, image.width) and mask.dtype == bool
    assert langsam.segment(image, "bag").tobytes() == mask.tobytes()
    boxes = langsam.boxes(image, "bag")
    assert boxes.dtype == np.float32 and boxes.ndim == 2 and boxes.shape[1] == 4
    np.testing.assert_array_equal(langsam.masks_for_boxes(image, boxes).any(axis=0) if len(boxes) else
                                  np.zeros_like(mask), mask)


def test_langsam_tiny_thresholds_give_some_masks_and_some_misses(langsam):
    masks = [langsam.segment(scene(seed), "bag") for seed in range(6)]
    covered = [m.mean() for m in masks]
    assert any(c == 0 for c in covered), covered  # no box -> all False
    assert any(0 < c < 1 for c in covered), covered  # partial object masks


def test_langsam_no_box_gives_all_false_mask():
    never = LangSAMSegmenter.from_profile("tiny", box_threshold=1.01)
    image = scene(2)
    assert never.boxes(image, "bag").shape == (0, 4)
    mask = never.segment(image, "bag")
    assert mask.shape == (image.height, image.width) and not mask.any()
    always = LangSAMSegmenter.from_profile("tiny", box_threshold=0.0)
    assert len(always.boxes(image, "bag")) == 5  # every query of the tiny detector
    assert always.fingerprint != never.fingerprint


def test_max_boxes_keeps_the_best_scored_boxes_and_is_in_the_fingerprint(monkeypatch):
    """A random profile's ``max_boxes`` (paper-random: a random detector boxes most of its 900 queries): the
    boxes kept are the best scored of those above the threshold, in the detector's order; the cap is part of
    the config hash, so of the fingerprint and of every mask's cache key."""
    from t2i_fairness.models import segmenter as segmenter_module

    image = scene(2)
    every = LangSAMSegmenter.from_profile("tiny", box_threshold=0.0)
    monkeypatch.setitem(segmenter_module.SEGMENTER_CONFIGS, "tiny",
                        dict(segmenter_module.SEGMENTER_CONFIGS["tiny"], max_boxes=2))
    capped = LangSAMSegmenter.from_profile("tiny", box_threshold=0.0)
    inputs = every.detector_processor(images=[image], text=["bag."], return_tensors="pt")
    with torch.inference_mode():
        out = every.detector(**inputs)
    scores = out.logits.sigmoid().max(-1).values[0]  # the reference: each query's score, the best two kept
    all_boxes, kept = every.boxes(image, "bag"), capped.boxes(image, "bag")
    assert len(all_boxes) == 5 and kept.shape == (2, 4)
    best = sorted(sorted(range(5), key=lambda i: -float(scores[i]))[:2])
    np.testing.assert_allclose(kept, all_boxes[best], rtol=1e-5)
    assert capped.fingerprint != every.fingerprint
    assert json.loads(open(segmenter_module.__file__.replace("models/segmenter.py",
                                                             "model_configs/segmenter-paper-random.json")).read())["max_boxes"] == 4


def test_langsam_fingerprint_and_rng(langsam):
    state = torch.random.get_rng_state()
    again = LangSAMSegmenter.from_profile("tiny")
    assert torch.equal(state, torch.random.get_rng_state())
    assert again.fingerprint == langsam.fingerprint
    assert langsam.fingerprint.startswith("LangSAMSegmenter:tiny:random:seed0@init-")
    assert ":box0.99:text0.25:float32:cpu:" in langsam.fingerprint
    assert "grounding-dino" not in langsam.fingerprint


def test_langsam_paper_fails_fast_naming_each_checkpoint(tmp_path, monkeypatch, langsam):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(RuntimeError) as info:
        LangSAMSegmenter.from_profile("paper", cache_dir=str(tmp_path))
    assert time.perf_counter() - start < 5
    assert "IDEA-Research/grounding-dino-base" in str(info.value) and "hf download" in str(info.value)
    # With a local detector the next missing piece is SAM, and the message says so.
    local = tmp_path / "gdino"
    langsam.detector.save_pretrained(local)
    langsam.detector_processor.save_pretrained(local)
    with pytest.raises(RuntimeError, match="facebook/sam-vit-huge"):
        LangSAMSegmenter.from_profile("paper", cache_dir=str(tmp_path), detector=str(local))


# ============================================================================ FolderMasks


def test_folder_masks(tmp_path):
    mask = np.zeros((6, 9), np.uint8)
    mask[1:3, 2:5] = 7  # any nonzero value is object
    Image.fromarray(mask).save(tmp_path / "img_0.png")
    rgb = np.zeros((6, 9, 3), np.uint8)
    rgb[5, 8, 2] = 1  # nonzero in one channel only
    Image.fromarray(rgb).save(tmp_path / "img_1.png")
    folder = FolderMasks(tmp_path)
    assert isinstance(folder, Segmenter)
    image = Image.new("RGB", (9, 6))
    got = folder.segment(image, "bag", key="img_0")
    assert got.dtype == bool and got.sum() == 6 and got[1:3, 2:5].all()
    assert folder.mask_for("img_1").sum() == 1
    # The key can come from the image itself.
    image.info["key"] = "img_1"
    assert folder.segment(image, "bag")[5, 8]
    image.save(tmp_path / "img_0.jpg")
    with Image.open(tmp_path / "img_0.jpg") as opened:
        assert folder.segment(opened, "bag").sum() == 6


def test_folder_masks_errors(tmp_path):
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / "a.png")
    folder = FolderMasks(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        folder.segment(Image.new("RGB", (4, 4)), "bag", key="missing")
    assert str(tmp_path / "missing.png") in str(info.value) and "'a'" in str(info.value)
    with pytest.raises(ValueError, match=r"has \(height, width\) \(4, 4\) but the image is \(5, 4\)"):
        folder.segment(Image.new("RGB", (4, 5)), "bag", key="a")
    with pytest.raises(ValueError, match="pass key="):
        folder.segment(Image.new("RGB", (4, 4)), "bag")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        FolderMasks(tmp_path / "nope")


def test_folder_masks_fingerprint_tracks_the_files(tmp_path):
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / "a.png")
    before = FolderMasks.from_profile("tiny", folder=tmp_path).fingerprint
    assert FolderMasks(tmp_path).fingerprint == before
    Image.fromarray(np.ones((4, 5), np.uint8)).save(tmp_path / "a.png")
    os.utime(tmp_path / "a.png", ns=(1, 1))
    assert FolderMasks(tmp_path).fingerprint != before
    # masks in subfolders (keys such as "generated/bag/0") count too
    changed = FolderMasks(tmp_path).fingerprint
    (tmp_path / "generated").mkdir()
    Image.fromarray(np.ones((4, 4), np.uint8)).save(tmp_path / "generated" / "0.png")
    nested = FolderMasks(tmp_path)
    assert nested.fingerprint != changed and nested.mask_for("generated/0").all()
    (tmp_path / "generated" / "0.png").unlink()
    assert FolderMasks(tmp_path).fingerprint == changed
    with pytest.raises(FileNotFoundError, match="generated/1"):
        nested.mask_for("generated/1")


# ============================================================================ half precision
# Each adapter at the precisions CUDA runs (t2i_fairness.models.precision), built and run on CPU, so a
# dtype mismatch between inputs and weights fails here and not first on a GPU. Cosines against the
# float32 rows: the worst measured is 0.99996 (bench/bench_precision.py, docs/precision.md).

HALF = ["float16", "bfloat16"]


def _close_to(ref: np.ndarray, got: np.ndarray, min_cos: float = 0.999) -> None:
    assert got.dtype == np.float32 and got.shape == ref.shape
    ok = ~np.isnan(ref).any(1)
    assert (np.isnan(got).any(1) == ~ok).all()
    a, b = ref[ok].astype(np.float64), got[ok].astype(np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cos.min() > min_cos, cos.min()
    assert not np.array_equal(a, b)  # it really ran at another precision


def _dtypes(module) -> set:
    return {p.dtype for p in module.parameters()}


@pytest.mark.parametrize("precision", HALF)
def test_inception_at_half_precision(inception, precision):
    half = InceptionFeatures.from_profile("tiny", precision=precision)
    assert _dtypes(half.model) == {getattr(torch, precision)}
    assert f":{precision}:" in half.fingerprint and half.fingerprint != inception.fingerprint
    images = noise_images(3)
    feats, probs = half.features_and_probabilities(images)
    _close_to(inception.encode_images(images), feats)
    assert probs.dtype == np.float32 and np.allclose(probs.sum(1), 1, atol=1e-4)


@pytest.mark.parametrize("precision", HALF)
def test_vit_at_half_precision(vit, precision):
    half = MaskedViTFeatures.from_profile("tiny", precision=precision)
    assert _dtypes(half.model) == {getattr(torch, precision)}
    assert f":{precision}:" in half.fingerprint and half.fingerprint != vit.fingerprint
    images = noise_images(3)
    masks = [np.zeros((im.height, im.width), bool) for im in images]
    masks[0][:20, :30] = True
    masks[1][:] = True  # bg mode has no patch: NaN row
    for mode in ("full", "obj", "bg"):
        _close_to(vit.encode(images, masks, mode), half.encode(images, masks, mode))


@pytest.mark.parametrize("precision", HALF)
def test_langsam_at_half_precision(langsam, precision):
    half = LangSAMSegmenter.from_profile("tiny", precision=precision, box_threshold=0.3)
    full = LangSAMSegmenter.from_profile("tiny", box_threshold=0.3)
    assert _dtypes(half.detector) == _dtypes(half.sam) == {getattr(torch, precision)}
    assert f":{precision}:" in half.fingerprint and half.fingerprint != full.fingerprint
    images = [scene(s) for s in range(3)]
    boxes = [half.boxes(im, "bag") for im in images]
    assert all(b.dtype == np.float32 for b in boxes) and sum(len(b) for b in boxes) > 0
    for image in images:
        mask, ref = half.segment(image, "bag"), full.segment(image, "bag")
        assert mask.dtype == bool and mask.shape == ref.shape
        assert np.mean(mask != ref) < 0.05  # measured: 0.0001 (float16), 0.007 (bfloat16) of the pixels


@pytest.mark.parametrize("precision", HALF)
def test_clip_at_half_precision(precision):
    """The CUDA crash (FloatTensor input, HalfTensor weight) of open_clip's mixed fp16, on CPU."""
    from t2i_fairness.models.clip import ClipModel

    full, half = ClipModel.from_profile("tiny"), ClipModel.from_profile("tiny", precision=precision)
    assert half.model.visual.conv1.weight.dtype == getattr(torch, precision)
    short = {"float16": "fp16", "bfloat16": "bf16"}[precision]
    assert half.fingerprint == full.fingerprint.replace(":fp32:", f":{short}:")
    images = noise_images(3)
    _close_to(full.encode_images(images), half.encode_images(images))
    _close_to(full.encode_texts(["a dog", "a car in Africa"]), half.encode_texts(["a dog", "a car in Africa"]))
