"""Reference data loaders: GeoDE, DollarStreet, manifest, synthetic; balancing; errors."""

from __future__ import annotations

import csv
import doctest
import os
import random
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from t2i_fairness.references import sets as reference
from t2i_fairness.references.sets import (
    Record,
    ReferenceSet,
    balance_records,
    detect_kind,
    load_dollarstreet,
    load_geode,
    load_manifest,
    load_reference,
    open_image,
    parse_reference_option,
    reference_from_option,
    render_synthetic,
    synthetic_reference,
)

GEODE_NAMES = {  # slug -> how GeoDE's index.csv spells the region
    "africa": "Africa",
    "americas": "Americas",
    "east_asia": "EastAsia",
    "europe": "Europe",
    "southeast_asia": "SouthEastAsia",
    "west_asia": "WestAsia",
}
COUNTRY = {"Africa": "Nigeria", "Americas": "Mexico", "EastAsia": "Japan", "Europe": "Italy",
           "SouthEastAsia": "Thailand", "WestAsia": "Turkey"}


def _png(path: Path, colour=(120, 30, 200), size=4) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (size, size), colour).save(path)


def _write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def make_geode(root: Path, counts: dict[tuple[str, str], int], extra_rows: list[list] = ()) -> Path:
    """A fake GeoDE release: index.csv (with pandas' unnamed index column) and images/.

    ``counts`` maps (object, GeoDE region name) to how many images to create.
    """
    rows = []
    for (obj, region), n in counts.items():
        for i in range(n):
            rel = f"{obj}/{region}_{COUNTRY[region]}_{obj}_{i}.png"
            _png(root / "images" / rel, colour=(10 * i % 255, len(obj) * 9 % 255, len(region) * 13 % 255))
            rows.append([len(rows), rel, obj, region, COUNTRY[region]])
    for extra in extra_rows:
        rows.append([len(rows), *extra])
    _write_csv(root / "index.csv", ["", "file_path", "object", "region", "ip_country"], rows)
    return root


def full_geode(root: Path, objects=("bag", "car"), sizes=(3, 4, 5)) -> Path:
    counts = {}
    for k, obj in enumerate(objects):
        for j, region in enumerate(GEODE_NAMES.values()):
            counts[(obj, region)] = sizes[(k + j) % len(sizes)]
    return make_geode(root, counts)


DS_HEADER = ["id", "country.id", "country.name", "region.id", "place", "income", "imageRelPath", "topics"]


def make_dollarstreet(root: Path, rows: list[tuple[str, str, str]], nested: bool = True) -> Path:
    """A fake DollarStreet release; rows are (topics cell, region.id, country.name)."""
    base = root / "dataset_dollarstreet" if nested else root
    out = []
    for i, (topics, region, country) in enumerate(rows):
        rel = f"assets/{i:05d}.jpg"
        _png(base / rel, colour=(i * 7 % 255, 50, 90))
        out.append([f"id{i}", country[:2].lower(), country, region, f"place{i}", 100 + i, rel, topics])
    _write_csv(base / "images_v2.csv", DS_HEADER, out)
    return root


def basic_dollarstreet_rows() -> list[tuple[str, str, str]]:
    rows = []
    for region, country in (("af", "Nigeria"), ("am", "Mexico"), ("as", "India"), ("eu", "Italy")):
        rows += [("['toothbrush']", region, country)] * 2
        rows += [("['Stove/hob']", region, country)]
    rows += [("['toothbrush']", "as", "India")] * 3  # imbalanced: Asia has more
    rows += [("['toothbrush', 'Tooth paste']", "eu", "Italy")]  # multi-topic: dropped
    rows += [("['Cooking pots']", "af", "Nigeria")]  # only in Africa: dropped by default
    rows += [("['Nicest shoes']", "am", "Mexico")]  # subjective, not in DIG In's list
    return rows


def make_manifest(root: Path, rows: list[list], header=("path", "object", "region", "country")) -> Path:
    for row in rows:
        if not os.path.isabs(row[0]):
            _png(root / row[0])
    return _write_csv(root / "manifest.csv", list(header), rows)


# ------------------------------------------------------------------ option parsing and detection


def test_parse_reference_option():
    assert parse_reference_option("geode=/data/geode") == ("geode", Path("/data/geode"))
    assert parse_reference_option(" ds = /a=b ") == ("ds", Path("/a=b"))
    assert parse_reference_option("offline=synthetic") == ("offline", Path("synthetic"))


@pytest.mark.parametrize("value", ["geode", "=/data", "geode=", "my set=/d", "-x=/d", "a/b=/d"])
def test_parse_reference_option_malformed(value):
    with pytest.raises(ValueError, match="--t2i-reference") as info:
        parse_reference_option(value)
    assert repr(value) in str(info.value) or "NAME=PATH" in str(info.value)


def test_detect_kind_folders_and_files(tmp_path):
    geode = full_geode(tmp_path / "geode")
    ds = make_dollarstreet(tmp_path / "ds", basic_dollarstreet_rows())
    man = tmp_path / "man"
    make_manifest(man, [["a.png", "bag", "africa", ""]])
    assert detect_kind(geode) == "geode"
    assert detect_kind(geode / "index.csv") == "geode"
    assert detect_kind(ds) == "dollarstreet"  # finds dataset_dollarstreet/images_v2.csv
    assert detect_kind(ds / "dataset_dollarstreet" / "images_v2.csv") == "dollarstreet"
    assert detect_kind(man) == "manifest"
    assert detect_kind(man / "manifest.csv") == "manifest"
    assert detect_kind("synthetic") == "synthetic"


def test_detect_kind_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        detect_kind(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"index\.csv.*images_v2\.csv.*manifest\.csv"):
        detect_kind(tmp_path / "empty")
    odd = _write_csv(tmp_path / "odd.csv", ["a", "b"], [[1, 2]])
    expected = r"odd\.csv.*\['a', 'b'\].*file_path.*imageRelPath.*path, object, region"
    with pytest.raises(ValueError, match=expected):
        detect_kind(odd)


# ------------------------------------------------------------------ GeoDE


def test_geode_loads_balanced_by_default(tmp_path):
    root = full_geode(tmp_path, objects=("bag", "cooking_pot"))
    ref = load_geode(root, objects=["bag", "cooking pot"])  # names or codes
    assert ref.kind == "geode" and not ref.synthetic
    assert ref.regions == list(reference.GEODE_REGION_SLUGS)
    groups = ref.groups_by_object_region()
    assert len(groups) == 12
    assert {len(v) for v in groups.values()} == {3}  # the smallest group
    rec = groups[("cooking_pot", "east_asia")][0]
    assert rec.country == "Japan"
    assert os.path.isabs(rec.path) and Path(rec.path).is_file()
    assert "balanced to 3" in ref.description


def test_geode_unbalanced_per_group_and_region_selection(tmp_path):
    root = full_geode(tmp_path)
    full = load_geode(root, objects=["bag", "car"], balance=False)
    assert len(full) == sum(len(v) for v in full.groups_by_object_region().values())
    assert {len(v) for v in full.groups_by_object_region().values()} == {3, 4, 5}
    two = load_geode(root, objects=["bag", "car"], per_group=2, seed=3)
    assert {len(v) for v in two.groups_by_object_region().values()} == {2}
    some = load_geode(root, objects=["car"], regions=["europe", "africa"], balance=False)
    assert some.regions == ["africa", "europe"] and some.objects == ["car"]


def test_geode_skips_objects_dig_in_does_not_use(tmp_path):
    counts = {(o, r): 2 for o in ("bag",) for r in GEODE_NAMES.values()}
    counts[("boat", "Africa")] = 2  # one of GeoDE's 40 objects that DIG In drops
    root = make_geode(tmp_path, counts)
    ref = load_geode(root, objects=["bag"])
    assert ref.objects == ["bag"]
    assert "skipped 2 images of 1 objects" in ref.description


def test_geode_paths_relative_to_the_csv_folder_also_work(tmp_path):
    _png(tmp_path / "pics" / "a.png")
    rows = [[0, "pics/a.png", "bag", region, "X"] for region in GEODE_NAMES.values()]
    _write_csv(tmp_path / "index.csv", ["", "file_path", "object", "region", "ip_country"], rows)
    ref = load_geode(tmp_path, objects=["bag"])
    assert len(ref) == 6 and Path(ref.records[0].path) == tmp_path / "pics" / "a.png"


def test_geode_unknown_region_names_file_line_value_and_choices(tmp_path):
    root = full_geode(tmp_path, objects=("bag",))
    with open(root / "index.csv", "a", newline="") as f:
        csv.writer(f).writerow([99, "bag/x.png", "bag", "Oceania", "Fiji"])
    last = len((root / "index.csv").read_text().splitlines())
    with pytest.raises(ValueError) as info:
        load_geode(root, objects=["bag"])
    msg = str(info.value)
    assert str(root / "index.csv") in msg and f"({last - 1} data rows)" in msg
    assert "'region'" in msg and "'Oceania'" in msg and f"line {last})" in msg
    assert "SouthEastAsia" in msg and "WestAsia" in msg


def test_geode_missing_columns_lists_found_and_expected(tmp_path):
    _write_csv(tmp_path / "index.csv", ["file_path", "obj", "region"], [["a.png", "bag", "Africa"]])
    with pytest.raises(ValueError) as info:
        load_geode(tmp_path)
    msg = str(info.value)
    assert "index.csv" in msg and "object (one of ['object', 'script_name'])" in msg
    assert "found columns ['file_path', 'obj', 'region']" in msg


def test_geode_missing_files_lists_first_few_and_count(tmp_path):
    root = full_geode(tmp_path, objects=("bag",))
    victims = sorted((root / "images" / "bag").glob("*.png"))[:7]
    for v in victims:
        v.unlink()
    with pytest.raises(ValueError) as info:
        load_geode(root, objects=["bag"])
    msg = str(info.value)
    assert "7 listed image(s) are missing" in msg and "and 2 more" in msg
    assert "(line " in msg and str(root / "index.csv") in msg
    load_geode(root, objects=["bag"], check_files=False, balance=False)  # opt-out works


def test_geode_empty_group_is_an_error(tmp_path):
    counts = {("bag", r): 2 for r in GEODE_NAMES.values()}
    counts.update({("hat", r): 2 for r in list(GEODE_NAMES.values())[:4]})  # no hat in SE/W Asia
    root = make_geode(tmp_path, counts)
    with pytest.raises(ValueError) as info:
        load_geode(root, objects=["bag", "hat"])
    msg = str(info.value)
    assert "2 object-region group(s)" in msg and "hat/southeast_asia" in msg and "hat/west_asia" in msg
    assert str(root / "index.csv") in msg
    # the default (all 27 objects) fails the same way, listing how many groups are empty
    with pytest.raises(ValueError, match=r"object-region group\(s\).*and \d+ more"):
        load_geode(root)


def test_geode_unknown_object_or_region_selection(tmp_path):
    root = full_geode(tmp_path)
    with pytest.raises(ValueError, match=r"unknown GeoDE object\(s\) \['spaceship'\]; choose from .*'bag'"):
        load_geode(root, objects=["spaceship"])
    with pytest.raises(ValueError, match=r"unknown GeoDE region\(s\) \['asia'\]; choose from .*'east_asia'"):
        load_geode(root, regions=["asia"])
    with pytest.raises(ValueError, match="list of names"):
        load_geode(root, objects="bag")


def test_geode_empty_field(tmp_path):
    root = full_geode(tmp_path, objects=("bag",))
    with open(root / "index.csv", "a", newline="") as f:
        csv.writer(f).writerow([99, "", "bag", "Africa", "Nigeria"])
    last = len((root / "index.csv").read_text().splitlines())
    with pytest.raises(ValueError, match=rf"field 'path' is empty on line\(s\) {last}$"):
        load_geode(root, objects=["bag"])


def test_empty_csv(tmp_path):
    (tmp_path / "index.csv").write_text("")
    with pytest.raises(ValueError, match=r"index\.csv is empty"):
        load_geode(tmp_path)


# ------------------------------------------------------------------ DollarStreet


def test_dollarstreet_loads_like_dig_in(tmp_path):
    root = make_dollarstreet(tmp_path, basic_dollarstreet_rows())
    ref = load_dollarstreet(root)
    assert ref.kind == "dollarstreet"
    assert ref.regions == ["africa", "americas", "europe", "asia"]
    assert ref.objects == ["stove_hob", "toothbrush"]  # slugified topics; cooking_pots not in every region
    assert ref.object_mix("asia") == {"stove_hob": 1, "toothbrush": 5}  # original distribution kept
    assert ref.object_mix("europe") == {"stove_hob": 1, "toothbrush": 2}  # multi-topic image dropped
    assert {r.country for r in ref.groups_by_region()["americas"]} == {"Mexico"}
    assert all(Path(r.path).is_file() for r in ref.records)
    assert "1 multi-topic" in ref.description and "1 objects not in every region" in ref.description


def test_dollarstreet_options(tmp_path):
    root = make_dollarstreet(tmp_path, basic_dollarstreet_rows(), nested=False)
    keep = load_dollarstreet(root / "images_v2.csv", require_all_regions=False)
    assert "cooking_pots" in keep.objects and "nicest_shoes" not in keep.objects
    mine = load_dollarstreet(root, objects=["Nicest shoes"], regions=["americas"])
    assert mine.objects == ["nicest_shoes"] and mine.regions == ["americas"]
    bal = load_dollarstreet(root, balance=True)
    assert {len(v) for v in bal.groups_by_object_region().values()} == {1}
    sub = load_dollarstreet(root, regions=["asia", "europe"])
    assert sub.regions == ["europe", "asia"]


def test_dollarstreet_requested_object_or_region_without_images(tmp_path):
    root = make_dollarstreet(tmp_path, basic_dollarstreet_rows())
    with pytest.raises(ValueError) as info:
        load_dollarstreet(root, objects=["toothbrush", "bicycle"])
    msg = str(info.value)
    assert "images_v2.csv" in msg and "['bicycle']" in msg and "toothbrush" in msg
    only_africa = make_dollarstreet(tmp_path / "af", [("['toothbrush']", "af", "Nigeria")])
    three = r"no usable images for region\(s\) \['americas', 'asia', 'europe'\]; regions with images: \['africa'\]"
    with pytest.raises(ValueError, match=three):
        load_dollarstreet(only_africa, require_all_regions=False)
    everything = r"region\(s\) \['africa', 'americas', 'asia', 'europe'\]; regions with images: \[\]"
    with pytest.raises(ValueError, match=everything):
        load_dollarstreet(only_africa)  # toothbrush is not in every region, so nothing is left
    with pytest.raises(ValueError, match=r"unknown DollarStreet region\(s\) \['east_asia'\]"):
        load_dollarstreet(root, regions=["east_asia"])


def test_dollarstreet_bad_region_and_topics(tmp_path):
    rows = basic_dollarstreet_rows() + [("['toothbrush']", "oc", "Fiji"), ("['toothbrush'", "af", "Nigeria")]
    root = make_dollarstreet(tmp_path, rows)
    with pytest.raises(ValueError) as info:
        load_dollarstreet(root)
    msg = str(info.value)
    assert "images_v2.csv" in msg
    assert "'region'" in msg and "'oc'" in msg and "['af', 'am', 'as', 'eu']" in msg
    assert "'topics'" in msg and '"[\'toothbrush\'"' in msg
    assert f"line {len(rows) + 1}" in msg  # header is line 1


def test_dollarstreet_missing_files(tmp_path):
    root = make_dollarstreet(tmp_path, basic_dollarstreet_rows())
    (root / "dataset_dollarstreet" / "assets" / "00000.jpg").unlink()
    with pytest.raises(ValueError, match=r"1 listed image\(s\) are missing: .*00000\.jpg \(line 2\)"):
        load_dollarstreet(root)


# ------------------------------------------------------------------ manifest


def test_manifest_loads(tmp_path):
    rows = [
        ["img/a.png", "bag", "africa", "Nigeria"],
        ["img/b.png", "cooking pot", "EastAsia", ""],
        ["img/c.png", "toothbrush", "asia", "India"],
        [str(tmp_path / "abs.png"), "bag", "Europe", ""],
    ]
    _png(tmp_path / "abs.png")
    make_manifest(tmp_path, rows)
    ref = load_manifest(tmp_path)
    assert ref.name == "manifest" and ref.kind == "manifest" and not ref.synthetic
    assert ref.regions == ["africa", "east_asia", "europe", "asia"]
    assert {(r.object, r.region, r.country) for r in ref.records} == {
        ("bag", "africa", "Nigeria"), ("cooking_pot", "east_asia", None),
        ("toothbrush", "asia", "India"), ("bag", "europe", None),
    }
    assert load_manifest(tmp_path / "manifest.csv", regions=["asia"]).objects == ["toothbrush"]


def test_manifest_without_country_column(tmp_path):
    make_manifest(tmp_path, [["a.png", "bag", "africa"]], header=("path", "object", "region"))
    assert load_manifest(tmp_path).records[0].country is None


def test_manifest_unknown_values_name_lines_and_choices(tmp_path):
    make_manifest(tmp_path, [
        ["a.png", "bag", "africa", ""],
        ["b.png", "spaceship", "africa", ""],
        ["c.png", "bag", "Atlantis", ""],
        ["d.png", "spaceship", "europe", ""],
    ])
    with pytest.raises(ValueError) as info:
        load_manifest(tmp_path)
    msg = str(info.value)
    assert str(tmp_path / "manifest.csv") in msg and "(4 data rows)" in msg
    assert "field 'object': 2 row(s) with unknown value(s) 'spaceship' (lines 3, 5)" in msg
    assert "field 'region': 1 row(s) with unknown value(s) 'Atlantis' (line 4)" in msg
    assert "'southeast_asia'" in msg and "'cooking_pot'" in msg


def test_manifest_missing_file_and_empty_selection(tmp_path):
    make_manifest(tmp_path, [["a.png", "bag", "africa", ""]])
    with open(tmp_path / "manifest.csv", "a", newline="") as f:
        csv.writer(f).writerow(["ghost.png", "bag", "africa", ""])
    with pytest.raises(ValueError, match=r"1 listed image\(s\) are missing: .*ghost\.png \(line 3\)"):
        load_manifest(tmp_path)
    (tmp_path / "ghost.png").write_bytes(b"")
    with pytest.raises(ValueError, match=r"no images for region\(s\) \['europe'\]; present: \['africa'\]"):
        load_manifest(tmp_path, regions=["africa", "europe"])


# ------------------------------------------------------------------ images


def test_open_image_reads_and_names_broken_files(tmp_path):
    _png(tmp_path / "ok.png", size=5)
    img = open_image(Record(str(tmp_path / "ok.png"), "bag", "africa"))
    assert img.mode == "RGB" and img.size == (5, 5)
    (tmp_path / "junk.png").write_bytes(b"not an image")
    with pytest.raises(ValueError, match=r"cannot read reference image .*junk\.png \(bag, africa\)"):
        open_image(Record(str(tmp_path / "junk.png"), "bag", "africa"))
    whole = (tmp_path / "ok.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"cut\.png"):
        open_image(Record(str(tmp_path / "cut.png"), "car", "europe"))
    with pytest.raises(ValueError, match=r"gone\.png \(car, europe\) is missing"):
        open_image(Record(str(tmp_path / "gone.png"), "car", "europe"))


def test_check_images_reports_all_corrupt_files(tmp_path):
    root = full_geode(tmp_path, objects=("bag",))
    files = sorted((root / "images" / "bag").glob("*.png"))
    for f in files[:2]:
        f.write_bytes(b"garbage")
    ref = load_geode(root, objects=["bag"], balance=False)
    with pytest.raises(ValueError, match=r"2 unreadable image\(s\)") as info:
        ref.check_images()
    assert files[0].name in str(info.value)


# ------------------------------------------------------------------ synthetic


def test_synthetic_is_labelled_synthetic_everywhere():
    ref = synthetic_reference(["bag", "car"], ["africa", "europe"], per_group=2)
    assert ref.synthetic and ref.kind == "synthetic" and "synthetic" in ref.name
    assert "SYNTHETIC" in ref.description and "not real" in ref.description
    assert synthetic_reference(["bag"], ["africa"], 1, name="offline").name == "offline-synthetic"
    assert len(ref) == 8 and ref.object_mix("europe") == {"bag": 2, "car": 2}


def test_synthetic_images_are_byte_identical_for_a_seed(tmp_path):
    labels = (["bag", "dog"], ["africa", "west_asia"])
    a = synthetic_reference(*labels, per_group=3, seed=5, folder=tmp_path / "a")
    b = synthetic_reference(*labels, per_group=3, seed=5, folder=tmp_path / "b")
    bytes_a = [Path(r.path).read_bytes() for r in a.records]
    assert bytes_a == [Path(r.path).read_bytes() for r in b.records]
    virtual = synthetic_reference(*labels, per_group=3, seed=5)
    on_disk = np.asarray(Image.open(a.records[0].path))
    assert np.array_equal(np.asarray(open_image(virtual.records[0])), on_disk)
    assert a.fingerprint == b.fingerprint == virtual.fingerprint
    other = synthetic_reference(*labels, per_group=3, seed=6, folder=tmp_path / "a")
    assert [Path(r.path).read_bytes() for r in other.records] != bytes_a
    assert other.fingerprint != a.fingerprint
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["seed5-64px", "seed6-64px"]


def test_synthetic_cache_writes_atomically_and_once(tmp_path):
    ref = synthetic_reference(["bag"], ["africa", "europe"], per_group=2, folder=tmp_path)
    first = Path(ref.records[0].path)
    stamp = first.stat().st_mtime_ns
    os.utime(first, ns=(stamp - 10**9, stamp - 10**9))
    synthetic_reference(["bag"], ["africa", "europe"], per_group=2, folder=tmp_path)
    assert first.stat().st_mtime_ns == stamp - 10**9  # identical bytes: left alone
    first.write_bytes(b"corrupt")
    again = synthetic_reference(["bag"], ["africa", "europe"], per_group=2, folder=tmp_path)
    assert open_image(again.records[0]).size == (64, 64)  # rewritten
    assert not list(tmp_path.rglob("*.tmp"))


def test_synthetic_groups_differ_in_simple_statistics():
    ref = synthetic_reference(["bag", "stove"], ["africa", "east_asia", "europe"], per_group=6, size=32)
    means = {}
    for key, recs in ref.groups_by_object_region().items():
        pixels = np.stack([np.asarray(open_image(r), dtype=float) for r in recs])
        assert pixels.std(axis=0).mean() > 5  # images within a group differ
        means[key] = pixels.mean(axis=(0, 1, 2))
    keys = list(means)
    gaps = [np.abs(means[a] - means[b]).max() for i, a in enumerate(keys) for b in keys[i + 1:]]
    assert min(gaps) > 3


def test_synthetic_errors():
    with pytest.raises(ValueError, match=r"unknown region\(s\) \['mars'\]; choose from .*'asia'"):
        synthetic_reference(["bag"], ["mars"])
    with pytest.raises(ValueError, match=r"unknown object\(s\) \['unicorn'\]"):
        synthetic_reference(["unicorn"], ["africa"])
    with pytest.raises(ValueError, match="per_group must be a positive integer"):
        synthetic_reference(["bag"], ["africa"], per_group=0)
    with pytest.raises(ValueError, match="size must be"):
        render_synthetic("bag", "africa", 0, size=2)
    with pytest.raises(ValueError, match="renderer v99"):
        open_image(Record("synthetic:v99/seed0-64px/africa/bag/0000.png", "bag", "africa"))


# ------------------------------------------------------------------ ReferenceSet


def test_groups_and_object_mix(tmp_path):
    ref = synthetic_reference(["bag", "car", "dog"], ["europe", "africa"], per_group=2)
    assert list(ref.groups_by_region()) == ["africa", "europe"]
    assert list(ref.groups_by_object_region())[:2] == [("bag", "africa"), ("bag", "europe")]
    assert ref.object_mix("africa") == {"bag": 2, "car": 2, "dog": 2}
    with pytest.raises(ValueError, match=r"no images for region 'asia'; choose from \['africa', 'europe'\]"):
        ref.object_mix("asia")


def test_fingerprint_stable_cheap_and_content_based(tmp_path):
    root = full_geode(tmp_path / "one", objects=("bag",))
    fp = load_geode(root, objects=["bag"]).fingerprint
    assert len(fp) == 16 and fp == load_geode(root, objects=["bag"]).fingerprint
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    assert load_geode(copy, objects=["bag"]).fingerprint == fp  # relative paths: location-free
    for f in (copy / "images").rglob("*.png"):
        os.utime(f, (1, 1))
    assert load_geode(copy, objects=["bag"]).fingerprint == fp  # mtimes ignored
    victim = next((copy / "images").rglob("*.png"))
    Image.new("RGB", (40, 40), (1, 2, 3)).save(victim)
    unbalanced = load_geode(copy, objects=["bag"], balance=False)
    assert unbalanced.fingerprint != load_geode(root, objects=["bag"], balance=False).fingerprint


# ------------------------------------------------------------------ balancing


def _records(sizes: dict[tuple[str, str], int]) -> list[Record]:
    return [Record(f"/d/{o}/{r}/{i}.png", o, r) for (o, r), n in sizes.items() for i in range(n)]


def test_balance_equal_counts_seeded_and_order_free():
    """The project sampler (``sampler="project"``) does not depend on the input order; DIG In's does
    (``tests/test_fidelity_dig_in.py`` pins its draw)."""
    recs = _records({("bag", "africa"): 10, ("bag", "europe"): 6, ("car", "africa"): 8})
    out = balance_records(recs, seed=1, sampler="project")
    counts = Counter((r.object, r.region) for r in out)
    assert counts == {("bag", "africa"): 6, ("bag", "europe"): 6, ("car", "africa"): 6}
    assert out == balance_records(recs, seed=1, sampler="project")
    assert out != balance_records(recs, seed=2, sampler="project")
    shuffled = recs[:]
    random.Random(0).shuffle(shuffled)
    assert set(balance_records(shuffled, seed=1, sampler="project")) == set(out)
    assert [r for r in recs if r in set(out)] == out  # input order kept
    assert Counter(r.region for r in balance_records(recs, per_group=2, seed=1)) == {"africa": 4, "europe": 2}


@pytest.mark.parametrize("per_group", [0, -1, True, 2.5])
def test_balance_rejects_bad_per_group(per_group):
    with pytest.raises(ValueError, match="per_group must be a positive integer"):
        balance_records(_records({("bag", "africa"): 3}), per_group=per_group)


def test_balance_too_many_names_short_groups():
    recs = _records({("bag", "africa"): 10, ("bag", "europe"): 2, ("car", "asia"): 3})
    with pytest.raises(ValueError) as info:
        balance_records(recs, per_group=4)
    msg = str(info.value)
    assert "bag/europe (2)" in msg and "car/asia (3)" in msg and "per_group <= 2" in msg
    with pytest.raises(ValueError, match="no records"):
        balance_records([])


labels = st.tuples(st.sampled_from(["bag", "car", "dog"]), st.sampled_from(["africa", "europe", "asia"]))


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.dictionaries(labels, st.integers(min_value=1, max_value=12), min_size=1, max_size=9),
    seed=st.integers(min_value=0, max_value=2**32),
    data=st.data(),
)
def test_balance_property(sizes, seed, data):
    recs = _records(sizes)
    smallest = min(sizes.values())
    per_group = data.draw(st.one_of(st.none(), st.integers(min_value=1, max_value=smallest)))
    out = balance_records(recs, per_group=per_group, seed=seed)
    counts = Counter((r.object, r.region) for r in out)
    assert set(counts) == set(sizes)
    assert set(counts.values()) == {per_group or smallest}
    assert len(set(out)) == len(out) and set(out) <= set(recs)
    assert out == balance_records(recs, per_group=per_group, seed=seed)


# ------------------------------------------------------------------ dispatch


def test_load_reference_dispatch_and_kind_override(tmp_path):
    root = full_geode(tmp_path / "geode")
    ref = load_reference(root, objects=["bag", "car"], name="g")
    assert ref.name == "g" and ref.kind == "geode"
    raw = load_reference(root / "index.csv", kind="geode", objects=["bag"], balance=False)
    assert len(raw) == 3 + 4 + 5 + 3 + 4 + 5  # sizes cycle over the 6 regions
    with pytest.raises(ValueError, match=r"unknown reference kind 'imagenet'; choose from \['geode'"):
        load_reference(root, kind="imagenet")
    synth = load_reference("synthetic", objects=["bag"], regions=["africa"], per_group=2)
    assert synth.synthetic and len(synth) == 2
    cached = load_reference(tmp_path / "cache", kind="synthetic", objects=["bag"], regions=["africa"])
    assert cached.synthetic and Path(cached.records[0].path).is_file()


def test_reference_from_option_prefixes_errors(tmp_path):
    ref = reference_from_option("offline=synthetic", objects=["bag"], regions=["europe"])
    assert ref.name == "offline-synthetic" and ref.synthetic
    with pytest.raises(ValueError, match=r"^--t2i-reference geode=.*nope.*does not exist"):
        reference_from_option(f"geode={tmp_path / 'nope'}")


def test_docstring_examples_run():
    result = doctest.testmod(reference, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_the_synthetic_set_is_sized_by_its_options_and_its_default_is_unchanged(tmp_path):
    """``--t2i-synthetic-per-group`` / ``--t2i-synthetic-regions``: the built-in set's images per object-region and
    its regions; naming all six regions is the default set (the same records, so the same fingerprint)."""
    from t2i_fairness.references.library import references_for
    from t2i_fairness.spine.options import T2IOptions
    from t2i_fairness.vocab.geode import GEODE_REGIONS

    default = references_for(T2IOptions(model="tiny", cache_dir=tmp_path, objects=("bag", "car")))["synthetic"]
    every = tuple(r.slug for r in GEODE_REGIONS)
    same = references_for(T2IOptions(model="tiny", cache_dir=tmp_path, objects=("bag", "car"),
                                     synthetic_regions=every))["synthetic"]
    assert len(default) == 2 * 6 * 10 and same.fingerprint == default.fingerprint
    small = references_for(T2IOptions(model="tiny", cache_dir=tmp_path, objects=("bag", "car"), synthetic_per_group=5,
                                      synthetic_regions=("africa",)))["synthetic"]
    assert len(small) == 10 and {r.region for r in small.records} == {"africa"}
    assert sorted(r.object for r in small.records) == ["bag"] * 5 + ["car"] * 5
    assert small.fingerprint != default.fingerprint
