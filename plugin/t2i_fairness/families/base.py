"""What a paper family gives the plugin: a :class:`Family` record (plain data, no pytest).

Each family folder has the same shape::

    families/<name>/__init__.py   FAMILY = Family(...)          (this record; imports nothing heavy)
    families/<name>/options.py    OPTIONS (its --t2i-* flags) and resolve(values, core) -> frozen options
    families/<name>/study.py      the study: plain Python over a Workbench, computed lazily, once per session
    families/<name>/report.py     tables, plots and grids for people
    families/<name>/canaries.py   (optional) its canaries: planted regressions in its slices (CANARIES)

and registers with one line in :data:`t2i_fairness.families.FAMILIES`. The plugin turns each
record into a session fixture (``fixture``, the study), the parametrization of its gate tests
(``parameters``), a line of the run's header (``header``) and the label tokens the reports group
and filter by (``labels``). The gate tests themselves live in the suite (``fairness_tests/``).

``needs`` says what a selected gate reads from the study (:class:`~t2i_fairness.spine.plan.Need`:
a study method, its arguments and the images it asks for), from the study's own code: the
``t2i-fairness plan`` / ``generate`` commands make exactly those images (and, with
``--stage features``, compute those slices), and a ``-k`` selection generates only what its gates need.
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

    Attributes:
        name: the family's id (folder name, ``family_<name>`` marker).
        title: the paper's short name, for reports.
        paper: the paper (title, authors, year) and its file in ``shared/papers``.
        suite_modules: the gate test modules of the suite (``test_cis``) that belong to it.
        fixture: the name of the session fixture that gives its study.
        study: ``study(workbench, family_options) -> study object`` (imports lazily).
        options: its ``--t2i-*`` flags.
        resolve: ``resolve(values, core_options) -> frozen family options`` (raises ``OptionError``).
        parameters: ``parameters(fixturenames, core, family_options) -> [Parameters]`` for a gate
            test that asks for the family's parametrized arguments.
        header: ``header(core, family_options) -> str | None``: a line of the run's header.
        labels: ``labels(core, family_options) -> {kind: tokens}``: the regions, languages and
            templates its gate ids name (``region``: slugs, ``language``: codes such as ``hin_Deva``,
            ``template``: ids), so reports label gates without importing family vocabularies.
        needs: ``needs(call, study) -> [Need]``: the study slices a selected test (a
            :class:`~t2i_fairness.spine.plan.GateCall`: function name and parameters) reads, each
            with the images the study asks for, computed by the study itself (no generation); a test
            it does not know gets every slice its parameters allow. ``None``: the family's images
            cannot be planned (its gates generate as they run).
        canaries: its canaries (:class:`~t2i_fairness.generators.canary.CanaryInfo`, from
            ``families/<name>/canaries.py``): the ``--t2i-canary NAME:SLICE[:PARAM]`` it knows.
        look: ``look(study, n) -> study``: the study at ``n`` of its planned looks (the first ``n`` images
            per prompt of the fixed-N run, or its first ``n`` prompts where prompts are sampled; the same
            bytes, nested as ``n`` grows), with the fixed-N run's provenance. With ``rounds``, what
            ``--t2i-sequential`` needs: the family's gates are its study's indicator methods
            (:func:`indicator`), each read by the gate test of the same name (``test_<method>``).
        rounds: ``rounds(study) -> (looks, unit)``: the planned looks (increasing, the last the fixed-N
            size) and what they count (``"images per prompt"``, ``"prompts"``).
        study_type: ``study_type() -> the study's class`` (imported when called): its indicator methods are
            the family's gates, each with its kind and value range (:func:`indicator`), which the thresholds
            file's bounds are checked against before a run.
        futility_miss: ``(kind, miss)`` pairs for kinds of its own that have no meaningful miss (its test's effect:
            ``--t2i-sequential`` passes it early by futility when its limit clears half that effect).
        null_shares: the data file, in the family's folder, of its gates' null-model image shares
            (:class:`~t2i_fairness.gating.sequential.plan.NullShares`, written by the sequential bench), read by
            ``t2i-fairness plan --t2i-sequential``; ``None``: counted at ``N``.
        scorers: the workbench scorers its studies ask for (``bench.scorer(name)``): a run releases a
            scorer once no remaining gate's family names it, and the generator once every planned image is
            made. ``None`` (the default): not declared, so every model stays loaded while its gates remain.
    """

    name: str
    title: str
    paper: str
    suite_modules: tuple[str, ...]
    fixture: str
    study: Callable[[Any, Any], Any]
    options: tuple[Option, ...] = ()
    resolve: Callable[[Values, T2IOptions], Any] | None = None
    parameters: Callable[[set[str], T2IOptions, Any], Sequence[Parameters]] | None = None
    header: Callable[[T2IOptions, Any], str | None] | None = None
    labels: Callable[[T2IOptions, Any], Mapping[str, Iterable[str]]] | None = None
    needs: Callable[[GateCall, Any], Sequence[Need]] | None = None
    canaries: tuple[CanaryInfo, ...] = ()
    look: Callable[[Any, int], Any] | None = None
    rounds: Callable[[Any], tuple[Sequence[int], str]] | None = None
    study_type: Callable[[], type] | None = None
    scorers: tuple[str, ...] | None = None
    futility_miss: tuple[tuple[str, float], ...] = ()
    null_shares: str | None = None
    doc: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if (self.look is None) != (self.rounds is None):
            raise ValueError(f"family {self.name}: --t2i-sequential needs both look= and rounds= (or neither)")


def null_shares(family: Family):
    """The family's :class:`~t2i_fairness.gating.sequential.plan.NullShares` (``None`` without a data file)."""
    from pathlib import Path

    from t2i_fairness.gating.sequential.plan import NullShares

    if family.null_shares is None:
        return None
    return NullShares.load(Path(__file__).parent / family.name / family.null_shares)


def indicator(kind: str, *, grows: bool = False, value_range: tuple[float | None, float | None] | None = None):
    """Mark a study method that makes one gate's :class:`~t2i_fairness.gating.indicator.Indicator`.

    The gate test ``test_<method>`` reads it (``gate(study.<method>(...))``), its parameters named as the
    method's. Under ``--t2i-sequential`` the study routes the call to its round loop
    (:class:`~t2i_fairness.gating.sequential.loop.Rounds`), which gives the indicator of the look where the gate
    stopped. ``kind`` (a key of :data:`~t2i_fairness.gating.indicator.KINDS`) and ``grows`` (coverage-like:
    no early fail) are the method's, declared once here; the indicator it returns must say the same.
    ``value_range``: the values it takes when they are not its kind's
    (:data:`~t2i_fairness.gating.ranges.KIND_RANGES`; ``None`` on a side: unbounded).

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
