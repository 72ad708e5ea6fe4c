"""``images:PATH``: pre-generated images (e.g. from a closed API) described by a CSV manifest."""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from PIL import Image

MANIFEST_NAMES = ("manifest.csv", "images.csv")
SEED_RANGE = 2**32  # the suite's seeds are 32-bit (t2i_fairness.spine.generation.derive_seed)
_SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I;16N")


def to_rgb8(image: Image.Image, what: str = "image") -> Image.Image:
    """An 8-bit RGB copy of a still image, rescaling 16-bit grey (``round(v / 257)``) that PIL would clip."""
    mode = image.mode
    if mode in _SIXTEEN_BIT or (mode == "I" and image.format == "PNG"):
        values = np.asarray(image, dtype=np.float64)
        if values.size and (values.min() < 0 or values.max() > 65535):
            raise ValueError(f"{what}: 16-bit pixels outside 0..65535 (mode {mode})")
        grey = np.rint(values / 257.0).astype(np.uint8)
        return Image.fromarray(grey).convert("RGB")
    if mode in ("I", "F"):
        raise ValueError(
            f"{what}: {'32-bit integer' if mode == 'I' else 'floating-point'} pixels (mode {mode}) have no fixed range; "
            "save it as an 8- or 16-bit PNG or JPEG"
        )
    return image.convert("RGB")


@dataclass(frozen=True)
class _Row:
    file: Path
    line: int
    written: str  # the path as the manifest wrote it


class ManifestGenerator:
    """Serves images listed in a manifest CSV with columns ``prompt``, ``seed`` or ``index``, ``path``.

    ``fingerprint`` covers the rows and every file's SHA-256; :meth:`item_key` one image's.
    """

    def __init__(self, path: str | Path, seed_for: Callable[[str, int], int]):
        path = Path(path).expanduser()
        if path.is_dir():
            found = [path / n for n in MANIFEST_NAMES if (path / n).exists()]
            if not found:
                raise ValueError(f"--t2i-model images:{path}: no {' or '.join(MANIFEST_NAMES)} in that folder")
            path = found[0]
        if not path.exists():
            raise ValueError(f"--t2i-model images:{path}: manifest not found")
        self.manifest = path
        data = path.read_bytes()
        self._by_key: dict[tuple[str, int], Path] = {}
        self._rows: dict[tuple[str, int], _Row] = {}
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise ValueError(f"{path}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); save the manifest as UTF-8") from None
        rows = csv.DictReader(text.splitlines())
        cols = set(rows.fieldnames or [])
        if not {"prompt", "path"} <= cols or not cols & {"seed", "index"}:
            raise ValueError(
                f"{path}: manifest needs columns prompt, path and seed or index; found {sorted(cols)}"
            )
        header = list(rows.fieldnames or [])
        missing_files = []
        end = rows.line_num
        for row in rows:
            line, end = end + 1, rows.line_num  # a quoted field may span lines: the row starts after the last one
            where = f"{path}, line {line}"
            got = [v for k, v in row.items() if k is not None and v is not None] + list(row.get(None) or [])
            if len(got) != len(header):
                raise ValueError(
                    f"{where}: the row has {len(got)} field(s), the header {len(header)} ({', '.join(header)}): {got!r}"
                )
            prompt, written = row["prompt"], row["path"].strip()
            if not prompt.strip():
                raise ValueError(f"{where}: empty prompt")
            if not written:
                raise ValueError(f"{where}: empty path")
            seed_text, index_text = (row.get("seed") or "").strip(), (row.get("index") or "").strip()
            if not seed_text and not index_text:
                raise ValueError(f"{where}: the row has neither a seed nor an index")
            try:
                seed = int(seed_text) if seed_text else None
                index = None if seed_text else int(index_text)
            except ValueError as exc:
                raise ValueError(f"{where}: seed/index must be an integer ({exc})") from None
            if index is not None:
                if index < 0:
                    raise ValueError(f"{where}: index {index} is negative; indices count images from 0")
                seed = seed_for(prompt, index)
            if not 0 <= seed < SEED_RANGE:
                raise ValueError(
                    f"{where}: seed {seed_text} is outside the suite's seeds 0..{SEED_RANGE - 1} (32-bit, see "
                    "t2i_fairness.spine.generation.derive_seed), so no test can ask for it; a spreadsheet may have "
                    "mangled a long number. Give the suite's seed, or the image's index"
                )
            key = (prompt, seed)
            if key in self._rows:
                first = self._rows[key]
                raise ValueError(
                    f"{where}: prompt {prompt!r} with seed {seed} is already listed at line {first.line} "
                    f"({first.written} and {written}); one row per image"
                )
            file = (path.parent / written).resolve()
            if not file.is_file():
                missing_files.append(f"line {line}: {written}")
            elif file.stat().st_size == 0:
                missing_files.append(f"line {line}: {written} (empty file)")
            self._by_key[key] = file
            self._rows[key] = _Row(file, line, written)
        if missing_files:
            shown = "; ".join(missing_files[:5])
            raise ValueError(f"{path}: {len(missing_files)} image file(s) not found: {shown}")
        from t2i_fairness.base.identity import file_digest

        self._digests: dict[tuple[str, int], str] = {}
        for key, row in self._rows.items():
            try:
                self._digests[key] = file_digest(row.file)
            except OSError as exc:
                raise ValueError(f"{path}, line {row.line}: cannot read {row.written} ({exc})") from None
        listing = sorted(f"{p}\0{s}\0{d}\n" for (p, s), d in self._digests.items())
        content = hashlib.sha256("".join(listing).encode("utf-8")).hexdigest()
        self.fingerprint = f"images:{path.parent.name or 'manifest'}@sha256-{content[:16]}"

    DECODE = "rgb8-v1"  # how a file becomes the cached image (to_rgb8); a change here re-reads every file

    def item_key(self, prompt: str, seed: int) -> str | None:
        """The identity of the image listed for (prompt, seed): its file's digest; ``None`` if not listed."""
        digest = self._digests.get((prompt, seed))
        return None if digest is None else f"images:file:sha256-{digest}:{self.DECODE}"

    def check_available(self, prompts: Sequence[str], seeds: Sequence[int]) -> None:
        missing = sorted({p for p, s in zip(prompts, seeds) if (p, s) not in self._by_key})
        if missing:
            shown = ", ".join(repr(p) for p in missing[:10])
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            raise ValueError(
                f"{self.manifest} lacks images for {len(missing)} prompt(s) the suite asks for: {shown}{more}. "
                "Add rows (prompt, index, path), or narrow the run with --t2i-objects / --t2i-images-per-prompt."
            )

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]:
        self.check_available(prompts, seeds)
        return [self._open(self._rows[(p, s)], self._digests.get((p, s))) for p, s in zip(prompts, seeds)]

    def _open(self, row: _Row, digest: str | None = None) -> Image.Image:
        what = f"{self.manifest}, line {row.line}: {row.written} ({row.file})"
        try:
            data = row.file.read_bytes()
        except OSError as exc:
            raise ValueError(f"{what} cannot be read: {exc}") from None
        if digest is not None and hashlib.sha256(data).hexdigest() != digest:
            raise ValueError(f"{what} changed while this run was going on (its digest is not the one the run started "
                             "with); run again once the images are written")
        try:
            im = Image.open(io.BytesIO(data))
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:  # UnidentifiedImageError is an OSError
            raise ValueError(f"{what} is not a readable image: {exc}") from None
        with im:
            frames = getattr(im, "n_frames", 1)
            if frames > 1:
                raise ValueError(
                    f"{what} has {frames} frames ({im.format}); a row is one still image: export the frame "
                    "you mean (e.g. as PNG)"
                )
            try:
                im.load()
            except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
                raise ValueError(f"{what} is not a readable image: {exc}") from None
            return to_rgb8(im, what)
