"""Canary machinery: a generator wrapper that plants a known regression in one slice, whatever the paper.

Each family defines its canaries in ``families/<name>/canaries.py`` and lists them on its
``Family`` record; :mod:`t2i_fairness.canaries` is the user-facing aggregate.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from PIL import Image

__all__ = [
    "CANARY_VERSION",
    "Canary",
    "CanaryInfo",
    "CanarySlice",
    "CanarySpec",
    "SliceKind",
    "canary_table",
    "catch_report",
    "make_canary",
    "parse_canary",
    "slice_of",
    "wrap_source",
]

#: Bumped whenever a canary changes what it draws; part of every canary fingerprint.
CANARY_VERSION = 1

WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")

_KINDS: dict[str, "SliceKind"] = {}  # kind name -> SliceKind, filled as the families' canary modules load


def stable_int(*parts: object) -> int:
    """A 64-bit integer from a SHA-256 of the parts (the seed of every random choice a canary makes)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def split_gate(gate_id: str) -> tuple[str, list[str]]:
    """A gate id's test name and parameter tokens.

    Example:
        >>> split_gate("test_region_coverage[synthetic-object_in_region-africa]")
        ('test_region_coverage', ['synthetic', 'object_in_region', 'africa'])
    """
    name, _, rest = str(gate_id).partition("[")
    return name, (rest.rstrip("]").split("-") if rest else [])


def fraction(value, what: str, low_open: bool = False) -> float:
    """A number in ``[0, 1]`` (``(0, 1]`` with ``low_open``), or a ValueError naming ``what``."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not (0.0 < x <= 1.0 if low_open else 0.0 <= x <= 1.0):
        raise ValueError(f"{what} must be in {'(0, 1]' if low_open else '[0, 1]'}, got {value!r}")
    return x


@dataclass(frozen=True)
class SliceKind:
    """A kind of slice and which gates see it: ``gate_role(value, gate_id) -> "slice" | "aggregate" | "other"``."""

    name: str
    gate_role: Callable[[str, str], str] = field(compare=False)
    label: str = ""

    def __post_init__(self) -> None:
        _KINDS[self.name] = self


@dataclass(frozen=True)
class CanarySlice:
    """The slice a canary plants its regression in: a :class:`SliceKind` name and a value (region slug,
    component, language code, lower-case word; for ``answer_language`` every other language).
    """

    kind: str
    value: str

    @property
    def label(self) -> str:
        """How a summary names the slice, e.g. ``region africa``, ``languages other than hin_Deva``."""
        kind = _KINDS.get(self.kind)
        return kind.label.format(value=self.value) if kind and kind.label else f"{self.kind} {self.value}"

    def gate_role(self, gate_id: str) -> str:
        """Whether a gate should catch this slice's regression: ``"slice"``, ``"aggregate"`` (may move) or ``"other"``."""
        kind = _KINDS.get(self.kind)
        return kind.gate_role(self.value, gate_id) if kind is not None else "other"


def check_call(name: str, prompts: Sequence[str], seeds: Sequence[int]) -> tuple[list[str], list[int]]:
    """The call's prompts and seeds as lists; a ValueError naming the canary when their lengths differ."""
    prompts, seeds = list(prompts), list(seeds)
    if len(prompts) != len(seeds):
        raise ValueError(f"canary {name}: got {len(prompts)} prompts but {len(seeds)} seeds")
    return prompts, seeds


class Canary:
    """Base class: a generator wrapper that changes one slice of an inner generator's images.

    Subclasses set :attr:`name` and implement :meth:`targets` and either :meth:`_replacement` or
    :meth:`generate`. ``fingerprint`` is the inner one plus ``+canary:NAME:SLICE:PARAM:vN``.
    """

    name: str = "canary"

    def __init__(self, inner, slice: CanarySlice, param: str = ""):
        missing = [a for a in ("fingerprint", "generate") if not hasattr(inner, a)]
        if missing:
            raise TypeError(
                f"canary {self.name}: the inner generator {type(inner).__name__} lacks {missing}; "
                "a generator needs a `fingerprint` string and `generate(prompts, seeds) -> list[PIL.Image]`"
            )
        self.inner = inner
        self.slice = slice
        self.param = param
        self.fingerprint = f"{inner.fingerprint}+canary:{self.name}:{slice.value}:{param}:v{CANARY_VERSION}"

    @property
    def batch_size(self) -> int | None:
        """The inner generator's batch size (the plugin reads it; batching is the inner's business)."""
        return getattr(self.inner, "batch_size", None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()!r})"

    def describe(self) -> str:
        """One line for a summary: the canary string and what it does."""
        return f"{self.name}:{self.slice.value}{':' + self.param if self.param else ''}"

    def targets(self, prompt: str) -> bool:
        """Whether the prompt is in the slice (some of its images may still be left alone)."""
        raise NotImplementedError

    def _replacement(self, prompt: str, seed: int) -> str | None:
        """The prompt to generate instead for this (prompt, seed), or None to leave it alone."""
        raise NotImplementedError

    def check_available(self, prompts: Sequence[str], seeds: Sequence[int]) -> None:
        """Forwarded to an inner generator that has it (a manifest), with the prompts really asked for."""
        check = getattr(self.inner, "check_available", None)
        if check is None:
            return
        prompts, seeds = check_call(self.name, prompts, seeds)
        new = [self._replacement(p, s) for p, s in zip(prompts, seeds)]
        check([n if n is not None else p for p, n in zip(prompts, new)], seeds)

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]:
        """The inner generator's images (batched as unwrapped), with the slice's replaced."""
        prompts, seeds = check_call(self.name, prompts, seeds)
        new = [self._replacement(p, s) for p, s in zip(prompts, seeds)]
        hit = [i for i, n in enumerate(new) if n is not None]
        if not hit:
            return self._inner(prompts, seeds)
        out: list[Image.Image | None] = [None] * len(prompts)
        if len(hit) < len(prompts):
            for i, im in enumerate(self._inner(prompts, seeds)):
                if new[i] is None:
                    out[i] = im
        for i, im in zip(hit, self._inner([new[i] for i in hit], [seeds[i] for i in hit])):
            out[i] = im
        return out  # type: ignore[return-value]

    def _inner(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]:
        images = list(self.inner.generate(list(prompts), list(seeds)))
        if len(images) != len(prompts):
            raise RuntimeError(
                f"canary {self.name}: the inner generator returned {len(images)} images for {len(prompts)} prompts"
            )
        return images


# ------------------------------------------------------------------------------------ registry


@dataclass(frozen=True)
class CanaryInfo:
    """A registered canary: how its ``NAME:SLICE[:PARAM]`` string reads, and how it is built.

    Attributes:
        build: ``build(inner, slice, params, multilingual) -> Canary``.
        read_slice: ``read_slice(text) -> slice value`` (a ValueError says what is wrong); ``None``: any text.
        read_param: ``read_param(text) -> keyword arguments of build``; ``None``: no PARAM.
    """

    name: str
    slice_kind: str
    slice_help: str
    param_help: str
    summary: str
    build: Callable[..., Canary] | None = field(default=None, compare=False, repr=False)
    read_slice: Callable[[str], str] | None = field(default=None, compare=False, repr=False)
    read_param: Callable[[str], dict] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CanarySpec:
    """A parsed ``NAME:SLICE[:PARAM]`` string (checked, bound to its :class:`CanaryInfo`, not yet to a generator)."""

    name: str
    slice: str
    param: str | None = None
    info: CanaryInfo | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.name}:{self.slice}" + (f":{self.param}" if self.param is not None else "")


def canary_table(families: Iterable[Any]) -> dict[str, CanaryInfo]:
    """The canaries the families list on their records (``Family.canaries``), by name, in registration
    order; a ValueError when two families register the same name.
    """
    table: dict[str, CanaryInfo] = {}
    owner: dict[str, str] = {}
    for family in families:
        for info in getattr(family, "canaries", ()) or ():
            if info.name in table:
                raise ValueError(f"canary {info.name!r} is registered by two families: {owner[info.name]} and {family.name}")
            table[info.name], owner[info.name] = info, family.name
    return table


def _usage(canaries: Mapping[str, CanaryInfo]) -> str:
    return "; ".join(f"{i.name}:<{i.slice_kind}>" + ("" if i.read_param is None else "[:PARAM]") for i in canaries.values())


def parse_canary(spec: str, *, canaries: Mapping[str, CanaryInfo], option: str = "--t2i-canary") -> CanarySpec:
    """Parse and check a ``NAME:SLICE[:PARAM]`` canary string against the registered canaries.

    Example:
        >>> melt = CanaryInfo("melt", "word", "one word", "none", "melts", read_slice=str.lower)
        >>> parse_canary("melt:Snow", canaries={"melt": melt})
        CanarySpec(name='melt', slice='snow', param=None)
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"{option} {spec!r}: expected NAME:SLICE[:PARAM] ({_usage(canaries)})")
    name, slice_, *rest = [part.strip() for part in spec.split(":", 2)]
    param = rest[0] if rest else None
    if name not in canaries:
        choices = ", ".join(canaries) or "(none: no registered family lists a canary)"
        raise ValueError(f"{option} {spec!r}: unknown canary {name!r}; choose from {choices}")
    info = canaries[name]
    if not slice_:
        raise ValueError(f"{option} {spec!r}: empty SLICE; {info.slice_help}")
    if info.read_slice is not None:
        try:
            slice_ = info.read_slice(slice_)
        except ValueError as exc:
            raise ValueError(f"{option} {spec!r}: {exc}") from None
    if param is not None:
        if info.read_param is None:
            raise ValueError(f"{option} {spec!r}: {name} takes no PARAM, got {param!r}")
        _params(info, param, option, spec)  # checks
    return CanarySpec(name, slice_, param, info)


def _params(info: CanaryInfo, param: str | None, option: str, spec: str) -> dict:
    if param is None or info.read_param is None:
        return {}
    try:
        return info.read_param(param)
    except ValueError as exc:
        raise ValueError(f"{option} {spec!r}: {exc} ({info.param_help})") from None


def _parsed(spec: str | CanarySpec, canaries: Mapping[str, CanaryInfo] | None, option: str) -> CanarySpec:
    if isinstance(spec, CanarySpec) and spec.info is not None:
        return spec
    if canaries is None:
        raise TypeError(f"{option} {str(spec)!r}: give the registered canaries (canaries=...), "
                        "or use t2i_fairness.canaries, which knows them")
    return parse_canary(str(spec), canaries=canaries, option=option)


def make_canary(spec: str | CanarySpec, inner, *, canaries: Mapping[str, CanaryInfo] | None = None,
                multilingual=None, option: str = "--t2i-canary") -> Canary:
    """Wrap ``inner`` in the canary a ``NAME:SLICE[:PARAM]`` string (or :class:`CanarySpec`) names."""
    parsed = _parsed(spec, canaries, option)
    info = parsed.info
    kwargs = _params(info, parsed.param, option, str(parsed))
    try:
        return info.build(inner, parsed.slice, kwargs, multilingual)
    except ValueError as exc:
        prefix = f"{option} {str(parsed)!r}"
        raise ValueError(str(exc) if str(exc).startswith(prefix) else f"{prefix}: {exc}") from None


class _FingerprintOnly:
    """Stands in for a generator not loaded yet: a canary's fingerprint needs only the inner one."""

    def __init__(self, fingerprint: str):
        self.fingerprint = fingerprint

    def generate(self, prompts, seeds):  # pragma: no cover - never called
        raise RuntimeError("the canary's inner generator is not loaded")


def wrap_source(source, spec: str | CanarySpec, *, canaries: Mapping[str, CanaryInfo] | None = None,
                multilingual=None, option: str = "--t2i-canary"):
    """The plugin's lazy generator source with a canary, built on first ``get``; ``spec`` is checked now."""
    parsed = _parsed(spec, canaries, option)
    fingerprint = make_canary(parsed, _FingerprintOnly(source.fingerprint), multilingual=multilingual,
                              option=option).fingerprint
    suffix = fingerprint[len(source.fingerprint):]  # "+canary:NAME:SLICE:PARAM:vN"
    item_key = None
    if source.item_key is not None:  # per-file image keys (a manifest): the canary's pixels keep their own keys
        def item_key(prompt: str, index: int, _inner=source.item_key) -> str | None:
            key = _inner(prompt, index)
            return None if key is None else key + suffix
    return replace(
        source, fingerprint=fingerprint, _generator=None, item_key=item_key,
        _load=lambda: make_canary(parsed, source.get(), multilingual=multilingual, option=option),
    )


def slice_of(spec: str | CanarySpec, *, canaries: Mapping[str, CanaryInfo] | None = None) -> CanarySlice:
    """The slice a canary string targets, without a generator (for summaries)."""
    parsed = _parsed(spec, canaries, "--t2i-canary")
    return CanarySlice(parsed.info.slice_kind, parsed.slice)


def catch_report(spec: str | CanarySpec, records, *, canaries: Mapping[str, CanaryInfo] | None = None
                 ) -> tuple[list[str], dict]:
    """Which gates caught a canary: ``(summary lines, counts)``; ``records`` have ``gate`` and ``status``."""
    parsed = _parsed(spec, canaries, "--t2i-canary")
    sl = slice_of(parsed)

    def get(r, name):
        return r.get(name) if isinstance(r, dict) else getattr(r, name, None)

    roles: dict[str, list[tuple[str, bool]]] = {"slice": [], "aggregate": [], "other": []}
    for r in records:
        status = get(r, "status")
        if status in (None, "baseline"):
            continue
        caught = status in ("fail", "missing", "refused") or (status == "inconclusive" and bool(get(r, "blocking")))
        roles[sl.gate_role(get(r, "gate"))].append((get(r, "gate"), caught))
    counts = {
        "slice_gates": len(roles["slice"]), "slice_caught": sum(c for _, c in roles["slice"]),
        "other_gates": len(roles["other"]), "false_alarms": sum(c for _, c in roles["other"]),
        "aggregate_gates": len(roles["aggregate"]), "aggregate_caught": sum(c for _, c in roles["aggregate"]),
    }
    lines = [f"canary {parsed} ({sl.kind} {sl.value}): caught by {counts['slice_caught']} of {counts['slice_gates']} "
             f"gate(s) of its slice; {counts['false_alarms']} false alarm(s) among {counts['other_gates']} gate(s) of "
             f"other slices; {counts['aggregate_caught']} of {counts['aggregate_gates']} pooled gate(s) failed"]
    lines += [f"  caught: {g}" for g, c in roles["slice"] if c]
    lines += [f"  missed: {g}" for g, c in roles["slice"] if not c]
    lines += [f"  false alarm: {g}" for g, c in roles["other"] if c]
    return lines, counts
