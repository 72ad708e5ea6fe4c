"""What a paper family gives the plugin: a :class:`Family` record (plain data, no pytest).

Each ``families/<name>/`` folder holds ``__init__.py`` (``FAMILY = Family(...)``), ``options.py``,
``study.py``, ``report.py`` and optionally ``canaries.py``, and registers with one line in
:data:`t2i_fairness.families.FAMILIES` (docs/adding-a-paper.md). The plugin turns each record into
a session fixture, its gates' parametrization, a header line and the reports' label tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from t2i_fairness.generators.canary import CanaryInfo
from t2i_fairness.spine.options import Option, T2IOptions, Values
from t2i_fairness.spine.plan import GateCall, ImageRequest, Need

__all__ = ["Family", "GateCall", "ImageRequest", "Need", "Parameters", "Study", "indicator", "indicator_methods",
           "null_shares", "param_id"]


@dataclass(frozen=True)
class Parameters:
    """One ``metafunc.parametrize`` call, as data: argument names, value tuples and their ids."""

    argnames: tuple[str, ...]
    values: list[tuple[Any, ...]]
    ids: list[str]

    def __post_init__(self) -> None:
        if len(self.values) != len(self.ids):
            raise ValueError(f"{self.argnames}: {len(self.values)} values but {len(self.ids)} ids")


def param_id(*parts: object) -> str:
    """The id of a parameter set: its parts joined by ``-`` (the gate ids in thresholds files).

    Example:
        >>> param_id("synthetic", "object_in_region", "africa")
        'synthetic-object_in_region-africa'
    """
    return "-".join(str(p) for p in parts)


@dataclass(frozen=True)
class Family:
    """A paper family of indicators.

    A family declares only what is its own; the rest follows (``suite_modules``, ``fixture``, ``study``, ``rounds``).

    Attributes:
        name: the family's id (folder name, ``family_<name>`` marker).
        paper: the paper (title, authors, year) and its file in ``shared/papers``.
        suite_modules: the gate test modules of the suite (``test_cis``) that belong to it; not given,
            ``test_<name>``.
        fixture: the name of the session fixture that gives its study; not given, ``name``.
        study: ``study(workbench, family_options) -> study object`` (imports lazily); not given,
            ``study_type()(workbench, family_options)``.
        resolve: ``resolve(values, core_options) -> frozen family options`` (raises ``OptionError``).
        parameters: ``parameters(fixturenames, core, family_options) -> [Parameters]``.
        header: ``header(core, family_options) -> str | None``: a line of the run's header.
        labels: ``labels(core, family_options) -> {kind: tokens}``: the regions, languages and
            templates its gate ids name, so reports label gates without importing vocabularies.
        needs: ``needs(call, study) -> [Need]``: the study slices and images a selected test reads;
            ``None``: its images cannot be planned. A ``"module:function"`` path (``".study:needs"``: in the
            family's own package) is imported when called.
        canaries: the ``--t2i-canary NAME:SLICE[:PARAM]`` it knows (from its ``canaries.py``).
        look: ``look(study, n) -> study``: the study at ``n`` of its planned looks (nested prefixes of
            the fixed-N run); with ``rounds``, what ``--t2i-sequential`` needs.
        rounds: ``rounds(study) -> (looks, unit)``: the planned looks, the last the fixed-N size; not
            given (with ``look``), ``study.planned_looks()``.
        study_type: ``study_type() -> the study's class``, whose indicator methods are the gates; a
            ``"module:Class"`` path, as for ``needs``.
        futility_miss: ``(kind, miss)`` pairs for its own kinds that have no meaningful miss.
        null_shares: the data file of its gates' null-model image shares; ``None``: counted at ``N``.
        scorers: the workbench scorers its studies use, so a run can release them once no remaining
            gate needs them; ``None``: every model stays loaded while its gates remain.
        replaced: ``replaced(family_options) -> names``: the ``scorers`` its options replace with the user's
            own outputs (Decomposed-DIG's ``--t2i-masks``: the segmenter), which the scorer check leaves out.

    Example:
        >>> f = Family("demo", "Demo", "a paper", study_type="fractions:Fraction", needs="operator:add",
        ...            look=lambda study, n: study)
        >>> f.fixture, f.suite_modules, f.study_type().__name__, f.study(3, 4), f.needs(2, 5)
        ('demo', ('test_demo',), 'Fraction', Fraction(3, 4), 7)
    """

    name: str
    title: str
    paper: str
    suite_modules: tuple[str, ...] = ()
    fixture: str = ""
    study: Callable[[Any, Any], Any] | None = None
    options: tuple[Option, ...] = ()
    resolve: Callable[[Values, T2IOptions], Any] | None = None
    parameters: Callable[[set[str], T2IOptions, Any], Sequence[Parameters]] | None = None
    header: Callable[[T2IOptions, Any], str | None] | None = None
    labels: Callable[[T2IOptions, Any], Mapping[str, Iterable[str]]] | None = None
    needs: Callable[[GateCall, Any], Sequence[Need]] | str | None = None
    canaries: tuple[CanaryInfo, ...] = ()
    look: Callable[[Any, int], Any] | None = None
    rounds: Callable[[Any], tuple[Sequence[int], str]] | None = None
    study_type: Callable[[], type] | str | None = None
    scorers: tuple[str, ...] | None = None
    replaced: Callable[[Any], Iterable[str]] | None = None
    futility_miss: tuple[tuple[str, float], ...] = ()
    null_shares: str | None = None
    doc: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        package = f"{__name__.rpartition('.')[0]}.{self.name}"  # where ".study:Name" paths start
        study_type = _imported(self.study_type, package) if isinstance(self.study_type, str) else self.study_type
        derived = {"fixture": self.fixture or self.name, "suite_modules": self.suite_modules or (f"test_{self.name}",),
                   "study_type": study_type}
        if isinstance(self.needs, str):
            derived["needs"] = _called(_imported(self.needs, package))
        if self.study is None:
            if study_type is None:
                raise TypeError(f"family {self.name}: give study= or study_type=")
            derived["study"] = _called(study_type)
        if self.rounds is None and self.look is not None:
            derived["rounds"] = _planned_looks
        elif self.look is None and self.rounds is not None:
            raise ValueError(f"family {self.name}: --t2i-sequential needs look= with rounds=")
        for key, value in derived.items():
            object.__setattr__(self, key, value)


def _imported(path: str, package: str) -> Callable[[], Any]:
    """``"package.module:name"`` (``".module:name"``: in ``package``) -> a function that imports the module when
    called and returns ``name``."""
    module, _, name = path.partition(":")
    if not module.strip(".") or not name.isidentifier():
        raise ValueError(f"{path!r}: not a 'package.module:name' path")
    module = package + module if module.startswith(".") else module

    def imported():
        import importlib

        return getattr(importlib.import_module(module), name)

    imported.__qualname__ = imported.__name__ = path
    return imported


def _called(get: Callable[[], Callable]) -> Callable:
    """A function that calls what ``get()`` returns with its own arguments."""
    return lambda *args: get()(*args)


def _planned_looks(study):
    return study.planned_looks()


def null_shares(family: Family):
    """The family's :class:`~t2i_fairness.gating.sequential.plan.NullShares` (``None`` without a data file)."""
    from pathlib import Path

    from t2i_fairness.gating.sequential.plan import NullShares

    if family.null_shares is None:
        return None
    return NullShares.load(Path(__file__).parent / family.name / family.null_shares)


def indicator(kind: str, *, grows: bool = False, value_range: tuple[float | None, float | None] | None = None):
    """Mark a study method that makes one gate's :class:`~t2i_fairness.gating.indicator.Indicator`.

    The gate test ``test_<method>`` reads it; under ``--t2i-sequential`` the call is routed to the
    round loop. ``kind`` and ``grows`` (coverage-like: no early fail) are declared once here and the
    returned indicator must agree; ``value_range`` overrides the kind's range (``None``: unbounded).

    Example:
        >>> from t2i_fairness.gating.indicator import Indicator
        >>> class S(Study):
        ...     @indicator("share")
        ...     def rate(self, which):
        ...         return Indicator(0.5, 10, "share")
        >>> S(None).rate("a").value, S.rate.indicator_kind, sorted(indicator_methods(S))
        (0.5, 'share', ['rate'])
    """
    import functools
    import inspect

    from t2i_fairness.gating.indicator import KINDS

    if kind not in KINDS:
        raise ValueError(f"unknown indicator kind {kind!r}; one of {sorted(KINDS)}")

    def mark(method):
        signature = inspect.signature(method)

        @functools.wraps(method)
        def read(self, *args, **kwargs):
            loop = self.__dict__.get("round_loop")
            if loop is not None:
                bound = signature.bind(self, *args, **kwargs)
                bound.apply_defaults()
                return loop.indicator(method.__name__, {k: v for k, v in bound.arguments.items() if k != "self"})
            out = method(self, *args, **kwargs)
            if out.kind != kind or (grows and not out.grows):
                raise TypeError(f"{type(self).__name__}.{method.__name__} declares kind {kind!r} (grows={grows}) "
                                f"but returned kind {out.kind!r} (grows={out.grows})")
            return out if out.at is not None else out.replace(at=self)

        read.indicator_kind, read.indicator_grows, read.indicator_method = kind, grows, method
        read.indicator_range = value_range
        return read

    return mark


def indicator_methods(cls) -> dict[str, Callable]:
    """The indicator methods of a study class (:func:`indicator`): name -> method."""
    return {name: getattr(cls, name) for name in dir(cls) if hasattr(getattr(cls, name, None), "indicator_kind")}


class Study:
    """Base of the families' studies: a workbench, and numbers computed once, on first request."""

    def __init__(self, bench):
        self.bench = bench
        self._memo: dict = {}
        self.round_loop = None  # --t2i-sequential: the round loop its indicator methods route to (the full study)

    def raw_indicator(self, method: str, kwargs: Mapping[str, Any]):
        """The indicator ``method`` makes on this study itself, bypassing any round loop."""
        return getattr(type(self), method).indicator_method(self, **kwargs)

    def _once(self, key, make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]
