"""``images:PATH``: pre-generated images (e.g. from a closed API) described by a CSV manifest."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path
from typing import Callable, Sequence

from PIL import Image

MANIFEST_NAMES = ("manifest.csv", "images.csv")


class ManifestGenerator:
    """Serves images listed in a manifest CSV with columns ``prompt``, ``seed`` or ``index``, ``path``.

    A row with ``index`` stands for the image the suite would have made with that index, i.e. the
    seed ``seed_for(prompt, index)``; paths are relative to the manifest's folder.

    Raises:
        ValueError: the manifest is missing, lacks a column, names a missing file, or lacks
            prompts that the suite asks for (listed).
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
        self.fingerprint = f"images:{hashlib.sha256(data).hexdigest()[:16]}"
        self._by_key: dict[tuple[str, int], Path] = {}
        rows = csv.DictReader(data.decode("utf-8-sig").splitlines())
        cols = set(rows.fieldnames or [])
        if not {"prompt", "path"} <= cols or not cols & {"seed", "index"}:
            raise ValueError(
                f"{path}: manifest needs columns prompt, path and seed or index; found {sorted(cols)}"
            )
        missing_files = []
        for line, row in enumerate(rows, start=2):
            file = (path.parent / row["path"]).resolve()
            if not file.exists():
                missing_files.append(f"line {line}: {row['path']}")
            try:
                seed = int(row["seed"]) if row.get("seed") not in (None, "") else seed_for(row["prompt"], int(row["index"]))
            except ValueError as exc:
                raise ValueError(f"{path}, line {line}: seed/index must be an integer ({exc})") from None
            self._by_key[(row["prompt"], seed)] = file
        if missing_files:
            shown = "; ".join(missing_files[:5])
            raise ValueError(f"{path}: {len(missing_files)} image file(s) not found: {shown}")

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
        out = []
        for p, s in zip(prompts, seeds):
            with Image.open(self._by_key[(p, s)]) as im:
                out.append(im.convert("RGB"))
        return out
