"""Every ``--t2i-*`` option, declared once as an :class:`Option` and resolved in one pass into one frozen object.

A default may depend on the run's **preset** (``smoke`` for the built-in models, ``paper`` for any
other; ``--t2i-preset`` overrides). The fields of :class:`T2IOptions` are the core options
themselves; :func:`resolve_options` adds each family's options, and docs/options.md's tables are
generated from the records. Bad values raise :class:`~t2i_fairness.errors.OptionError`.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from t2i_fairness.errors import OptionError
from t2i_fairness.vocab.geode import GEODE_OBJECTS

PRESETS = ("smoke", "paper")
_UNSET = object()

DEFAULT_MODEL = "tiny"
SMOKE_OBJECTS = ("bag", "car", "cooking_pot", "dog", "stove", "tree")
SMOKE_MODELS = ("tiny", "procedural")  # the built-in models: the smoke preset by default
SMOKE_IMAGES_PER_PROMPT = 6
PAPER_IMAGES_PER_PROMPT = 60


@dataclass(frozen=True)
class Option:
    """One command-line option; in the class body of an options dataclass, also the field it sets.

    Args:
        help: what it does (the preset defaults are appended).
        smoke, paper: the default under each preset (declare both or neither).
        shown: how the preset table shows a default that is a rule rather than a value.
        check: ``check(values, flag) -> value``: validates and converts the value (given or default),
            raising :class:`~t2i_fairness.errors.OptionError`.
    """

    flag: str
    help: str
    default: Any = None
    smoke: Any = _UNSET
    paper: Any = _UNSET
    type: Callable[[str], Any] | None = None
    choices: Sequence[str] | None = None
    action: str | None = None
    metavar: str | None = None
    shown: Mapping[str, str] | None = None
    check: Callable[[Values, str], Any] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.flag.startswith("--t2i-"):
            raise ValueError(f"option flags start with --t2i-, got {self.flag!r}")
        if (self.smoke is _UNSET) != (self.paper is _UNSET):
            raise ValueError(f"{self.flag}: declare both smoke and paper defaults, or neither")

    @property
    def dest(self) -> str:
        """``--t2i-cis-k`` -> ``t2i_cis_k`` (argparse's attribute name)."""
        return self.flag[2:].replace("-", "_")

    @property
    def has_presets(self) -> bool:
        return self.smoke is not _UNSET

    def preset_default(self, preset: str) -> Any:
        if not self.has_presets:
            return self.default
        return self.smoke if preset == "smoke" else self.paper

    def value(self, v: Values) -> Any:
        """The option's resolved value: :attr:`check`'s, or the value (given or default) as it is."""
        if self.check is not None:
            return self.check(v, self.flag)
        return bool(v(self.flag)) if self.action == "store_true" else v(self.flag)

    def addoption_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``parser.addoption``; preset-dependent options register ``default=None``
        so the resolver can tell an explicit value from a preset default.
        """
        kwargs: dict[str, Any] = {"help": self.help_text(), "dest": self.dest}
        if self.action == "store_true":
            kwargs.update(action="store_true", default=False)
            return kwargs
        if self.action == "append":
            kwargs.update(action="append", default=[])
        else:
            kwargs["default"] = None if self.has_presets else self.default
        if self.type is not None:
            kwargs["type"] = self.type
        if self.choices is not None:
            kwargs["choices"] = tuple(self.choices)
        if self.metavar is not None:
            kwargs["metavar"] = self.metavar
        return kwargs

    def help_text(self) -> str:
        if not self.has_presets:
            return self.help
        return f"{self.help} (default: {self.show('smoke')} with the smoke preset, {self.show('paper')} with paper)"

    def show(self, preset: str) -> str:
        if self.shown and preset in self.shown:
            return self.shown[preset]
        value = self.preset_default(preset)
        if isinstance(value, (tuple, list)):
            return ",".join(map(str, value))
        return str(value)


class Values:
    """What a resolver reads: a flag's explicit value, or its default under the run's preset.

    Args:
        get: the raw parsed value of a flag; ``None`` (or ``[]``/``False`` for append/store_true) means
            "not given".
        rootdir: where relative defaults (cache, thresholds, artifacts) live.
        invocation_dir: where relative paths given on the command line are read from.

    Example:
        >>> v = Values({"--t2i-images-per-prompt": None}.get, CORE_OPTIONS, "paper")
        >>> v("--t2i-images-per-prompt"), v.given("--t2i-images-per-prompt")
        (60, False)
    """

    def __init__(self, get: Callable[[str], Any], options: Iterable[Option], preset: str,
                 rootdir: Path | str = ".", invocation_dir: Path | str = "."):
        self._get = get
        self._options = {o.flag: o for o in options}
        self.preset = preset
        self.rootdir = Path(rootdir)
        self.invocation_dir = Path(invocation_dir)

    def raw(self, flag: str) -> Any:
        return self._get(flag)

    def given(self, flag: str) -> bool:
        value = self._get(flag)
        return value is not None and value is not False and value != []

    def set_apart(self, flag: str) -> bool:
        """Whether the flag holds a value other than its default (argparse may hand the default as given)."""
        option = self._options.get(flag)
        return self.given(flag) and (option is None or self._get(flag) != option.preset_default(self.preset))

    def __call__(self, flag: str) -> Any:
        if self.given(flag):
            return self._get(flag)
        option = self._options.get(flag)
        if option is None:
            return self._get(flag)
        return option.preset_default(self.preset)


def add_options(addoption: Callable[..., Any], options: Iterable[Option]) -> None:
    """Register ``options`` with ``addoption`` (pytest's ``group.addoption`` or argparse's ``add_argument``)."""
    for o in options:
        addoption(o.flag, **o.addoption_kwargs())


def preset_of(model: str, preset: str = "auto") -> str:
    """``smoke`` for the built-in models, ``paper`` for every other, unless ``--t2i-preset`` says.

    Example:
        >>> preset_of("tiny"), preset_of("org/sd-2"), preset_of("org/sd-2", "smoke")
        ('smoke', 'paper', 'smoke')
    """
    if preset in PRESETS:
        return preset
    if preset != "auto":
        raise OptionError("--t2i-preset", f"choose from {['auto', *PRESETS]}, got {preset!r}")
    return "smoke" if model in SMOKE_MODELS else "paper"


DEFAULT_PRESET = preset_of(DEFAULT_MODEL)


def preset_table(options: Iterable[Option]) -> list[tuple[str, str, str]]:
    """``(flag, smoke default, paper default)`` for every option whose default depends on the preset.

    Example:
        >>> [row for row in preset_table(CORE_OPTIONS) if row[0] == "--t2i-images-per-prompt"]
        [('--t2i-images-per-prompt', '6', '60')]
    """
    return [(o.flag, o.show("smoke"), o.show("paper")) for o in options if o.has_presets]


# ------------------------------------------------------------------------------------- options dataclasses


@dataclass(frozen=True)
class Derived:
    """A field computed from the options rather than set by one (:func:`derived`)."""

    rule: Callable[[Values], Any]

    def value(self, v: Values) -> Any:
        return self.rule(v)


def derived(rule: Callable[[Values], Any]) -> Any:
    """Declare a field of an options dataclass whose value ``rule(values)`` computes from the options."""
    return Derived(rule)


def option_fields(cls: type) -> type:
    """Class decorator, under ``@dataclass``: each :class:`Option` or :func:`derived` attribute becomes a field
    whose default is what an empty command line resolves to (the default model's preset, the rootdir ``.``).

    Example:
        >>> @dataclass(frozen=True)
        ... @option_fields
        ... class Demo:
        ...     n: int = Option("--t2i-demo-n", "how many", smoke=2, paper=20, type=int, check=positive)
        ...     twice: int = derived(lambda v: 2 * v("--t2i-demo-n"))
        >>> Demo(), [o.flag for o in options_of(Demo)]
        (Demo(n=2, twice=4), ['--t2i-demo-n'])
        >>> Demo(**resolve_fields(Demo, Values({"--t2i-demo-n": 5}.get, options_of(Demo), "paper")))
        Demo(n=5, twice=10)
    """
    rules = {name: rule for name, rule in vars(cls).items() if isinstance(rule, (Option, Derived))}
    empty = Values(lambda flag: None, [r for r in rules.values() if isinstance(r, Option)], DEFAULT_PRESET)
    for name, rule in rules.items():
        setattr(cls, name, field(default=rule.value(empty), metadata={"rule": rule}))
    return cls


def options_of(cls: type) -> tuple[Option, ...]:
    """The :class:`Option` records that declare an options dataclass's fields, in field order."""
    return tuple(f.metadata["rule"] for f in fields(cls) if isinstance(f.metadata.get("rule"), Option))


def resolve_fields(cls: type, v: Values) -> dict[str, Any]:
    """The value of every declared field of ``cls``, by name, in field order."""
    return {f.name: f.metadata["rule"].value(v) for f in fields(cls) if "rule" in f.metadata}


# ------------------------------------------------------------------------------------- checks


def positive(v: Values, flag: str, minimum: int = 1) -> int | None:
    """The flag's value (explicit or preset) checked ``>= minimum``; ``None`` stays ``None``."""
    value = v(flag)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise OptionError(flag, f"must be >= {minimum}, got {value!r}")
    return value


MAX_SEED = 2**32 - 1


def base_seed(v: Values, flag: str) -> int | None:
    """A base seed: an unsigned 32-bit integer, as every image's own seed; ``None`` stays ``None``.

    Example:
        >>> base_seed(lambda flag: -1, "--t2i-seed")
        Traceback (most recent call last):
        ...
        t2i_fairness.errors.OptionError: --t2i-seed: must be an integer in 0..4294967295 (an unsigned 32-bit seed), got -1
    """
    value = v(flag)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise OptionError(flag, f"must be an integer in 0..{MAX_SEED} (an unsigned 32-bit seed), got {value!r}")
    return value


def finite(v: Values, flag: str, low: float | None = None, high: float | None = None,
           open_low: bool = False, open_high: bool = False) -> float | None:
    """The flag's float value, finite and within the given range (``nan`` and ``inf`` are refused)."""
    value = v(flag)
    if value is None:
        return None
    value = float(value)
    ok = math.isfinite(value)
    if ok and low is not None:
        ok = value > low if open_low else value >= low
    if ok and high is not None:
        ok = value < high if open_high else value <= high
    if not ok:
        lo = "" if low is None else f"{'>' if open_low else '>='} {low:g}"
        hi = "" if high is None else f"{'<' if open_high else '<='} {high:g}"
        what = " and ".join(x for x in (lo, hi) if x) or "finite"
        raise OptionError(flag, f"must be a finite number {what}, got {value!r}")
    return value


def folder(v: Values, flag: str, noun: str = "folder") -> Path | None:
    """An existing folder given on the command line (relative to where pytest was invoked); ``None`` stays ``None``."""
    raw = v.raw(flag)
    if raw is None:
        return None
    path = Path(raw).expanduser()
    path = path if path.is_absolute() else v.invocation_dir / path
    if not path.is_dir():
        raise OptionError(flag, f"{raw!r}: not a {noun}")
    return path


def comma_list(text: str, flag: str, *, choices: Sequence[str] | None = None, all_value: str | None = None,
               what: str = "item") -> tuple[str, ...]:
    """``"a,b"`` -> ``("a", "b")``: empty, repeated and (with ``choices``) unknown items are errors.

    Example:
        >>> comma_list("bag, car", "--t2i-objects", choices=["bag", "car", "dog"])
        ('bag', 'car')
        >>> comma_list("bag,bag", "--t2i-objects")
        Traceback (most recent call last):
        ...
        t2i_fairness.errors.OptionError: --t2i-objects: 'bag' is given twice
    """
    if all_value is not None and text.strip() == all_value and choices is not None:
        return tuple(choices)
    items = tuple(t.strip() for t in str(text).split(",") if t.strip())
    if not items:
        raise OptionError(flag, f"name at least one {what}, got {text!r}")
    seen = set()
    for item in items:
        if item in seen:
            raise OptionError(flag, f"{item!r} is given twice")
        seen.add(item)
    if choices is not None:
        unknown = [i for i in items if i not in choices]
        if unknown:
            extra = f" or {all_value!r}" if all_value else ""
            raise OptionError(flag, f"unknown {what}(s) {unknown}; choose from {', '.join(choices)}{extra}")
    return items


def balance_size(value: Any, flag: str = "--t2i-balance-per-group") -> int | None:
    """``"180"`` -> 180, ``"smallest"`` -> ``None`` (balance to the smallest group).

    Example:
        >>> balance_size("180"), balance_size("smallest")
        (180, None)
    """
    text = str(value).strip()
    if text == "smallest":
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise OptionError(flag, f"must be a positive integer or 'smallest', got {value!r}")
    return n


# ------------------------------------------------------------------------------------- the core options


def _revision(v: Values, flag: str) -> str | None:
    from t2i_fairness.generators import check_revision

    revision = v.raw(flag)
    if revision is None:
        return None
    revision = str(revision).strip()
    if not revision or any(c.isspace() for c in revision):
        raise OptionError(flag, f"expected a branch, tag or commit, got {v.raw(flag)!r}")
    check_revision(v("--t2i-model"), revision)
    return revision


def _device(v: Values, flag: str) -> str:
    device = v(flag)  # the request; base.devices.RunContext.decide decides it once per run
    if not (device in ("auto", "cpu", "mps", "cuda") or (device.startswith("cuda:") and device[5:].isdigit())):
        raise OptionError(flag, f"{device!r}: choose cpu, cuda, cuda:N, mps or auto")
    return device


def _procedural_miss(v: Values, flag: str) -> str:
    """The miss rates, canonical (``name=rate`` sorted); only with ``--t2i-scorers procedural``."""
    spec = v(flag) or ""
    if spec and v("--t2i-scorers") != "procedural":
        raise OptionError(flag, "sets the procedural scorers' errors: add --t2i-scorers procedural")
    from t2i_fairness.generators.procedural_scorer import parse_miss

    try:
        rates = parse_miss(spec, flag)
    except ValueError as exc:
        raise OptionError(flag, str(exc).removeprefix(flag + ": ")) from None
    return ",".join(f"{name}={rate:g}" for name, rate in sorted(rates.items()))


def _objects(v: Values, flag: str) -> tuple[str, ...]:
    if v.raw(flag) is None:
        return tuple(v(flag))
    return comma_list(v.raw(flag), flag, choices=tuple(GEODE_OBJECTS), all_value="all", what="object")


def _synthetic_size(v: Values, flag: str) -> Any:
    """``--t2i-synthetic-per-group`` / ``--t2i-synthetic-regions``: the built-in set's size (no ``--t2i-reference``)."""
    if v.set_apart(flag) and v.raw("--t2i-reference"):
        raise OptionError(flag, "sizes the built-in synthetic reference set, which a run with --t2i-reference does "
                                "not use")
    if flag == "--t2i-synthetic-per-group":
        return positive(v, flag)
    from t2i_fairness.vocab.geode import GEODE_REGIONS

    slugs = tuple(r.slug for r in GEODE_REGIONS)
    raw = v.raw(flag)
    return slugs if raw is None else comma_list(raw, flag, choices=slugs, all_value="all", what="region")


def _cache_dir(v: Values, flag: str) -> Path | str:
    raw = v.raw(flag)  # a folder, or the fsspec URL of a shared store
    return raw if raw and "://" in raw else Path(raw or v.rootdir / ".t2i-cache")


def _thresholds(v: Values, flag: str) -> Path:
    from t2i_fairness.generators import model_slug

    return Path(v.raw(flag) or v.rootdir / "thresholds" / f"{model_slug(v('--t2i-model'))}.yaml")


def _allow_loosen(v: Values, flag: str) -> bool:
    if v(flag) and not v("--t2i-update-thresholds"):
        raise OptionError(flag, "only makes sense with --t2i-update-thresholds")
    return bool(v(flag))


def _references(v: Values, flag: str) -> tuple[tuple[str, str], ...]:
    refs: list[tuple[str, str]] = []
    for item in v.raw(flag) or ():
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise OptionError(flag, f"{item!r}: expected NAME=PATH, e.g. geode=/data/geode")
        if any(name == n for n, _ in refs):
            raise OptionError(flag, f"the name {name!r} is given twice ({dict(refs)[name]!r} and {path!r})")
        refs.append((name, path))
    return tuple(refs)


def _baseline_seed(v: Values, flag: str) -> int | None:
    if v.given(flag) and not v("--t2i-baseline-model"):
        raise OptionError(flag, "only makes sense with --t2i-baseline-model")
    return base_seed(v, flag)


def _history(v: Values, flag: str) -> Path | None:
    if v(flag) and v("--t2i-no-history"):
        raise OptionError("--t2i-no-history", f"cannot be combined with {flag}; choose one")
    if v("--t2i-no-history"):
        return None
    if v.raw(flag):
        path = Path(v.raw(flag)).expanduser()
        return path if path.is_absolute() else v.invocation_dir / path
    artifacts = Path(v.raw("--t2i-artifacts") or v.rootdir / "t2i-artifacts")
    return artifacts.parent / "t2i-history.sqlite"


def _mlflow(v: Values, flag: str) -> str | None:
    import os

    uri = v.raw(flag) or os.environ.get("MLFLOW_TRACKING_URI") or None
    if uri is not None and not str(uri).strip():
        raise OptionError(flag, "expected a tracking URI (file:, sqlite:, http(s):) or 'off', got an empty value")
    return None if uri is None or str(uri).strip() == "off" else str(uri).strip()


#: what needs a fixed-N run: flag -> why (a ``--t2i-sequential`` run refuses them; the paper preset's default yields)
FIXED_N_NEEDS = (("--t2i-update-thresholds", "bounds are written from fixed-N measurements"),
                 ("--t2i-baseline-model", "the paired baseline comparison is a fixed-N test"),
                 ("--t2i-plan-samples", "it sizes a fixed-N run"),
                 ("--t2i-audit", "the labels audit the fixed-N run's images"))


def _audit_labels(v: Values, flag: str):
    """``--t2i-audit``'s labels, read and checked against the run's seed (``None`` without the option)."""
    path = v.raw(flag)
    if not path:
        return None
    from t2i_fairness.audit.labels import LabelsError, read_labels

    try:
        return read_labels(Path(path), v("--t2i-seed"))
    except LabelsError as exc:
        raise OptionError(flag, str(exc)) from None


def sequential_design(v: Values) -> tuple[bool, str]:
    """Whether the run decides in rounds (``--t2i-sequential``) and the design's line for the header.

    On by default under the paper preset; the default yields to an option that needs a fixed-N run
    (:data:`FIXED_N_NEEDS`), while an explicit ``--t2i-sequential`` refuses it.

    Raises:
        OptionError: ``--t2i-sequential`` with ``--t2i-fixed-n``, or with an option that needs fixed N.

    Example:
        >>> paper = lambda **raw: Values({f"--t2i-{k.replace('_', '-')}": x for k, x in raw.items()}.get, CORE_OPTIONS, "paper")
        >>> sequential_design(paper(update_thresholds=True))
        (False, 'fixed N: --t2i-update-thresholds (bounds are written from fixed-N measurements)')
    """
    explicit = v.given("--t2i-sequential")
    if explicit and v("--t2i-fixed-n"):
        raise OptionError("--t2i-fixed-n", "cannot be combined with --t2i-sequential; choose one design")
    if v("--t2i-fixed-n"):
        return False, "fixed N (--t2i-fixed-n)"
    if not v("--t2i-sequential"):
        return False, f"fixed N (the {v.preset} preset's design; --t2i-sequential decides in rounds)"
    needs = [(flag, why) for flag, why in FIXED_N_NEEDS if v(flag)]
    if v("--t2i-gate") == "point":
        needs.append(("--t2i-gate point", "a point verdict has no error rate to keep across rounds"))
    if needs and explicit:
        flag, why = needs[0]
        if flag == "--t2i-gate point":
            raise OptionError("--t2i-sequential", f"needs --t2i-gate significant ({why})")
        raise OptionError("--t2i-sequential", f"cannot be combined with {flag} ({why}); run without one of them")
    if needs:
        return False, "fixed N: " + "; ".join(f"{flag} ({why})" for flag, why in needs)
    return True, ("sequential (--t2i-sequential)" if explicit else
                  f"sequential (the {v.preset} preset's default; --t2i-fixed-n decides every gate at N)")




@dataclass(frozen=True)
@option_fields
class T2IOptions:
    """The run's options: one field per core option (declared by its :class:`Option`), the few values derived
    from them, and ``families[name]`` for each family's own. Defaults are an empty command line's (rootdir ``.``).
    """

    model: str = Option("--t2i-model", "model under test: 'tiny' (built-in random smoke model, default), "
        "'sd15-random' (SD 1.5's sizes with seeded random weights: the paper path offline), a diffusers hub id or "
        "local folder, images:MANIFEST.csv (pre-generated images) or python:module:factory", default="tiny",
        metavar="SPEC")
    model_revision: str | None = Option("--t2i-model-revision", "for a hub id: the branch, tag or commit to load "
        "(default: main, resolved to its commit when the run starts; the commit is in every image key and in the "
        "bounds' provenance)", metavar="REV", check=_revision)
    preset: str = Option("--t2i-preset", "sample sizes and defaults: 'smoke' (fast, offline, meaningless numbers) "
        "or 'paper' (the papers' sizes); default: smoke for the built-in tiny model, paper for every other model",
        default="auto", choices=("auto",) + PRESETS, check=lambda v, flag: v.preset)
    scorers: str = Option("--t2i-scorers", "scorer models: 'paper' loads what the papers used (e.g. OpenAI CLIP "
        "ViT-B/32); 'tiny' builds the same classes offline with random weights (default); 'paper-random' builds "
        "the papers' architectures, input sizes and precisions offline with seeded random weights (meaningless "
        "numbers); 'procedural' reads what --t2i-model procedural drew (CLIP reads each image's attached truth, the "
        "other kinds are tiny's), its errors set by --t2i-procedural-miss", default="tiny",
        choices=("tiny", "paper", "paper-random", "procedural"))
    procedural_miss: str = Option("--t2i-procedural-miss", "with --t2i-scorers procedural: the probability that "
        "the scorer misses a concept an image shows, NAME=RATE,... (a CIS component, a word-level group, a GeoDE "
        "object or region; *=RATE for every other), e.g. macaw=0.6: a scorer bias in one slice with the generator "
        "unchanged (default: no miss)", default="", metavar="NAME=RATE,...", check=_procedural_miss)
    scorer_check: str = Option("--t2i-scorer-check", "before the first gate, each scorer the run uses scores a "
        "small golden set and is compared with its record beside the thresholds file (<name>.scorers.json, "
        "written with the bounds by --t2i-update-thresholds): warn (default: the header, summary and reports name "
        "a scorer that moved, its largest difference and what differs), stop (such a run stops before generating) "
        "or off", default="warn", choices=("warn", "stop", "off"))
    device: str = Option("--t2i-device", "cpu, cuda, cuda:N, mps or auto (default: cuda if available)",
        default="auto", metavar="DEVICE", check=_device)
    precision: str = Option("--t2i-precision", "precision of the generator and every scorer: auto (default: each "
        "model's own on the device, float16 for the diffusers pipeline, CLIP and BLIP-2 on CUDA, float32 for the "
        "others and on CPU; t2i_fairness.models.precision.AUTO_ON_CUDA), float32, float16 or bfloat16; part of "
        "every model's fingerprint", default="auto", choices=("auto", "float32", "float16", "bfloat16"))
    objects: tuple[str, ...] = Option("--t2i-objects", "comma-separated GeoDE objects or 'all'", smoke=SMOKE_OBJECTS,
        paper=tuple(GEODE_OBJECTS), metavar="LIST", shown={"paper": "all 27"}, check=_objects)
    images_per_prompt: int = Option("--t2i-images-per-prompt", "images per prompt ({object} in {country} prompts "
        "share an object-region's N images among its three countries)", smoke=SMOKE_IMAGES_PER_PROMPT,
        paper=PAPER_IMAGES_PER_PROMPT, type=int, metavar="N", check=positive)
    seed: int = Option("--t2i-seed", "base seed (0..4294967295); every image seed derives from it, the prompt and "
        "the image index", default=0, type=int, metavar="INT", check=base_seed)
    batch_size: int | None = Option("--t2i-batch-size", "generation batch size (default: the model's: 16 for tiny "
        "and procedural, 8 for diffusers models and python: factories without a batch_size, 32 for images: "
        "manifests)", type=int, metavar="N", check=positive)
    steps: int | None = Option("--t2i-steps", "denoising steps (default: the model's; 4 for tiny, 50 for "
        "diffusers models)", type=int, metavar="N", check=positive)
    guidance: float | None = Option("--t2i-guidance", "classifier-free guidance scale (default: the model's, 7)",
        type=float, metavar="X", check=partial(finite, low=0.0))
    height: int | None = Option("--t2i-height", "image height (default: the model's; 64 for tiny, 512 otherwise)",
        type=int, metavar="PX", check=positive)
    width: int | None = Option("--t2i-width", "image width (default: the model's; 64 for tiny, 512 otherwise)",
        type=int, metavar="PX", check=positive)
    cache_dir: Path | str = Option("--t2i-cache-dir", "image/feature cache (default: .t2i-cache in the rootdir); "
        "an fsspec URL (s3://, gs://, file://, memory://) shares one cache across machines through a local mirror",
        metavar="DIR", check=_cache_dir)
    cache_mirror: Path = derived(lambda v: v.rootdir / ".t2i-cache-mirror")  # local tier before an fsspec URL
    thresholds: Path = Option("--t2i-thresholds", "thresholds YAML (default: thresholds/<model-slug>.yaml in the "
        "rootdir)", metavar="FILE", check=_thresholds)
    update_thresholds: bool = Option("--t2i-update-thresholds", "write new bounds into the thresholds file, each "
        "at a margin from its estimate (a min gate: the estimate minus q * sqrt(2) * its standard error, q from "
        "--t2i-bound-level; a max gate: plus), never the estimate itself, and report every change; refuses to "
        "loosen a bound (--t2i-allow-loosen) and never rewrites a policy bound", action="store_true")
    allow_loosen: bool = Option("--t2i-allow-loosen", "with --t2i-update-thresholds, allow lowering a min or "
        "raising a max", action="store_true", check=_allow_loosen)
    references: tuple[tuple[str, str], ...] = Option("--t2i-reference", "a real reference data set NAME=PATH "
        "(GeoDE folder, DollarStreet CSV, or manifest CSV); repeatable (default: a small synthetic set named "
        "'synthetic')", action="append", metavar="NAME=PATH", check=_references)
    gate_mode: str = Option("--t2i-gate", "significant (default): a one-sided test of each gate against its "
        "bound, adjusted across the run (--t2i-multiplicity), with three verdicts: pass, fail (significant "
        "evidence of a miss), inconclusive; point: the estimate alone against the bound, no statistics",
        default="significant", choices=("significant", "point"))
    alpha: float = Option("--t2i-alpha", "error level of the run's gate decisions: the chance that a run of an "
        "equivalent model fails any gate, under holm (default 0.05)", default=0.05, type=float, metavar="X",
        check=partial(finite, low=0.0, high=1.0, open_low=True, open_high=True))
    multiplicity: str = Option("--t2i-multiplicity", "adjustment of the gates' p-values across the run: holm "
        "(family-wise, default), bh (Benjamini-Hochberg, false discovery rate) or none", default="holm",
        choices=("holm", "bh", "none"))
    inconclusive: str = Option("--t2i-inconclusive", "what an inconclusive gate (the estimate misses its bound "
        "without significant evidence) does: warn (default: the test passes with a warning) or fail", default="warn",
        choices=("warn", "fail"))
    bound_level: float = Option("--t2i-bound-level", "with --t2i-update-thresholds: the probability that an "
        "equivalent model (same model, new seeds) passes a written bound; the bound is the estimate minus z * "
        "sqrt(2) * its standard error (default 0.99)", default=0.99, type=float, metavar="P",
        check=partial(finite, low=0.5, high=1.0, open_high=True))
    canary: str | None = Option("--t2i-canary", "run the suite against a planted regression in one slice: "
        "NAME:SLICE[:PARAM], e.g. collapse_region:africa, degrade_region:africa:0.5, drop_component:macaw, "
        "drop_position:last:0.5, answer_language:eng_Latn, shift_group_share:doctor:female=0.5 "
        "(t2i_fairness.canaries); the summary says which gates caught it", metavar="NAME:SLICE")
    sequential: bool = Option("--t2i-sequential", "decide gates in rounds of growing size per prompt (multiples "
        "of the batch size, the fixed-N run's first images) and stop each gate as soon as its verdict is settled, "
        "at the run's family-wise level (docs/sequential.md); the paper preset's default, where no option needs "
        "fixed N (--t2i-update-thresholds, --t2i-baseline-model, --t2i-plan-samples, --t2i-gate point: those runs "
        "are fixed-N, and the header says why)", smoke=False, paper=True, action="store_true",
        shown={"smoke": "off", "paper": "on"}, check=lambda v, flag: sequential_design(v)[0])
    design: str = derived(lambda v: sequential_design(v)[1])  # the header's line: the design and why
    fixed_n: bool = Option("--t2i-fixed-n", "decide every gate at N, the fixed-N run (the smoke preset's design; "
        "with the paper preset it turns --t2i-sequential off: every image is generated first, then the generator "
        "is released)", action="store_true")
    plan_samples: float | None = Option("--t2i-plan-samples", "print, per gate, the images per prompt needed to "
        "detect a change of DELTA (in the indicator's units) with 80%% power at the run's level", type=float,
        metavar="DELTA", check=partial(finite, low=0.0, open_low=True))
    baseline_model: str | None = Option("--t2i-baseline-model", "also run the same prompts and seeds through this "
        "model and gate candidate >= baseline - delta (paired bootstrap interval on the difference)", metavar="SPEC")
    baseline_seed: int | None = Option("--t2i-baseline-seed", "base seed of the baseline run (0..4294967295; "
        "default: --t2i-seed); e.g. tiny vs tiny with another seed is a null comparison", type=int, metavar="INT",
        check=_baseline_seed)
    baseline_delta: float = Option("--t2i-baseline-delta", "how much worse than the baseline a gate may be "
        "(default 0)", default=0.0, type=float, metavar="X", check=partial(finite, low=0.0))
    bootstrap: int = Option("--t2i-bootstrap", "bootstrap resamples for confidence intervals (default 200; 0 "
        "turns intervals off)", default=200, type=int, metavar="B", check=partial(positive, minimum=0))
    confidence: float = Option("--t2i-confidence", "confidence level of intervals (default 0.95)", default=0.95,
        type=float, metavar="X", check=partial(finite, low=0.0, high=1.0, open_low=True, open_high=True))
    nearest_k: int = Option("--t2i-nearest-k", "k of the k-NN manifold for precision and coverage (default 3, as "
        "DIG In and Decomposed-DIG)", default=3, type=int, metavar="K", check=positive)
    dedupe: str = Option("--t2i-dedupe", "duplicated real feature vectors before precision/coverage: DIG In's "
        "code drops every copy (drop_all, default); keep_one keeps the first copy when every copy is of one "
        "region (DIG In's keep_one)", default="drop_all", choices=("none", "keep_one", "drop_all"))
    fake_dedupe: str = Option("--t2i-fake-dedupe", "duplicated generated feature vectors: 'auto' (default) does "
        "what each paper's public code does: DIG In as --t2i-dedupe, Decomposed-DIG none (its fork never "
        "de-duplicates generated images)", default="auto", choices=("auto", "none", "keep_one", "drop_all"))
    dedupe_scope: str = Option("--t2i-dedupe-scope", "where duplicates are looked for: 'set' (default): the whole "
        "real set, and all generated images of a template, before grouping by region; 'templates' (DIG In's code "
        "exactly): as set, but the generated images of {object} and {object} in {region} together, as DIG In "
        "de-duplicates its one regions pickle (docs/fidelity-dedupe.md); 'group': within each region or "
        "object-region group", default="set", choices=("set", "templates", "group"))
    balance_per_group: int | None = Option("--t2i-balance-per-group", "GeoDE reference: images per object-region "
        "after balancing; the paper's 180 (default) or 'smallest' (the smallest group's size); a smaller group is "
        "an error", default="180", metavar="N|smallest", check=lambda v, flag: balance_size(v(flag), flag))
    balance_seed: int = Option("--t2i-balance-seed", "seed of the GeoDE balancing sample (default 42, DIG In's "
        "code)", default=42, type=int, metavar="INT")
    balance_sampler: str = Option("--t2i-balance-sampler", "how a group's images are drawn: 'dig_in' (default; "
        "DIG In's utils.sample_df: random.seed(seed); random.sample(rows in file order, n)) or 'project' (a seed "
        "per group, rows sorted by path: the same images whatever the file order)", default="dig_in",
        choices=("dig_in", "project"))
    synthetic_per_group: int = Option("--t2i-synthetic-per-group", "images per object and region of the built-in "
        "synthetic reference set, used without --t2i-reference (default 10); a region's gates need k+2 (5 at "
        "--t2i-nearest-k 3)", default=10, type=int, metavar="N", check=_synthetic_size)
    synthetic_regions: tuple[str, ...] = Option("--t2i-synthetic-regions", "regions of the built-in synthetic "
        "reference set (and so of its prompts), comma-separated GeoDE regions or 'all' (default)", metavar="LIST",
        shown={"smoke": "all", "paper": "all"}, check=_synthetic_size)
    artifacts: Path = Option("--t2i-artifacts", "where gates write JSON, plots and image grids (default: "
        "t2i-artifacts in the rootdir)", metavar="DIR",
        check=lambda v, flag: Path(v.raw(flag) or v.rootdir / "t2i-artifacts"))
    audit: Any = Option("--t2i-audit", "human labels (the CSV the labelling page of `t2i-fairness audit RUN` saves): every gate "
        "over a judged share (CIS_K) decides on prediction-powered evidence from the labels and the scorer's "
        "judgements, and says what it rests on (docs/decisions.md); labels that do not match the run are refused "
        "with the file and line", metavar="LABELS.csv", check=_audit_labels)
    report: Path | None = Option("--t2i-report", "write a self-contained HTML report (gate table, plots, images "
        "inline) to DIR/index.html", metavar="DIR",
        check=lambda v, flag: Path(v.raw(flag)) if v.raw(flag) else None)
    history: Path | None = Option("--t2i-history", "the run history, a SQLite file every gate run appends its "
        "gates to (t2i-fairness history / compare read it; docs/history.md; default: t2i-history.sqlite beside the "
        "artifacts folder)", metavar="FILE", check=_history)
    history_off: bool = Option("--t2i-no-history", "record nothing in the run history", action="store_true")
    mlflow: str | None = Option("--t2i-mlflow", "also log the run to this MLflow tracking URI (settings as params, "
        "each gate's value, interval and verdict as metrics, run.json and the HTML report as artifacts; default: "
        "$MLFLOW_TRACKING_URI when set; 'off' logs nothing; pip install 't2i-fairness[mlflow]')", metavar="URI",
        check=_mlflow)
    progress: bool = Option("--t2i-no-progress", "no progress bars", action="store_true",
        check=lambda v, flag: not v(flag))
    # the parsed --t2i-canary, bound to the registered family's canary (resolve_options sets it)
    canary_spec: Any = field(default=None, compare=False, repr=False)
    families: Mapping[str, Any] = field(default_factory=lambda: types.MappingProxyType({}), compare=False)

    def family(self, name: str) -> Any:
        """The frozen options of one family (``KeyError`` naming the registered ones)."""
        try:
            return self.families[name]
        except KeyError:
            raise KeyError(f"no options for family {name!r}; registered: {sorted(self.families)}") from None


CORE_OPTIONS: tuple[Option, ...] = options_of(T2IOptions)


def resolve_options(get: Callable[[str], Any], *, rootdir: Path | str = ".", invocation_dir: Path | str = ".",
                    families: Sequence[Any] = ()) -> T2IOptions:
    """Resolve every option in one pass: the core fields, then each family's part.

    Args:
        get: the raw parsed value of a flag (``config.getoption``).
        rootdir: pytest's rootdir (default place of the cache, thresholds and artifacts).
        families: the registered :class:`~t2i_fairness.families.base.Family` objects.

    Raises:
        OptionError: a bad value, naming the option.

    Example:
        >>> raw = {"--t2i-model": "org/sd", "--t2i-objects": "bag,car"}
        >>> o = resolve_options(lambda flag: raw.get(flag, {"--t2i-reference": []}.get(flag)))
        >>> o.preset, o.objects, o.images_per_prompt, o.thresholds.name
        ('paper', ('bag', 'car'), 60, 'org-sd.yaml')
    """
    declared = list(CORE_OPTIONS) + [o for f in families for o in f.options]
    model = get("--t2i-model") or DEFAULT_MODEL
    preset = preset_of(model, get("--t2i-preset") or "auto")
    v = Values(get, declared, preset, rootdir, invocation_dir)
    core = T2IOptions(**resolve_fields(T2IOptions, v))
    canary_spec = None
    if core.canary is not None:
        from t2i_fairness.generators.canary import canary_table, parse_canary

        try:
            canary_spec = parse_canary(core.canary, canaries=canary_table(families))
        except ValueError as exc:
            raise OptionError("--t2i-canary", str(exc).removeprefix("--t2i-canary").lstrip(": ")) from None
    parts = {f.name: (f.resolve(v, core) if f.resolve is not None else None) for f in families}
    return replace(core, families=types.MappingProxyType(parts), canary_spec=canary_spec)


# ------------------------------------------------------------------------------------- the docs' table

OPTIONS_BEGIN = "<!-- options-table:begin (generated from the Option records by `make docs`; do not edit by hand) -->"
OPTIONS_END = "<!-- options-table:end -->"
DOCS_COMMAND = "make docs"  # what rewrites the generated table (t2i-fairness options --write docs/options.md)


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell: pipes escaped, angle brackets as entities, argparse's ``%%`` as ``%``."""
    return str(text).replace("%%", "%").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def option_usage(option: Option) -> str:
    """How the option is written: ``--t2i-gate significant|point``, ``--t2i-seed INT``, ``--t2i-no-progress``.

    Example:
        >>> [option_usage(o) for o in CORE_OPTIONS if o.flag in ("--t2i-gate", "--t2i-seed", "--t2i-no-progress")]
        ['--t2i-seed INT', '--t2i-gate significant|point', '--t2i-no-progress']
    """
    if option.action == "store_true":
        return option.flag
    if option.choices:
        return f"{option.flag} {'|'.join(option.choices)}"
    return f"{option.flag} {option.metavar or 'VALUE'}"


def default_cell(option: Option) -> str:
    """The default as the options table shows it: both presets' when they differ, ``off``, or ``none``."""
    if option.has_presets:
        smoke, paper = option.show("smoke"), option.show("paper")
        return f"`{smoke}`" if smoke == paper else f"smoke `{_cell(smoke)}`, paper `{_cell(paper)}`"
    if option.action == "store_true":
        return "off"
    if option.default is None or option.action == "append":
        return "none"
    return f"`{_cell(option.show('smoke'))}`"


def options_markdown(sections: Iterable[tuple[str, Iterable[Option]]]) -> str:
    """The options table of docs/options.md from ``(title, options)`` sections, then the preset table."""
    sections = [(title, tuple(options)) for title, options in sections]
    lines = [OPTIONS_BEGIN, ""]
    for title, options in sections:
        if not options:
            continue
        lines += [f"### {title}", "", "| option | default | meaning |", "|---|---|---|"]
        lines += [f"| `{_cell(option_usage(o))}` | {default_cell(o)} | {_cell(o.help)} |" for o in options]
        lines.append("")
    lines += ["### Presets", "",
              "Every default that depends on the scale of the run, under each preset (`--t2i-preset`; "
              "default: `smoke` for the built-in models, `paper` for every other):", "",
              "| option | smoke | paper |", "|---|---|---|"]
    lines += [f"| `{flag}` | {_cell(smoke)} | {_cell(paper)} |"
              for _, options in sections for flag, smoke, paper in preset_table(options)]
    lines += ["", OPTIONS_END]
    return "\n".join(lines) + "\n"


def replace_generated(text: str, generated: str, *, where: str = "the file") -> str:
    """``text`` with the part between :data:`OPTIONS_BEGIN` and :data:`OPTIONS_END` (markers included)
    replaced by ``generated``; ValueError naming ``where`` when the markers are missing or out of order.
    """
    start, end = text.find(OPTIONS_BEGIN), text.find(OPTIONS_END)
    if start < 0 or end < start:
        raise ValueError(f"{where}: no generated options table (the lines {OPTIONS_BEGIN!r} ... {OPTIONS_END!r})")
    end += len(OPTIONS_END)
    if text[end:end + 1] == "\n":
        end += 1
    return text[:start] + generated + text[end:]
