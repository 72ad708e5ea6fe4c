"""Components Inclusion Score's options (sample sizes per the smoke and paper presets, the order test and its statistic, FID)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from t2i_fairness.errors import OptionError
from t2i_fairness.spine.options import Option, Values, positive

DEFAULT_KS = (1, 2, 4, 8)
SMOKE_PROMPTS, PAPER_PROMPTS = 4, 10_000  # prompts per K (paper section 6.1: M = 10,000)
SMOKE_IMAGES, PAPER_IMAGES = 2, 16  # images per prompt (paper: N = 16)
PAPER_ORDER_PROMPTS = 1_000  # paper section 8.1: M = 1,000 at K = 8
PAPER_PRESET_GATES = 1_435  # gates of a full paper-preset run (issue #28, measured on main 1938921): its level 0.05 / 1,435
MAX_K = 12  # a table has 2**K entries per prompt
TILE_SIZE = 224
IS_MAX_SPLITS, IS_MIN_PER_SPLIT = 10, 100
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
TEXT_CHUNK = 2048  # texts per CLIP text-encoder call
EXTREMES = 5  # components listed as most ignored / most prominent
ORDER_TESTS = ("position", "paper")  # --t2i-cis-order-test

OPTIONS = (
    Option("--t2i-cis-k", f"CIS: components per prompt, comma-separated (default 1,2,4,8 as the paper; at most {MAX_K})",
           default=",".join(map(str, DEFAULT_KS)), metavar="LIST"),
    Option("--t2i-cis-prompts", "CIS: prompts per K (paper section 6.1: M = 10,000)", smoke=SMOKE_PROMPTS,
           paper=PAPER_PROMPTS, type=int, metavar="M"),
    Option("--t2i-cis-images", "CIS: images per prompt (paper: N = 16)", smoke=SMOKE_IMAGES, paper=PAPER_IMAGES,
           type=int, metavar="N"),
    Option("--t2i-cis-order-prompts", f"CIS order-invariance test: prompts of the largest K that are shuffled "
           f"(default min(M, {PAPER_ORDER_PROMPTS}))", type=int, metavar="M"),
    Option("--t2i-cis-order-test", "CIS order-invariance test statistic: 'position' (default: inclusion by position "
           "within each prompt, with power against an order effect) or 'paper' (section 8.1's chi-square by component); "
           "both get a within-prompt permutation p-value", default="position", choices=ORDER_TESTS),
    Option("--t2i-cis-rate-min-images", "CIS per-component rate floor: only components requested in at least R "
           "images count (default N)", type=int, metavar="R"),
    Option("--t2i-cis-fid-reference", "CIS: real images for FID per K: DIR/k<K>/ subfolders, or one folder for every "
           "K (default: no FID)", metavar="DIR"),
)


@dataclass(frozen=True)
class CisOptions:
    ks: tuple[int, ...] = DEFAULT_KS
    prompts: int = SMOKE_PROMPTS
    images: int = SMOKE_IMAGES
    order_prompts: int = SMOKE_PROMPTS
    rate_min_images: int = SMOKE_IMAGES
    fid_reference: Path | None = None
    order_test: str = "position"

    @property
    def order_k(self) -> int | None:
        """The K of the order-invariance test: the largest K >= 2 (None if there is none)."""
        ks = [k for k in self.ks if k >= 2]
        return max(ks) if ks else None

    @property
    def rate_ks(self) -> tuple[int, ...]:
        """The Ks whose images enter the per-component rates (paper 8.2: K = 2, 4, 8)."""
        return tuple(k for k in self.ks if k >= 2)


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


def resolve(v: Values, core) -> CisOptions:
    """The CIS options of this run; bad values raise :class:`~t2i_fairness.errors.OptionError` naming the option."""
    ks = parse_ks(v("--t2i-cis-k"))
    prompts = positive(v, "--t2i-cis-prompts")
    images = positive(v, "--t2i-cis-images")
    order_prompts = positive(v, "--t2i-cis-order-prompts") if v.given("--t2i-cis-order-prompts") else min(prompts, PAPER_ORDER_PROMPTS)
    rate_min_images = positive(v, "--t2i-cis-rate-min-images") if v.given("--t2i-cis-rate-min-images") else images
    fid = v.raw("--t2i-cis-fid-reference")
    fid_reference = None
    if fid is not None:
        fid_reference = Path(fid).expanduser()
        if not fid_reference.is_absolute():
            fid_reference = v.invocation_dir / fid_reference
        if not fid_reference.is_dir():
            raise OptionError("--t2i-cis-fid-reference", f"{fid!r}: not a folder")
    return CisOptions(ks, prompts, images, order_prompts, rate_min_images, fid_reference, v("--t2i-cis-order-test"))
