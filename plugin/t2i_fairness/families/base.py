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

__all__ = ["Family", "GateCall", "ImageRequest", "Need", "Parameters", "Study", "param_id"]


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
        sequential: test function name -> its sequential kind (a key of
            :data:`~t2i_fairness.metrics.sequential.KINDS`: ``share``, ``coverage``) for the tests that
            ``--t2i-sequential`` decides in rounds; a test not named runs to ``N`` (``docs/sequential.md``).
        look: ``look(study, n) -> study`` on the first ``n`` images per prompt of the fixed-N run
            (``n`` a multiple of the batch size; the same bytes, nested as ``n`` grows), with the fixed-N
            run's provenance; needed when ``sequential`` names a test.
        runs_to_n: ``runs_to_n(call, core_options) -> str | None``: why a selected test of a kind with an
            early stop still runs to ``N`` under these options (a template that is not a balanced grid of
            images, coverage that is not nested, ...), or ``None``; what ``t2i-fairness plan
            --t2i-sequential`` counts (the round driver decides from the data itself).
        scorers: the workbench scorers its studies ask for (``bench.scorer(name)``): a run releases a
            scorer once no remaining gate's family names it, and the generator once every planned image is
            made. ``None`` (the default): not declared, so every model stays loaded while its gates remain.
        ranges: test function name -> ``(lowest, highest)`` value its gate measures, for a test whose
            range is not its kind's (:data:`~t2i_fairness.gating.ranges.KIND_RANGES`); ``None`` on a side:
            unbounded. Bounds that no value in the range can meet are refused when the thresholds
            file is read.
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
    sequential: Mapping[str, str] = field(default_factory=dict)
    look: Callable[[Any, int], Any] | None = None
    runs_to_n: Callable[[GateCall, T2IOptions], str | None] | None = None
    scorers: tuple[str, ...] | None = None
    ranges: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    doc: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        from t2i_fairness.metrics.sequential import KINDS

        bad = {test: kind for test, kind in self.sequential.items() if kind not in KINDS}
        if bad:
            raise ValueError(f"family {self.name}: unknown sequential kind(s) {bad}; one of {sorted(KINDS)}")
        early = [test for test, kind in self.sequential.items() if KINDS[kind] != "fixed"]
        if early and self.look is None:
            raise ValueError(f"family {self.name}: {early} stop early but the family has no look (give look=, "
                             "or declare a kind that runs to N)")


class Study:
    """Base of the families' studies: a workbench, and numbers computed once, on first request."""

    def __init__(self, bench):
        self.bench = bench
        self._memo: dict = {}

    def _once(self, key, make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]
