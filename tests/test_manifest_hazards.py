"""``images:`` manifests: each hazard of issue #17 reproduced, and what it does now."""

from __future__ import annotations

import doctest
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from t2i_fairness.spine.generation import derive_seed
from t2i_fairness.generators import manifest as module
from t2i_fairness.generators.manifest import SEED_RANGE, ManifestGenerator, to_rgb8


def seed_for(prompt: str, index: int) -> int:
    return derive_seed(prompt, index)


def manifest(folder: Path, text: str) -> Path:
    path = folder / "manifest.csv"
    path.write_text(text, encoding="utf-8")
    return path


def error(path: Path) -> str:
    with pytest.raises(ValueError) as info:
        ManifestGenerator(path, seed_for)
    return str(info.value)


def serve(folder: Path, name: str, prompt: str = "bag in Africa") -> tuple[ManifestGenerator, Image.Image]:
    gen = ManifestGenerator(manifest(folder, f"prompt,index,path\n{prompt},0,{name}\n"), seed_for)
    [image] = gen.generate([prompt], [seed_for(prompt, 0)])
    return gen, image


def generate_error(folder: Path, name: str) -> str:
    gen = ManifestGenerator(manifest(folder, f"prompt,index,path\nbag in Africa,0,{name}\n"), seed_for)
    with pytest.raises(ValueError) as info:
        gen.generate(["bag in Africa"], [seed_for("bag in Africa", 0)])
    return str(info.value)


@pytest.fixture
def folder(tmp_path):
    Image.new("RGB", (8, 8), (200, 100, 0)).save(tmp_path / "a.png")
    Image.new("RGB", (8, 8), (0, 100, 200)).save(tmp_path / "b.png")
    return tmp_path


def test_doctests_run():
    assert doctest.testmod(module, raise_on_error=False).failed == 0


# ------------------------------------------------------------------------------- rows


@pytest.mark.parametrize("rows, line, message", [
    # Reproduced: a short row raised TypeError (PosixPath / NoneType) without a line.
    ("bag in Africa,0,a.png\nbag in Africa,1\n", 3, "the row has 2 field(s), the header 3 (prompt, index, path): ['bag in Africa', '1']"),
    ("bag in Africa,0,a.png,extra\n", 2, "the row has 4 field(s), the header 3"),
    (" \n", 2, "the row has 1 field(s), the header 3"),
    (",0,a.png\n", 2, "empty prompt"),
    ("bag in Africa,0,\n", 2, "empty path"),
    ("bag in Africa,,a.png\n", 2, "the row has neither a seed nor an index"),
    ("bag in Africa,1.0,a.png\n", 2, "seed/index must be an integer (invalid literal for int() with base 10: '1.0')"),
    ("bag in Africa,-1,a.png\n", 2, "index -1 is negative"),
    ('"bag\nin Africa",0,a.png\nbag in Africa,x,b.png\n', 4, "seed/index must be an integer"),  # after a two-line field
])
def test_bad_rows_name_manifest_and_line(folder, rows, line, message):
    path = manifest(folder, "prompt,index,path\n" + rows)
    assert error(path).startswith(f"{path}, line {line}: {message}")


def test_two_rows_for_one_image_name_both_lines(folder):
    # Reproduced: the second row silently replaced the first.
    path = manifest(folder, "prompt,index,path\nbag in Africa,0,a.png\ncar in Europe,0,a.png\nbag in Africa,0,b.png\n")
    assert error(path).startswith(
        f"{path}, line 4: prompt 'bag in Africa' with seed {seed_for('bag in Africa', 0)} is already listed at line 2 "
        "(a.png and b.png); one row per image")


def test_an_index_row_and_a_seed_row_for_one_image_collide(folder):
    seed = seed_for("bag in Africa", 1)
    path = manifest(folder, f"prompt,index,seed,path\nbag in Africa,1,,a.png\nbag in Africa,,{seed},b.png\n")
    assert f"{path}, line 3: prompt 'bag in Africa' with seed {seed} is already listed at line 2" in error(path)


@pytest.mark.parametrize("seed", ["12345678901234567890123456", "12345678901234567890123457", str(SEED_RANGE), "-5"])
def test_seeds_outside_the_suites_range_are_errors(folder, seed):
    # Reproduced: two 26-digit seeds collapsed into one image. No test can ask for such a seed.
    path = manifest(folder, f"prompt,seed,path\nbag in Africa,1,a.png\nbag in Africa,{seed},b.png\n")
    assert error(path).startswith(f"{path}, line 3: seed {seed} is outside the suite's seeds 0..4294967295")


def test_the_largest_seed_is_served(folder):
    gen = ManifestGenerator(manifest(folder, f"prompt,seed,path\nbag,{SEED_RANGE - 1},b.png\nbag,0,a.png\n"), seed_for)
    top, zero = gen.generate(["bag", "bag"], [SEED_RANGE - 1, 0])
    assert top.getpixel((0, 0)) == (0, 100, 200) and zero.getpixel((0, 0)) == (200, 100, 0)


# ------------------------------------------------------------------------------- files


def test_an_empty_file_is_an_error_naming_manifest_line_and_file(folder):
    (folder / "empty.png").write_bytes(b"")
    path = manifest(folder, "prompt,index,path\nbag in Africa,0,a.png\nbag in Africa,1,empty.png\n")
    assert error(path) == f"{path}: 1 image file(s) not found: line 3: empty.png (empty file)"


@pytest.mark.parametrize("content", [b"not an image\n", b"\x89PNG\r\n\x1a\n" + b"\x00" * 20])
def test_a_file_that_is_no_image_is_an_error_naming_manifest_line_and_file(folder, content):
    # Reproduced: UnidentifiedImageError without the manifest or line.
    (folder / "x.png").write_bytes(content)
    message = generate_error(folder, "x.png")
    assert message.startswith(f"{folder / 'manifest.csv'}, line 2: x.png ({folder / 'x.png'}) is not a readable image: ")


def test_a_truncated_image_is_an_error_naming_manifest_line_and_file(folder):
    data = (folder / "a.png").read_bytes()
    (folder / "cut.png").write_bytes(data[: len(data) // 2])
    assert "line 2: cut.png (" in generate_error(folder, "cut.png")


def test_an_animated_gif_is_refused(folder):
    # Reproduced: a GIF silently used its first frame. A row is one still image; we do not guess the frame.
    frames = [Image.new("RGB", (8, 8), c) for c in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(folder / "anim.gif", save_all=True, append_images=frames[1:])
    assert generate_error(folder, "anim.gif") == (
        f"{folder / 'manifest.csv'}, line 2: anim.gif ({folder / 'anim.gif'}) has 2 frames (GIF); a row is one still "
        "image: export the frame you mean (e.g. as PNG)")


def test_an_animated_png_is_refused(folder):
    frames = [Image.new("RGB", (8, 8), c) for c in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(folder / "anim.png", save_all=True, append_images=frames[1:])
    assert "has 2 frames (PNG)" in generate_error(folder, "anim.png")


def test_a_still_gif_is_served(folder):
    Image.new("RGB", (8, 8), (255, 0, 0)).save(folder / "still.gif")
    _, image = serve(folder, "still.gif")
    assert image.mode == "RGB" and image.getpixel((0, 0)) == (255, 0, 0)


def png16(path: Path, values: np.ndarray) -> None:
    """Write a 16-bit PNG by hand (PIL cannot write 16-bit RGB): grey HxW, grey+alpha HxWx2, RGB HxWx3."""
    values = np.asarray(values, dtype=">u2")
    h, w = values.shape[:2]
    channels = 1 if values.ndim == 2 else values.shape[2]
    colour_type = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    raw = b"".join(b"\x00" + values[y].tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, colour_type, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_a_16_bit_grey_png_is_rescaled_not_clipped(folder):
    # Reproduced: convert("RGB") clipped 16-bit grey at 255 (mean 226.8 for an image whose 8-bit mean is 115.4).
    values = np.random.default_rng(0).integers(0, 60000, size=(32, 32)).astype(np.uint16)
    png16(folder / "g16.png", values)
    with Image.open(folder / "g16.png") as im:
        assert im.mode == "I;16"
        clipped = np.asarray(im.convert("RGB"), dtype=float).mean()
    _, image = serve(folder, "g16.png")
    got = np.asarray(image, dtype=float)
    expected = np.rint(values / 257.0)
    assert got.shape == (32, 32, 3) and (got == expected[..., None]).all()
    assert got.mean() == pytest.approx(expected.mean(), abs=1e-9)
    assert clipped > got.mean() + 100  # what the old conversion gave


@pytest.mark.parametrize("channels", [2, 3])
def test_16_bit_colour_and_grey_alpha_pngs_match_their_8_bit_rescale(folder, channels):
    values = np.random.default_rng(channels).integers(0, 65536, size=(16, 16, channels)).astype(np.uint16)
    png16(folder / "c16.png", values)
    _, image = serve(folder, "c16.png")
    got = np.asarray(image, dtype=float)
    colour = values[..., :3] if channels == 3 else np.repeat(values[..., :1], 3, axis=-1)
    expected = np.rint(colour / 257.0)
    assert np.abs(got - expected).max() <= 1  # PIL keeps the high byte: within one level of the rounding
    assert got.mean() == pytest.approx(expected.mean(), abs=0.5)


def test_float_pixels_are_refused_with_the_file_named(folder):
    Image.fromarray(np.full((4, 4), 0.5, dtype=np.float32)).save(folder / "f.tiff")
    assert "line 2: f.tiff (" in generate_error(folder, "f.tiff")
    assert "floating-point pixels (mode F) have no fixed range" in generate_error(folder, "f.tiff")


def test_to_rgb8_keeps_8_bit_images_as_they_are():
    rgb = Image.fromarray(np.random.default_rng(1).integers(0, 256, size=(5, 5, 3), dtype=np.uint8))
    assert np.array_equal(np.asarray(to_rgb8(rgb)), np.asarray(rgb))
    grey = rgb.convert("L")
    assert np.array_equal(np.asarray(to_rgb8(grey)), np.asarray(grey.convert("RGB")))
