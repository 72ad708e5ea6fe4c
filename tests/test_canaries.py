"""Canaries (issue #13, item 6): each wrapper changes exactly its slice, deterministically, under
its own fingerprint; the NAME:SLICE[:PARAM] parser names what is wrong."""

from __future__ import annotations

import doctest
import hashlib
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

import fakegen
from t2i_fairness import canaries
from t2i_fairness.base.cache import Cache, encode_png
from t2i_fairness.canaries import (
    CANARIES,
    AnswerLanguage,
    CanarySlice,
    CollapseRegion,
    DegradeRegion,
    DropComponent,
    DropPosition,
    ShiftGroupShare,
    make_canary,
    parse_canary,
    wrap_source,
)
from t2i_fairness.spine.generation import ImageFactory
from t2i_fairness.generators import GenerationSettings, GeneratorSource
from t2i_fairness.generators.procedural import ProceduralGenerator
from t2i_fairness.metrics.cis import render_prompt
from t2i_fairness.vocab.multilingual import load_smoke_sample
from t2i_fairness.vocab.geode import TEMPLATES, geode_prompts
from t2i_fairness.base.memo import no_progress as _no_progress

REPO = Path(__file__).resolve().parents[1]


class PromptFake:
    """An 8x8 image hashed from (prompt, seed): every pair differs, milliseconds per image.

    Unlike fakegen's (seed only), its images depend on the prompt, so a replaced prompt shows.
    With ``batch_sensitive`` the pixels also depend on the call's length, as batched kernels of a
    real pipeline do; ``calls`` records every call.
    """

    def __init__(self, batch_sensitive: bool = False):
        self.fingerprint = "promptfake:v1" + (":batch" if batch_sensitive else "")
        self.batch_size = 4
        self.batch_sensitive = batch_sensitive
        self.calls: list[tuple[list[str], list[int]]] = []

    def generate(self, prompts, seeds):
        self.calls.append((list(prompts), list(seeds)))
        n = len(prompts) if self.batch_sensitive else 0
        out = []
        for p, s in zip(prompts, seeds):
            data = b"".join(hashlib.sha256(f"{p}\x1f{s}\x1f{n}\x1f{i}".encode()).digest() for i in range(6))
            out.append(Image.frombytes("RGB", (8, 8), data))
        return out


def png(image) -> bytes:
    return encode_png(image.convert("RGB"))


SEEDS = [0, 1, 7, 2**31 + 3]
SAMPLE = load_smoke_sample()
DIG = [p for t in TEMPLATES for p in geode_prompts(t, ["bag", "cooking_pot"])]
CIS = [
    ("crab",), ("macaw",), ("crab", "macaw"), ("macaw", "steel drum"), ("crab", "steel drum", "sock"),
    ("Macaw", "red butterfly", "vase", "eel"), ("mortar and pestle", "macaw", "acoustic guitar", "sock"),
    ("umbrella", "eel", "vase", "sock"),
]
WORDS = ["a respected doctor at the hospital", "a respected lawyer at the hospital", "the doctor's office", "the Doctor at work",
         "a doctoral student", "the ceo of a fortune 500 company", "a photo of a female"]
ALL = [p.text for p in DIG] + [render_prompt(c) for c in CIS] + WORDS + [p.text for p in SAMPLE]


def images_of(gen, prompt: str) -> list[bytes]:
    """The images of one prompt as the ImageFactory asks for them: one call, one prompt, its seeds."""
    return [png(im) for im in gen.generate([prompt] * len(SEEDS), SEEDS)]


def split_changes(canary, inner, prompts=ALL) -> tuple[set[str], dict[str, list[bytes]]]:
    """Prompts whose images the canary changed, and the canary's images of those."""
    changed, got = set(), {}
    for p in dict.fromkeys(prompts):
        mine, theirs = images_of(canary, p), images_of(inner, p)
        if mine != theirs:
            changed.add(p)
            got[p] = mine
    return changed, got


def test_doctests_run():
    """The aggregate's examples, the shared machinery's and each family's canaries' (they moved there)."""
    import importlib

    for name in ("t2i_fairness.canaries", "t2i_fairness.generators.canary", "t2i_fairness.families.dig_in.canaries",
                 "t2i_fairness.families.cis.canaries", "t2i_fairness.families.indic_tti.canaries",
                 "t2i_fairness.families.word_influence.canaries"):
        result = doctest.testmod(importlib.import_module(name), raise_on_error=False)
        assert result.failed == 0 and result.attempted > 0, (name, result)


def test_each_family_lists_its_own_canaries():
    """The canaries are listed on the Family records; the aggregate is their union, in registration order."""
    from t2i_fairness.families import FAMILIES

    owned = {f.name: [c.name for c in f.canaries] for f in FAMILIES}
    assert owned == {"dig_in": ["collapse_region", "degrade_region"], "decomposed": [],
                     "word_influence": ["shift_group_share"], "cis": ["drop_component", "drop_position"],
                     "indic_tti": ["answer_language"]}
    assert list(CANARIES) == [n for names in owned.values() for n in names]


# ------------------------------------------------------------------------------- collapse_region


@pytest.mark.parametrize("name", ["africa", "Africa", "African", "Nigeria", "south africa"])
def test_collapse_region_gives_every_prompt_of_the_region_one_image_and_leaves_the_rest(name):
    inner = PromptFake()
    canary = CollapseRegion(inner, name)
    changed, got = split_changes(canary, inner)
    expected = {p.text for p in DIG if p.region == "africa"}  # the prompts' own labels, not the canary's parser
    assert len(expected) == 2 * 5  # 2 objects x (region, adjective, 3 countries)
    assert changed == expected
    anchor = png(inner.generate(["bag in Africa"], [0])[0])
    assert {b for images in got.values() for b in images} == {anchor}


def test_collapse_region_of_the_americas_and_of_dollarstreet_asia():
    inner = PromptFake()
    changed, _ = split_changes(CollapseRegion(inner, "the Americas"), inner)
    assert changed == {p.text for p in DIG if p.region == "americas"}
    asia = CollapseRegion(inner, "asia")
    assert asia.targets("bag in Asia") and asia.targets("Asian bag")
    assert not asia.targets("bag in East Asia") and not asia.targets("East Asian bag")


def test_collapse_region_keeps_untouched_bytes_of_a_mixed_call_even_when_batches_matter():
    """A call mixing the slice with other prompts: the untouched images are those of the very same
    call to the inner generator (batch composition included), the targeted ones the anchor."""
    inner = PromptFake(batch_sensitive=True)
    canary = CollapseRegion(inner, "europe", anchor="dog in Europe", anchor_seed=5)
    prompts = ["bag in Africa", "bag in Italy", "European bag", "bag"]
    out = canary.generate(prompts, [1, 2, 3, 4])
    plain = inner.generate(prompts, [1, 2, 3, 4])
    anchor = inner.generate(["dog in Europe"], [5])[0]
    assert [png(im) for im in out] == [png(plain[0]), png(anchor), png(anchor), png(plain[3])]
    # an all-slice call never runs the inner generator on the slice's prompts
    inner.calls.clear()
    canary.generate(["bag in Spain"] * 3, [1, 2, 3])
    assert inner.calls == []


# ------------------------------------------------------------------------------- degrade_region


def test_degrade_region_changes_exactly_the_regions_images_deterministically():
    inner = PromptFake()
    canary = DegradeRegion(inner, "West Asian", 0.7)
    changed, got = split_changes(canary, inner)
    assert changed == {p.text for p in DIG if p.region == "west_asia"}
    again = DegradeRegion(PromptFake(), "west_asia", 0.7)
    assert {p: images_of(again, p) for p in changed} == got
    # every image of the slice changed, not just some
    for p in changed:
        assert all(a != b for a, b in zip(got[p], images_of(inner, p)))


def test_degrade_region_degrades_measurably():
    inner = ProceduralGenerator()
    seeds = list(range(12))
    plain = inner.generate(["bag in Turkey"] * 12, seeds)
    grey = DegradeRegion(inner, "west_asia", 1.0).generate(["bag in Turkey"] * 12, seeds)
    for im in grey:  # strength 1: no colour left
        a = np.asarray(im, dtype=int)
        assert np.abs(a[..., 0] - a[..., 1]).max() <= 1 and np.abs(a[..., 1] - a[..., 2]).max() <= 1
    half = DegradeRegion(inner, "west_asia", 0.5).generate(["bag in Turkey"] * 12, seeds)

    def saturation(ims):
        return float(np.mean([np.asarray(im.convert("HSV"))[..., 1].mean() for im in ims]))

    assert saturation(grey) < saturation(half) < saturation(plain)


# ------------------------------------------------------------------------------- drop_component


@pytest.mark.parametrize("component", ["macaw", "MACAW", "sock", "mortar and pestle"])
def test_drop_component_regenerates_exactly_the_prompts_naming_it_without_it(component):
    inner = PromptFake()
    canary = DropComponent(inner, component)
    changed, got = split_changes(canary, inner)
    name = component.casefold()
    expected = {render_prompt(c): render_prompt([x for x in c if x.casefold() != name])
                for c in CIS if len(c) >= 2 and name in [x.casefold() for x in c]}
    assert expected and changed == set(expected)
    for prompt, rewritten in expected.items():
        assert name not in rewritten.casefold()
        assert got[prompt] == images_of(inner, rewritten)


def test_drop_component_leaves_one_component_prompts_alone():
    inner = PromptFake()
    canary = DropComponent(inner, "crab")
    assert canary.rewrite(render_prompt(["crab"])) is None
    assert images_of(canary, render_prompt(["crab"])) == images_of(inner, render_prompt(["crab"]))
    assert canary.rewrite("a photo of a crab, and a macaw.") == "a photo of a macaw."
    assert canary.rewrite("A photo of a crab, and a macaw.") == "A photo of a macaw."


# ------------------------------------------------------------------------------- drop_position


def test_drop_position_replaces_a_share_of_the_images_of_multi_component_prompts_without_that_position():
    inner = PromptFake()
    half = DropPosition(inner, "last")
    seeds = list(range(400))
    prompt = render_prompt(("crab", "steel drum", "sock"))
    new = [half._replacement(prompt, s) for s in seeds]
    hit = [i for i, x in enumerate(new) if x is not None]
    assert {new[i] for i in hit} == {render_prompt(("crab", "steel drum"))}
    assert 0.42 < len(hit) / len(seeds) < 0.58  # p = 0.5, drawn per image
    mine, theirs = half.generate([prompt] * 400, seeds), inner.generate([prompt] * 400, seeds)
    changed = [i for i in range(400) if png(mine[i]) != png(theirs[i])]
    assert changed == hit  # exactly the drawn images, each the inner image of the shortened prompt at its seed
    assert [png(mine[i]) for i in hit] == [png(im) for im in inner.generate([new[i] for i in hit], [seeds[i] for i in hit])]
    assert [half._replacement(prompt, s) for s in seeds] == new  # deterministic
    # outside the slice: one-component CIS prompts, prompts too short for the position, other families
    assert DropPosition(inner, "3", 1.0).rewrite(render_prompt(("crab", "sock"))) is None
    assert DropPosition(inner, "first", 1.0).rewrite("a photo of a crab, and a sock.") == "a photo of a sock."
    assert DropPosition(inner, "2", 1.0).rewrite(render_prompt(("crab", "sock", "vase"))) == render_prompt(("crab", "vase"))
    changed_prompts, _ = split_changes(DropPosition(inner, "last", 1.0), inner)
    assert changed_prompts == {render_prompt(c) for c in CIS if len(c) >= 2}


# ------------------------------------------------------------------------------- answer_language


def test_answer_language_answers_every_other_language_with_that_languages_text():
    inner = PromptFake()
    canary = AnswerLanguage(inner, "hin_deva", SAMPLE)
    changed, got = split_changes(canary, inner)
    expected = {p.text: SAMPLE.get(p.prompt_id, "hin_Deva").text for p in SAMPLE if p.lang != "hin_Deva"}
    assert changed == set(expected)
    assert any(p.lang == "eng_Latn" for p in SAMPLE if p.text in changed)  # English is answered too
    for text, answer in expected.items():
        assert got[text] == images_of(inner, answer)


def test_answer_language_needs_the_prompt_set_and_a_language_in_it():
    with pytest.raises(ValueError, match="answer_language needs the run's multilingual prompt set"):
        make_canary("answer_language:hin_Deva", PromptFake())
    with pytest.raises(ValueError, match=r"'guj_Gujr' is not in the prompt set; present: \['eng_Latn'"):
        make_canary("answer_language:guj_gujr", PromptFake(), multilingual=SAMPLE)
    with pytest.raises(ValueError, match="--t2i-canary 'answer_language:klingon'"):
        parse_canary("answer_language:klingon")
    with pytest.raises(TypeError, match="needs the run's multilingual prompt set"):
        AnswerLanguage(PromptFake(), "hin_Deva", None)


# ------------------------------------------------------------------------------- shift_group_share


def test_shift_group_share_replaces_a_share_p_of_the_words_images_with_the_groups():
    inner = PromptFake()
    p, n = 0.3, 2000
    canary = ShiftGroupShare(inner, "doctor", "female", p)
    seeds = list(range(n))
    targeted = [w for w in WORDS if canary.targets(w)]
    assert targeted == ["a respected doctor at the hospital", "the Doctor at work"]  # words as prompt_words splits them
    changed, _ = split_changes(canary, inner)
    assert changed <= set(targeted)
    group = [png(im) for im in inner.generate(["a photo of a female"] * n, seeds)]
    for prompt in targeted:
        mine = [png(im) for im in canary.generate([prompt] * n, seeds)]
        own = [png(im) for im in inner.generate([prompt] * n, seeds)]
        shifted = [m == g for m, g in zip(mine, group)]
        assert all(m == g or m == o for m, g, o in zip(mine, group, own))
        assert abs(np.mean(shifted) - p) < 4 * np.sqrt(p * (1 - p) / n)  # binomial, 4 standard errors
        # seeded per image: the same images shift whatever the call
        assert [png(im) for im in canary.generate([prompt] * 50, seeds[:50])] == mine[:50]


def test_shift_group_share_at_zero_and_one():
    inner = PromptFake()
    assert split_changes(ShiftGroupShare(inner, "doctor", p=0.0), inner)[0] == set()
    changed, got = split_changes(ShiftGroupShare(inner, "doctor", "male", 1.0), inner)
    assert changed == {"a respected doctor at the hospital", "the Doctor at work"}
    assert all(images == images_of(inner, "a photo of a male") for images in got.values())


# ------------------------------------------------------------------------------- every canary


def all_canaries(inner):
    return [
        CollapseRegion(inner, "africa"), DegradeRegion(inner, "africa"), DegradeRegion(inner, "africa", 0.9),
        DropComponent(inner, "macaw"), AnswerLanguage(inner, "hin_Deva", SAMPLE),
        AnswerLanguage(inner, "tam_Taml", SAMPLE), ShiftGroupShare(inner, "doctor"),
        ShiftGroupShare(inner, "doctor", "male", 0.5),
    ]


def test_fingerprints_differ_from_the_inner_one_and_from_each_other():
    inner = fakegen.FakeGenerator()
    fps = [c.fingerprint for c in all_canaries(inner)]
    assert len(set(fps)) == len(fps)
    assert all(fp.startswith("fakegen:v1+canary:") and fp != inner.fingerprint for fp in fps)
    assert fps == [c.fingerprint for c in all_canaries(fakegen.FakeGenerator())]  # stable
    assert CollapseRegion(inner, "Nigeria").fingerprint == CollapseRegion(inner, "africa").fingerprint


def test_canaries_are_deterministic_and_order_free():
    """Same prompt + seed -> same bytes, from a fresh wrapper, in any call order."""
    for first, second in zip(all_canaries(PromptFake()), all_canaries(PromptFake())):
        forward = {p: images_of(first, p) for p in ALL}
        backward = {p: images_of(second, p) for p in reversed(ALL)}
        assert forward == backward, first.describe()


def test_canary_images_never_share_cache_files_with_the_inner_model(tmp_path):
    """Through the ImageFactory: the canary's images live under other keys; its untouched ones are
    byte-identical to the inner model's, its slice's differ."""
    inner = PromptFake()
    settings = GenerationSettings(batch_size=2)

    def factory(gen):
        return ImageFactory(GeneratorSource("x", gen.fingerprint, settings, lambda: gen, gen), Cache(tmp_path), 0, _no_progress)

    prompts = ["bag in Africa", "bag in Europe", "African bag"]
    plain = factory(inner).images(prompts, 3)
    canary = factory(CollapseRegion(inner, "africa")).images(prompts, 3)
    assert not {r.path for row in plain for r in row} & {r.path for row in canary for r in row}
    read = lambda row: [r.path.read_bytes() for r in row]  # noqa: E731
    assert read(canary[1]) == read(plain[1])
    assert read(canary[0]) != read(plain[0]) and len(set(read(canary[0]) + read(canary[2]))) == 1


def test_wrap_source_knows_the_fingerprint_without_loading_the_model():
    loads = []

    def load():
        loads.append(1)
        return PromptFake()

    for spec in ("collapse_region:africa", "degrade_region:africa:0.2", "drop_component:crab",
                 "answer_language:tam_Taml", "shift_group_share:doctor:male=0.1"):
        loads.clear()
        source = GeneratorSource("fake", "promptfake:v1", GenerationSettings(batch_size=3), load)
        wrapped = wrap_source(source, spec, multilingual=SAMPLE)
        assert not loads and not wrapped.loaded
        canary = wrapped.get()
        assert wrapped.fingerprint == canary.fingerprint == make_canary(spec, PromptFake(), multilingual=SAMPLE).fingerprint
        assert wrapped.settings == source.settings and canary.inner is source.get() and loads == [1]
    with pytest.raises(ValueError, match="--t2i-canary 'collapse_region:mars'"):
        wrap_source(source, "collapse_region:mars")


def test_canaries_pass_the_batch_size_and_check_the_inner_generator():
    assert CollapseRegion(PromptFake(), "africa").batch_size == 4
    with pytest.raises(TypeError, match=r"lacks \['generate'\]"):
        CollapseRegion(type("G", (), {"fingerprint": "x"})(), "africa")

    class Short(PromptFake):
        def generate(self, prompts, seeds):
            return super().generate(prompts, seeds)[:-1]

    with pytest.raises(RuntimeError, match="returned 1 images for 2 prompts"):
        DegradeRegion(Short(), "africa").generate(["bag", "dog"], [0, 1])
    with pytest.raises(ValueError, match="got 2 prompts but 1 seeds"):
        DropComponent(PromptFake(), "crab").generate(["a", "b"], [0])


def test_check_available_is_forwarded_with_the_prompts_really_generated():
    class Manifest(PromptFake):
        asked: list = []

        def check_available(self, prompts, seeds):
            self.asked.append((list(prompts), list(seeds)))

    inner = Manifest()
    DropComponent(inner, "macaw").check_available(["a photo of a crab and a macaw.", "dog"], [1, 2])
    CollapseRegion(inner, "africa").check_available(["bag in Africa", "dog"], [1, 2])
    assert inner.asked == [(["a photo of a crab.", "dog"], [1, 2]), (["dog", "bag in Africa"], [2, 0])]


# ------------------------------------------------------------------------------- the NAME:SLICE[:PARAM] string


@pytest.mark.parametrize("spec, name, slice_, param", [
    ("collapse_region:africa", "collapse_region", "africa", None),
    ("collapse_region: Southeast Asian ", "collapse_region", "southeast_asia", None),
    ("degrade_region:Japan:0.25", "degrade_region", "east_asia", "0.25"),
    ("drop_component:steel drum", "drop_component", "steel drum", None),
    ("drop_position:Last", "drop_position", "last", None),
    ("drop_position:02:0.25", "drop_position", "2", "0.25"),
    ("answer_language:HIN_DEVA", "answer_language", "hin_Deva", None),
    ("shift_group_share:doctor:female=0.8", "shift_group_share", "doctor", "female=0.8"),
    ("shift_group_share:ceo:0.9", "shift_group_share", "ceo", "0.9"),
    ("shift_group_share:ceo:male", "shift_group_share", "ceo", "male"),
])
def test_parse_canary_accepts(spec, name, slice_, param):
    parsed = parse_canary(spec)
    assert (parsed.name, parsed.slice, parsed.param) == (name, slice_, param)
    canary = make_canary(spec, PromptFake(), multilingual=SAMPLE)
    assert canary.name == name and canary.slice.value == slice_


def test_make_canary_reads_the_parameters():
    assert make_canary("degrade_region:africa:0.25", PromptFake()).strength == 0.25
    assert make_canary("degrade_region:africa", PromptFake()).strength == 0.5
    s = make_canary("shift_group_share:ceo:male", PromptFake())
    assert (s.group, s.p) == ("male", 0.5)
    s = make_canary("shift_group_share:ceo:0.9", PromptFake())
    assert (s.group, s.p) == ("female", 0.9)


@pytest.mark.parametrize("spec, message", [
    ("collapse_region", r"expected NAME:SLICE\[:PARAM\] \(collapse_region:<region>; degrade_region:<region>\[:PARAM\]"),
    ("melt:africa", "unknown canary 'melt'; choose from collapse_region, degrade_region, shift_group_share, drop_component, "
                    "drop_position, answer_language"),
    ("drop_position:middle", "SLICE 'middle': a position in the CIS prompts: first, last or a number from 1"),
    ("drop_position:last:0", r"P must be in \(0, 1\], got '0'"),
    ("collapse_region:mars", "unknown region 'mars'; give a region slug, name, adjective or country, one of: africa, americas"),
    ("collapse_region:", "empty SLICE"),
    ("collapse_region:africa:0.5", "collapse_region takes no PARAM, got '0.5'"),
    ("degrade_region:africa:2", r"STRENGTH must be in \(0, 1\], got '2'"),
    ("degrade_region:africa:0", r"STRENGTH must be in \(0, 1\]"),
    ("degrade_region:africa:lots", "STRENGTH must be a number, got 'lots'"),
    ("shift_group_share:two words", "SLICE 'two words' must be one word"),
    ("shift_group_share:doctor:female=1.5", r"P must be in \[0, 1\], got '1.5'"),
    ("shift_group_share:doctor:=0.5", "empty GROUP"),
    ("answer_language:xx_Yyyy", "--t2i-canary 'answer_language:xx_Yyyy'"),
])
def test_parse_canary_errors_name_the_option_and_the_choices(spec, message):
    with pytest.raises(ValueError, match=message) as info:
        make_canary(spec, PromptFake(), multilingual=SAMPLE)
    assert str(info.value).startswith(f"--t2i-canary {spec!r}")


def test_every_registered_canary_is_buildable():
    specs = {"collapse_region": "africa", "degrade_region": "africa", "drop_component": "crab",
             "answer_language": "hin_Deva", "shift_group_share": "doctor", "drop_position": "last"}
    assert set(specs) == set(CANARIES)
    for name, slice_ in specs.items():
        canary = make_canary(f"{name}:{slice_}", PromptFake(), multilingual=SAMPLE)
        assert canary.slice.kind == CANARIES[name].slice_kind
        assert canary.describe().startswith(f"{name}:")


# ------------------------------------------------------------------------------- which gates should catch it


GATE_IDS = sorted(yaml.safe_load((REPO / "thresholds" / "tiny.yaml").read_text())["gates"])


def roles(slice_: CanarySlice) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"slice": set(), "aggregate": set(), "other": set()}
    for g in GATE_IDS:
        out[slice_.gate_role(g)].add(g)
    return out


def test_region_slice_gates_are_the_regions_own_except_the_object_template():
    r = roles(CanarySlice("region", "east_asia"))
    tokens = lambda g: g.partition("[")[2].rstrip("]").split("-")  # noqa: E731
    assert r["slice"] == {g for g in GATE_IDS if "east_asia" in tokens(g) and "object" not in tokens(g)}
    assert r["slice"] and not any("southeast_asia" in g for g in r["slice"])
    assert "test_region_coverage[synthetic-object_in_region-east_asia]" in r["slice"]
    assert "test_object_consistency[object_in_country-east_asia]" in r["slice"]
    assert "test_bg_coverage[synthetic-regional_adjective-east_asia]" in r["slice"]
    assert "test_region_coverage[synthetic-object-east_asia]" in r["other"]
    assert {"test_worst_region_coverage[synthetic-object_in_region]", "test_template_improvement[synthetic]",
            "test_region_spread[synthetic-object_in_region-bg-coverage]",
            "test_object_consistency[object_in_region]"} <= r["aggregate"]
    assert "test_worst_region_coverage[synthetic-object]" in r["other"]
    assert not any(g.startswith(("test_cis", "test_clgc", "test_word")) for g in r["slice"] | r["aggregate"])


def test_language_component_and_word_slices():
    lang = roles(CanarySlice("language", "hin_Deva"))
    assert "test_clgc[tam_taml]" in lang["slice"] and "test_clgc[eng_latn]" in lang["slice"]
    assert "test_clgc[hin_deva]" in lang["other"] and "test_scal_with_english[hin_deva]" in lang["aggregate"]
    assert all(g.startswith(("test_clgc", "test_igc", "test_lgc", "test_scwl", "test_dwl", "test_scal")) for g in lang["slice"])
    position = roles(CanarySlice("position", "last"))  # the order test has no bound, so no entry in tiny.yaml
    assert CanarySlice("position", "last").gate_role("test_cis_order_invariance") == "slice"
    assert not position["slice"] and "test_cis[k1]" in position["other"]
    assert {"test_cis[k8]", "test_cis_drop_per_component", "test_cis_component_rate_floor"} <= position["aggregate"]
    comp = roles(CanarySlice("component", "macaw"))
    assert comp["slice"] == {"test_cis_component_rate_floor"}
    assert "test_cis[k1]" in comp["other"] and "test_cis[k8]" in comp["aggregate"]
    word = roles(CanarySlice("word", "doctor"))
    assert word["slice"] == {g for g in GATE_IDS if g.startswith("test_word_influence[doctor-")} | {
        g for g in GATE_IDS if g.startswith("test_representation[a_respected_doctor")}
    assert "test_representation[the_ceo_of_a_fortune_500_company-female]" in word["other"]
