"""DIG In follows its paper and, where the paper is silent, its public code (issue #15, findings 7, 8
and 9). The expected values were worked out by hand (1-D features, k = 1, the prdc rule: radius =
distance to the nearest other real point, inside iff strictly closer) or read off DIG In's code
(``utils.sample_df``, ``utils.get_df_deduped``, ``geode_prompts_countries_fulldataset.csv``).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from t2i_fairness.metrics.manifold import ReferenceManifold, precision_coverage
from t2i_fairness.references.sets import Record, ReferenceSet, balance_records


def col(*values):
    return np.array(values, dtype=np.float64).reshape(-1, 1)


class FakeBench:
    """What :class:`~t2i_fairness.references.library.ReferenceFeatures` asks of a workbench."""

    device = "cpu"

    def __init__(self, features):
        self._features = features

    def features(self, encoder, images, desc=""):
        return np.array([self._features[img.record.path] for img in images], dtype=np.float64)

    def memo(self, *args, **kwargs):
        return SimpleNamespace(get=lambda key, make: make())


def reference(rows):
    """A reference set of synthetic records, one per (path, region, feature value)."""
    records = tuple(Record(f"synthetic:{path}", "bag", region) for path, region, _ in rows)
    features = {f"synthetic:{path}": [value] for path, _, value in rows}
    return ReferenceSet("hand", records, synthetic=True, kind="synthetic"), FakeBench(features)


# -- finding 7: duplicates leave the whole real set, before grouping ------------------------------

HAND = [("a0", "africa", 0.0), ("a3", "africa", 3.0), ("a4", "africa", 4.0), ("a10", "africa", 10.0),
        ("e0", "europe", 0.0), ("e20", "europe", 20.0), ("e21", "europe", 21.0), ("e25", "europe", 25.0)]


def africa_scores(**kwargs):
    from t2i_fairness.references.library import ReferenceFeatures

    ref, bench = reference(HAND)
    real = ReferenceFeatures(bench, ref, SimpleNamespace(fingerprint="hand"), 1, "drop_all", **kwargs)
    m = real.manifold("region:africa", ref.groups_by_region()["africa"])
    return precision_coverage(m, col(1.5, 9.0, 50.0), dedupe="drop_all")


def test_a_copy_shared_by_two_regions_leaves_both_as_in_dig_in_s_code():
    # The 0 of Africa and the 0 of Europe are one image's features: DIG In drops both before grouping.
    # Africa {3, 4, 10}: radii 1, 1, 6. Generated 1.5, 9, 50: only 9 (ball of 10) -> precision 1/3;
    # only 10 is covered -> coverage 1/3.
    pc = africa_scores()
    assert (pc["precision"], pc["coverage"]) == (pytest.approx(1 / 3), pytest.approx(1 / 3))


def test_per_group_dedupe_is_the_option():
    # Africa {0, 3, 4, 10} (nothing repeated inside Africa): radii 3, 1, 1, 6; 1.5 (ball of 0) and 9
    # (ball of 10) -> precision 2/3; 0 and 10 covered -> 2/4.
    pc = africa_scores(scope="group")
    assert (pc["precision"], pc["coverage"]) == (pytest.approx(2 / 3), 0.5)


def test_keep_one_keeps_a_copy_only_when_every_copy_is_of_one_region():
    from t2i_fairness.metrics.manifold import dedupe_index

    # DIG In's get_df_deduped(keep_one=True): A = (0, africa) and B = (0, europe) differ in region, both
    # go; C and D = (3, africa) share it, the first (C) stays.
    x = col(0.0, 0.0, 3.0, 3.0)
    assert dedupe_index(x, "keep_one", groups=["africa", "europe", "africa", "africa"]).tolist() == [2]
    assert dedupe_index(x, "drop_all", groups=["africa", "europe", "africa", "africa"]).tolist() == []


def test_the_dedupe_options_default_to_dig_in_s_code():
    from t2i_fairness.families import FAMILIES
    from t2i_fairness.spine.options import resolve_options

    o = resolve_options(lambda flag: {"--t2i-reference": []}.get(flag), families=FAMILIES)
    assert (o.dedupe, o.fake_dedupe, o.dedupe_scope) == ("drop_all", "auto", "set")


# -- finding 8: the bootstrap resamples the rows the estimate is computed on ------------------------

def test_the_bootstrap_is_about_the_gated_value_and_its_sample_size():
    from t2i_fairness.families.dig_in.study import DigInStudy

    # Real 0, 1, 5, 6 (radii 1); generated 0.2, 0.2, 5.5, 20, 30 with drop_all: the estimate uses
    # 5.5, 20, 30 -> precision 1/3, coverage 2/4. Resampling all five rows would centre on 3/5 and 4/4.
    m = ReferenceManifold.build(col(0.0, 1.0, 5.0, 6.0), nearest_k=1)
    study = DigInStudy.__new__(DigInStudy)
    study.bench = SimpleNamespace(device="cpu", options=SimpleNamespace(
        dedupe="drop_all", fake_dedupe="auto", dedupe_scope="group", bootstrap=200))
    s = study._group(m, col(0.2, 0.2, 5.5, 20.0, 30.0), "africa")
    assert (s.precision, s.coverage) == (pytest.approx(1 / 3), 0.5)
    assert s.n_fake == 3 and s.member.n_fake == 3  # the gate's n and the bootstrap's units
    # the intervals (#13) are built from that same membership, so they centre on the estimate
    assert s.precision_interval().estimate == pytest.approx(s.precision)
    assert s.coverage_interval().estimate == pytest.approx(s.coverage)
    assert s.report()["n_generated"] == 5 and s.report()["n_duplicates"] == 2


# -- finding 9: GeoDE balanced to 180 per object-region as DIG In samples, countries sharing n --------

def test_balancing_draws_as_dig_in_s_sample_df():
    # DIG In: random.seed(42); random.sample([p0, p1, p2, p3, p4], 3) -> [p0, p4, p2] (Python's
    # documented Mersenne Twister and sample(); the same draw in every 3.x).
    recs = [Record(f"/g/p{i}.png", "bag", "africa") for i in range(5)]
    out = balance_records(recs, per_group=3, seed=42)
    assert {r.path for r in out} == {"/g/p0.png", "/g/p4.png", "/g/p2.png"}


def test_the_balancing_options_default_to_the_paper_and_dig_in_s_seed():
    from t2i_fairness.families import FAMILIES
    from t2i_fairness.spine.options import resolve_options

    o = resolve_options(lambda flag: {"--t2i-reference": []}.get(flag), families=FAMILIES)
    assert (o.balance_per_group, o.balance_seed, o.balance_sampler) == (180, 42, "dig_in")
    small = resolve_options(lambda flag: {"--t2i-reference": [], "--t2i-balance-per-group": "smallest"}.get(flag),
                            families=FAMILIES)
    assert small.balance_per_group is None


def test_a_geode_group_below_180_images_is_an_error_naming_it(tmp_path):
    from test_reference import make_geode

    from t2i_fairness.references.library import load_references
    from t2i_fairness.vocab.geode import GEODE_OBJECTS

    regions = ["Africa", "Americas", "EastAsia", "Europe", "SouthEastAsia", "WestAsia"]
    counts = {(o, r): 2 for o in GEODE_OBJECTS for r in regions}
    counts[("bag", "Africa")] = 1
    root = make_geode(tmp_path / "geode", counts)
    with pytest.raises(ValueError, match=r"per_group=180 is more than .*bag/africa \(1\).*smallest"):
        load_references((("geode", str(root)),), ("bag",), 180, 42, "dig_in")
    load_references.cache_clear()
    ref = load_references((("geode", str(root)),), ("bag",), None, 42, "dig_in")["geode"]
    assert {len(v) for v in ref.groups_by_object_region().values()} == {1}
    load_references.cache_clear()


@pytest.mark.parametrize("n, expected", [(4, [2, 1, 1]), (10, [4, 3, 3]), (180, [60, 60, 60]), (6, [2, 2, 2])])
def test_a_region_s_three_countries_share_its_n_images(n, expected):
    from t2i_fairness.references.grouping import images_per_prompt_for

    # DIG In's prompt file: the countries of an object-region take turns, c0, c1, c2, c0, ...
    assert [images_per_prompt_for("object_in_country", n, i) for i in range(3)] == expected


def test_every_region_gets_exactly_n_country_images():
    from t2i_fairness.references.grouping import images_per_prompt_for

    for n in range(1, 21):
        assert sum(images_per_prompt_for("object_in_country", n, i) for i in range(3)) == n


def test_country_prompts_are_generated_with_their_share(tmp_path):
    from t2i_fairness.references.grouping import PromptSpace, prompt_images
    from t2i_fairness.vocab.geode import REGIONS_BY_SLUG

    asked = {}

    class Bench:
        options = SimpleNamespace(images_per_prompt=4, objects=("bag",))

        def images(self, texts, n, desc=""):
            for t in texts:
                asked[t] = n
            return [[f"{t}#{i}" for i in range(n)] for t in texts]

        def shared(self, key, make):
            return make()

    space = PromptSpace({"bag": "bag"}, (REGIONS_BY_SLUG["europe"],))
    got = prompt_images(Bench(), "object_in_country", space)
    assert asked == {"bag in Italy": 2, "bag in Spain": 1, "bag in the United Kingdom": 1}
    assert sum(len(p.images) for p in got) == 4


def test_countries_are_in_dig_in_s_prompt_file_order():
    from t2i_fairness.vocab.geode import REGIONS_BY_SLUG

    # geode_prompts_countries_fulldataset.csv, first appearance within each object-region block
    assert REGIONS_BY_SLUG["southeast_asia"].countries == ("Indonesia", "the Philippines", "Thailand")
    assert REGIONS_BY_SLUG["west_asia"].countries == ("Turkey", "the United Arab Emirates", "Saudi Arabia")
    assert REGIONS_BY_SLUG["europe"].countries == ("Italy", "Spain", "the United Kingdom")


# -- issue #22: DIG In de-duplicates {object} and {object} in {region} together ----------------------

def _dig_in_get_df_deduped(ids, str_features):
    """DIG In's ``utils.get_df_deduped(df, keep_one=False)`` (utils.py:44-74), spelled out: group the ids
    by their feature string; an id survives only when its group has one member."""
    groups: dict[str, list] = {}
    for i, s in zip(ids, str_features):
        groups.setdefault(s, []).append(i)
    return {g[0] for g in groups.values() if len(g) == 1}


def _pooled_study(scope: str, features: dict):
    """A DIG In study over a two-region, one-object reference with hand-set generated features:
    ``features[(template, region or None, i)]`` is the i-th image of that prompt."""
    from t2i_fairness.families.dig_in.study import DigInStudy
    from t2i_fairness.references.grouping import PromptImages
    from t2i_fairness.vocab.geode import Prompt

    ref = ReferenceSet("hand", tuple(Record(f"synthetic:{r}{i}", "bag", r) for r in ("africa", "europe")
                                     for i in range(4)), synthetic=True, kind="synthetic")

    def images(template, space=None, region=None, object=None):
        keys = sorted({(t, r) for t, r, _ in features if t == template and (region is None or r == region)},
                      key=lambda k: str(k))
        return [PromptImages(Prompt(f"bag{' in ' + r if r else ''}", t, "bag", r),
                             [SimpleNamespace(key=(t, r, i)) for (t2, r2, i) in sorted(features, key=str)
                              if (t2, r2) == (t, r)]) for t, r in keys]

    study = DigInStudy.__new__(DigInStudy)
    study.bench = SimpleNamespace(device="cpu", options=SimpleNamespace(
        dedupe="drop_all", fake_dedupe="auto", dedupe_scope=scope, seed=0, objects=("bag",)),
        features=lambda encoder, refs, desc="": np.array([[features[im.key]] for im in refs], dtype=np.float64).reshape(-1, 1))
    study.library = SimpleNamespace(features=lambda name, encoder: SimpleNamespace(encoder="inception"))
    study.library.sets = {"hand": ref}
    study.images = images
    study.space = lambda name: None
    return study


def test_templates_scope_drops_an_image_duplicated_across_object_and_object_in_region_as_dig_in():
    # {object}: 1.0 (x2 within the template), 7.0 (also generated for "bag in Europe"), 9.0;
    # {object} in {region}: africa 2.0, 3.0, 2.0 (x2 within), europe 7.0, 8.0
    features = {("object", None, 0): 1.0, ("object", None, 1): 1.0, ("object", None, 2): 7.0, ("object", None, 3): 9.0,
                ("object_in_region", "africa", 0): 2.0, ("object_in_region", "africa", 1): 3.0,
                ("object_in_region", "africa", 2): 2.0,
                ("object_in_region", "europe", 0): 7.0, ("object_in_region", "europe", 1): 8.0}
    # brute force: DIG In's regions pickle holds both templates' rows; get_df_deduped over all of them,
    # with the feature string as get_features_inceptionv3.py makes it (str of the feature array)
    ids = sorted(features, key=str)
    survivors = _dig_in_get_df_deduped(ids, [str(np.array([features[k]])) for k in ids])
    assert survivors == {("object", None, 3), ("object_in_region", "africa", 1), ("object_in_region", "europe", 1)}

    pooled = _pooled_study("templates", features)._generated("hand", "object_in_region", "region", None, None)
    got = {region: sorted(rows.ravel().tolist()) for region, (rows, _) in pooled.items()}
    want = {r: sorted(features[k] for k in survivors if k[0] == "object_in_region" and k[1] == r)
            for r in ("africa", "europe")}
    assert got == want == {"africa": [3.0], "europe": [8.0]}
    assert {r: n for r, (_, n) in pooled.items()} == {"africa": 3, "europe": 2}  # before the dedupe
    # {object}'s own rows: 9.0 is all that is left of it (each region samples its object mix from it)
    obj = _pooled_study("templates", features)._generated("hand", "object", "object_region", None, None)
    assert {k: rows.ravel().tolist() for k, (rows, _) in obj.items()} == {("bag", "africa"): [9.0], ("bag", "europe"): [9.0]}

    # the per-template scope (set, the default) keeps the 7.0 of Europe: its copy is in the other template
    per_template = _pooled_study("set", features)._generated("hand", "object_in_region", "region", None, None)
    assert sorted(per_template["europe"][0].ravel().tolist()) == [7.0, 8.0]


def test_templates_scope_leaves_object_in_country_alone_and_plans_both_templates():
    from t2i_fairness.families.dig_in.study import DigInStudy

    study = DigInStudy.__new__(DigInStudy)
    study.bench = SimpleNamespace(options=SimpleNamespace(dedupe_scope="templates", fake_dedupe="auto", dedupe="drop_all"))
    assert study._pool("object_in_region") == study._pool("object") == ("object", "object_in_region")
    assert study._pool("object_in_country") == ("object_in_country",)  # DIG In's countries pickle is its own
    study.bench.options.dedupe_scope = "set"
    assert study._pool("object_in_region") == ("object_in_region",)

    from t2i_fairness.references.grouping import PromptSpace
    from t2i_fairness.vocab.geode import REGIONS_BY_SLUG

    study.bench.options = SimpleNamespace(dedupe_scope="templates", fake_dedupe="auto", dedupe="drop_all",
                                          objects=("bag",), images_per_prompt=2)
    study.space = lambda name: PromptSpace({"bag": "bag"}, (REGIONS_BY_SLUG["europe"],))
    asked = {r.prompt for r in study.requests("hand", "object_in_region", region="europe")}
    assert asked == {"bag", "bag in Europe"}  # a region gate's plan holds both pooled templates' images
    study.bench.options.dedupe_scope = "set"
    assert {r.prompt for r in study.requests("hand", "object_in_region", region="europe")} == {"bag in Europe"}
