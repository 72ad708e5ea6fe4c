"""The plugin's command-line options, resolved once into a plain dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from t2i_fairness.vocab.geode import GEODE_OBJECTS

# The smoke preset keeps the tiny default fast enough for CI; real models default to the paper's scale.
SMOKE_OBJECTS = ("bag", "car", "cooking_pot", "dog", "stove", "tree")
SMOKE_IMAGES_PER_PROMPT = 6
PAPER_IMAGES_PER_PROMPT = 60


@dataclass(frozen=True)
class T2IOptions:
    model: str = "tiny"
    scorers: str = "tiny"
    device: str = "auto"  # resolved by the workbench, so collection never imports torch
    objects: tuple[str, ...] = SMOKE_OBJECTS
    images_per_prompt: int = SMOKE_IMAGES_PER_PROMPT
    seed: int = 0
    batch_size: int | None = None
    steps: int | None = None
    guidance: float | None = None
    height: int | None = None
    width: int | None = None
    cache_dir: Path | str = Path(".t2i-cache")  # a folder, or an fsspec URL of a shared store
    cache_mirror: Path = Path(".t2i-cache-mirror")  # local tier in front of an fsspec URL
    thresholds: Path = Path("thresholds/tiny.yaml")
    update_thresholds: bool = False
    allow_loosen: bool = False
    references: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    progress: bool = True
    artifacts: Path = Path("t2i-artifacts")
    nearest_k: int = 3
    gate_mode: str = "point"
    baseline_model: str | None = None
    baseline_delta: float = 0.0
    baseline_seed: int | None = None
    bootstrap: int = 200
    confidence: float = 0.95
    dedupe: str = "drop_all"
    report: Path | None = None


def add_options(parser) -> None:
    group = parser.getgroup("t2i-fairness", "text-to-image fairness gates")
    add = group.addoption
    add("--t2i-model", default="tiny", metavar="SPEC",
        help="model under test: 'tiny' (built-in random smoke model, default), a diffusers hub id or local "
             "folder, images:MANIFEST.csv (pre-generated images) or python:module:factory")
    add("--t2i-scorers", default="tiny", choices=("tiny", "paper"),
        help="scorer models: 'paper' loads what the papers used (e.g. OpenAI CLIP ViT-B/32); "
             "'tiny' builds the same classes offline with random weights (default)")
    add("--t2i-device", default="auto", metavar="DEVICE", help="cpu, cuda, cuda:N or auto (default: cuda if available)")
    add("--t2i-objects", default=None, metavar="LIST",
        help="comma-separated GeoDE objects or 'all' (default: 6 smoke objects for tiny, all 27 otherwise)")
    add("--t2i-images-per-prompt", type=int, default=None, metavar="N",
        help=f"images per prompt (default: {SMOKE_IMAGES_PER_PROMPT} for tiny, {PAPER_IMAGES_PER_PROMPT} otherwise; "
             "{object} in {country} prompts get N/3 each so every object-region has N)")
    add("--t2i-seed", type=int, default=0, metavar="INT", help="base seed; every image seed derives from it, the prompt and the image index")
    add("--t2i-batch-size", type=int, default=None, metavar="N", help="generation batch size (default: the model's)")
    add("--t2i-steps", type=int, default=None, metavar="N", help="denoising steps (default: 4 for tiny, 50 otherwise)")
    add("--t2i-guidance", type=float, default=None, metavar="X", help="classifier-free guidance scale (default 7)")
    add("--t2i-height", type=int, default=None, metavar="PX", help="image height (default: 64 for tiny, 512 otherwise)")
    add("--t2i-width", type=int, default=None, metavar="PX", help="image width (default: 64 for tiny, 512 otherwise)")
    add("--t2i-cache-dir", default=None, metavar="DIR",
        help="image/feature cache (default: .t2i-cache in the rootdir); an fsspec URL (s3://, gs://, file://, memory://) "
             "shares one cache across machines through a local mirror")
    add("--t2i-thresholds", default=None, metavar="FILE", help="thresholds YAML (default: thresholds/<model-slug>.yaml in the rootdir)")
    add("--t2i-update-thresholds", action="store_true", help="write measured values as the new bounds and report every change")
    add("--t2i-allow-loosen", action="store_true", help="with --t2i-update-thresholds, allow lowering a min or raising a max")
    add("--t2i-reference", action="append", default=[], metavar="NAME=PATH",
        help="a real reference data set (GeoDE folder, DollarStreet CSV, or manifest CSV); repeatable")
    add("--t2i-gate", default="point", choices=("point", "significant"),
        help="point: fail when the estimate misses the bound (default); significant: fail only when the "
             "whole confidence interval misses it")
    add("--t2i-baseline-model", default=None, metavar="SPEC",
        help="also run the same prompts and seeds through this model and gate candidate >= baseline - delta "
             "(paired bootstrap interval on the difference)")
    add("--t2i-baseline-seed", type=int, default=None, metavar="INT",
        help="base seed of the baseline run (default: --t2i-seed); e.g. tiny vs tiny with another seed is a null comparison")
    add("--t2i-baseline-delta", type=float, default=0.0, metavar="X",
        help="how much worse than the baseline a gate may be (default 0)")
    add("--t2i-bootstrap", type=int, default=200, metavar="B",
        help="bootstrap resamples for confidence intervals (default 200; 0 turns intervals off)")
    add("--t2i-confidence", type=float, default=0.95, metavar="X", help="confidence level of intervals (default 0.95)")
    add("--t2i-nearest-k", type=int, default=3, metavar="K",
        help="k of the k-NN manifold for precision and coverage (default 3, as DIG In and Decomposed-DIG)")
    add("--t2i-dedupe", default="drop_all", choices=("none", "keep_one", "drop_all"),
        help="duplicated feature vectors before precision/coverage: DIG In's code drops every copy (drop_all, default)")
    add("--t2i-artifacts", default=None, metavar="DIR",
        help="where gates write JSON, plots and image grids (default: t2i-artifacts in the rootdir)")
    add("--t2i-report", default=None, metavar="DIR",
        help="write a self-contained HTML report (gate table, plots, images inline) to DIR/index.html")
    add("--t2i-no-progress", action="store_true", help="no progress bars")


def resolve_options(config) -> T2IOptions:
    """Turn the parsed options into :class:`T2IOptions`; bad values raise ``pytest.UsageError`` naming the option."""
    import pytest

    from t2i_fairness.generators import model_slug

    get = config.getoption
    rootdir = Path(config.rootpath)
    model = get("--t2i-model")
    tiny = model == "tiny"
    objects_opt = get("--t2i-objects")
    if objects_opt is None:
        objects = SMOKE_OBJECTS if tiny else tuple(GEODE_OBJECTS)
    elif objects_opt.strip() == "all":
        objects = tuple(GEODE_OBJECTS)
    else:
        objects = tuple(o.strip() for o in objects_opt.split(",") if o.strip())
        unknown = [o for o in objects if o not in GEODE_OBJECTS]
        if unknown or not objects:
            raise pytest.UsageError(f"--t2i-objects: unknown object(s) {unknown}; choose from {', '.join(GEODE_OBJECTS)} or 'all'")
    n = get("--t2i-images-per-prompt")
    if n is None:
        n = SMOKE_IMAGES_PER_PROMPT if tiny else PAPER_IMAGES_PER_PROMPT
    if n < 1:
        raise pytest.UsageError(f"--t2i-images-per-prompt must be >= 1, got {n}")
    for opt in ("--t2i-batch-size", "--t2i-steps", "--t2i-height", "--t2i-width"):
        if get(opt) is not None and get(opt) < 1:
            raise pytest.UsageError(f"{opt} must be >= 1, got {get(opt)}")
    if get("--t2i-allow-loosen") and not get("--t2i-update-thresholds"):
        raise pytest.UsageError("--t2i-allow-loosen only makes sense with --t2i-update-thresholds")
    if get("--t2i-baseline-seed") is not None and not get("--t2i-baseline-model"):
        raise pytest.UsageError("--t2i-baseline-seed only makes sense with --t2i-baseline-model")
    device = get("--t2i-device")
    if not (device == "auto" or device == "cpu" or device == "mps" or device == "cuda" or device.startswith("cuda:")):
        raise pytest.UsageError(f"--t2i-device {device!r}: choose cpu, cuda, cuda:N, mps or auto")
    refs = []
    for item in get("--t2i-reference"):
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise pytest.UsageError(f"--t2i-reference {item!r}: expected NAME=PATH, e.g. geode=/data/geode")
        refs.append((name, path))
    raw_cache = get("--t2i-cache-dir")
    cache_dir = raw_cache if raw_cache and "://" in raw_cache else Path(raw_cache or rootdir / ".t2i-cache")
    thresholds = Path(get("--t2i-thresholds") or rootdir / "thresholds" / f"{model_slug(model)}.yaml")
    return T2IOptions(
        model=model, scorers=get("--t2i-scorers"), device=device, objects=objects, images_per_prompt=n,
        seed=get("--t2i-seed"), batch_size=get("--t2i-batch-size"), steps=get("--t2i-steps"),
        guidance=get("--t2i-guidance"), height=get("--t2i-height"), width=get("--t2i-width"),
        cache_dir=cache_dir, cache_mirror=rootdir / ".t2i-cache-mirror", thresholds=thresholds, update_thresholds=get("--t2i-update-thresholds"),
        allow_loosen=get("--t2i-allow-loosen"), references=tuple(refs), progress=not get("--t2i-no-progress"),
        artifacts=Path(get("--t2i-artifacts") or rootdir / "t2i-artifacts"),
        nearest_k=_at_least(get("--t2i-nearest-k"), 1, "--t2i-nearest-k"), dedupe=get("--t2i-dedupe"),
        gate_mode=get("--t2i-gate"), baseline_model=get("--t2i-baseline-model"), baseline_seed=get("--t2i-baseline-seed"),
        baseline_delta=_at_least_float(get("--t2i-baseline-delta"), 0.0, "--t2i-baseline-delta"), bootstrap=_at_least(get("--t2i-bootstrap"), 0, "--t2i-bootstrap"),
        confidence=_confidence(get("--t2i-confidence")),
        report=Path(get("--t2i-report")) if get("--t2i-report") else None,
    )


def _at_least(value: int, low: int, option: str) -> int:
    import pytest

    if value < low:
        raise pytest.UsageError(f"{option} must be >= {low}, got {value}")
    return value


def _at_least_float(value: float, low: float, option: str) -> float:
    import pytest

    if not value >= low:
        raise pytest.UsageError(f"{option} must be >= {low}, got {value}")
    return value


def _confidence(value: float) -> float:
    import pytest

    if not 0.0 < value < 1.0:
        raise pytest.UsageError(f"--t2i-confidence must be between 0 and 1, got {value}")
    return value


def resolve_device(device: str) -> str:
    return ("cuda" if _cuda_available() else "cpu") if device == "auto" else device


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()
