"""Components Inclusion Score's options: sample sizes per preset, the order test and its statistic, FID."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from t2i_fairness.errors import OptionError
from t2i_fairness.spine.options import Option, Values, folder, option_fields, options_of, positive, resolve_fields

DEFAULT_KS = (1, 2, 4, 8)
SMOKE_PROMPTS, PAPER_PROMPTS = 4, 10_000  # prompts per K (paper section 6.1: M = 10,000)
SMOKE_IMAGES, PAPER_IMAGES = 2, 16  # images per prompt (paper: N = 16)
PAPER_ORDER_PROMPTS = 1_000  # paper section 8.1: M = 1,000 at K = 8
PAPER_PRESET_GATES = 1_435  # gates of a full paper-preset run: its per-gate level is 0.05 / 1,435
MAX_K = 12  # a table has 2**K entries per prompt
TILE_SIZE = 224
IS_MAX_SPLITS, IS_MIN_PER_SPLIT = 10, 100
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
TEXT_CHUNK = 2048  # texts per CLIP text-encoder call
EXTREMES = 5  # components listed as most ignored / most prominent
ORDER_TESTS = ("position", "paper")  # --t2i-cis-order-test


def parse_ks(text: str) -> tuple[int, ...]:
    """``"1,2,4,8"`` -> ``(1, 2, 4, 8)``; raises :class:`~t2i_fairness.errors.OptionError` naming ``--t2i-cis-k``."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    try:
        ks = [int(t) for t in items]
    except ValueError:
        raise OptionError("--t2i-cis-k", f"{text!r}: expected comma-separated integers, e.g. 1,2,4,8") from None
    if not ks:
        raise OptionError("--t2i-cis-k", f"{text!r}: name at least one K, e.g. 1,2,4,8")
    bad = [k for k in ks if not 1 <= k <= MAX_K]
    if bad:
        raise OptionError(
            "--t2i-cis-k", f"{text!r}: K must be between 1 and {MAX_K} (a prompt's table has 2**K entries), got {bad}"
        )
    if len(set(ks)) != len(ks):
        raise OptionError("--t2i-cis-k", f"{text!r}: a K is repeated")
    return tuple(sorted(ks))


COMPONENT_DRAW_SEED = 0  # --t2i-cis-components N: the same N names in every run, whatever --t2i-seed


def parse_components(v: Values, flag: str) -> tuple[str, ...] | None:
    """``--t2i-cis-components``: ``None`` (the paper's 998 ImageNet names), ``N`` of them (one fixed seeded draw, in
    the names' file order) or the names of a text file (one a line; ``#`` comments), at least the largest K."""
    import numpy as np

    from t2i_fairness.metrics.cis import imagenet_classnames

    raw = v.raw(flag)
    if raw is None:
        return None
    text, largest = str(raw).strip(), max(parse_ks(v("--t2i-cis-k")))
    every = imagenet_classnames()
    if text.isdigit():
        n = int(text)
        if not largest <= n <= len(every):
            raise OptionError(flag, f"{text}: a number of the ImageNet names must be between the largest K "
                                    f"({largest}) and {len(every)}")
        picked = np.random.default_rng(COMPONENT_DRAW_SEED).choice(len(every), size=n, replace=False)
        return tuple(every[i] for i in sorted(int(i) for i in picked))
    path = Path(text).expanduser()
    path = path if path.is_absolute() else v.invocation_dir / path
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionError(flag, f"{text!r}: neither a number of ImageNet names nor a readable text file "
                                f"({type(exc).__name__})") from None
    names = tuple(dict.fromkeys(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")))
    bad = [name for name in names if "," in name]
    if bad:
        raise OptionError(flag, f"{path}: a component name cannot hold a comma (prompts list components with "
                                f"commas): {bad[0]!r}")
    if len(names) < largest:
        raise OptionError(flag, f"{path}: {len(names)} distinct names; a prompt of K = {largest} needs at least "
                                f"{largest}")
    return names


def components_label(components: tuple[str, ...] | None) -> str:
    """The provenance's name of a component vocabulary: the paper's, or its size and digest."""
    if components is None:
        return "imagenet-cis-prototype"
    import hashlib

    return f"{len(components)} names sha256:{hashlib.sha256(chr(10).join(components).encode()).hexdigest()[:12]}"


_prompts = partial(positive, flag="--t2i-cis-prompts")
_images = partial(positive, flag="--t2i-cis-images")


@dataclass(frozen=True)
@option_fields
class CisOptions:
    """The family's options of a run: one field per option; defaults are an empty command line's."""

    ks: tuple[int, ...] = Option(
        "--t2i-cis-k", f"CIS: components per prompt, comma-separated (default 1,2,4,8 as the paper; at most {MAX_K})",
        default=",".join(map(str, DEFAULT_KS)), metavar="LIST", check=lambda v, flag: parse_ks(v(flag)))
    prompts: int = Option("--t2i-cis-prompts", "CIS: prompts per K (paper section 6.1: M = 10,000)",
                          smoke=SMOKE_PROMPTS, paper=PAPER_PROMPTS, type=int, metavar="M", check=positive)
    images: int = Option("--t2i-cis-images", "CIS: images per prompt (paper: N = 16)", smoke=SMOKE_IMAGES,
                         paper=PAPER_IMAGES, type=int, metavar="N", check=positive)
    order_prompts: int = Option(
        "--t2i-cis-order-prompts", f"CIS order-invariance test: prompts of the largest K that are shuffled "
        f"(default min(M, {PAPER_ORDER_PROMPTS}))", type=int, metavar="M",
        check=lambda v, flag: positive(v, flag) if v.given(flag) else min(_prompts(v), PAPER_ORDER_PROMPTS))
    order_test: str = Option(
        "--t2i-cis-order-test", "CIS order-invariance test statistic: 'position' (default: inclusion by position "
        "within each prompt, with power against an order effect) or 'paper' (section 8.1's chi-square by component); "
        "both get a within-prompt permutation p-value", default="position", choices=ORDER_TESTS)
    rate_min_images: int = Option(
        "--t2i-cis-rate-min-images", "CIS per-component rate floor: only components requested in at least R "
        "images count (default N)", type=int, metavar="R",
        check=lambda v, flag: positive(v, flag) if v.given(flag) else _images(v))
    components: tuple[str, ...] | None = Option(
        "--t2i-cis-components", "CIS: the names prompts draw their components from: N (N of the paper's 998 ImageNet "
        "names, one fixed draw: the same names in every run) or a text file, one name a line (default: all 998, as "
        "the paper); fewer names put each in more prompts, so a component's own gates can see it", metavar="N|FILE",
        check=parse_components)
    fid_reference: Path | None = Option(
        "--t2i-cis-fid-reference", "CIS: real images for FID per K: DIR/k<K>/ subfolders, or one folder for every "
        "K (default: no FID)", metavar="DIR", check=folder)

    @property
    def order_k(self) -> int | None:
        """The K of the order-invariance test: the largest K >= 2 (None if there is none)."""
        ks = [k for k in self.ks if k >= 2]
        return max(ks) if ks else None

    @property
    def rate_ks(self) -> tuple[int, ...]:
        """The Ks whose images enter the per-component rates (paper 8.2: K = 2, 4, 8)."""
        return tuple(k for k in self.ks if k >= 2)


OPTIONS = options_of(CisOptions)


def resolve(v: Values, core) -> CisOptions:
    """The CIS options of this run; bad values raise :class:`~t2i_fairness.errors.OptionError` naming the option."""
    return CisOptions(**resolve_fields(CisOptions, v))
