"""Crash safety and bad inputs (issue #9, items 3 and 4), with the fast fake generator.

Crash safety: a run is SIGKILLed in the middle of generation; the rerun reads no partial entry,
makes only the missing images and ends with the same bounds as an uninterrupted run.

Bad-input matrix (``test_bad_input``): each case asserts an error (or a summary line) that names
the culprit, and that the cache entries written before the case are still there, byte for byte,
and decode:

- ``model-path``: ``--t2i-model ./no-such-model`` -> usage error naming the path and model_index.json.
- ``model-hub-id``: an unknown hub id offline -> usage error naming the id.
- ``python-factory-raises``: the factory's exception and the spec end the session.
- ``python-factory-unimportable``: ``python:no_such_module:make`` -> "cannot import" naming the module.
- ``generator-returns-none``: the test fails naming the generator spec, the type and the prompt.
- ``manifest-missing-prompt``: an ``images:`` manifest lacking a prompt -> the manifest and the prompt.
- ``manifest-missing-file``: a manifest row naming a missing image file -> manifest, line and file.
- ``reference-corrupt-image`` / ``reference-truncated-image``: the reference loader names the file
  and its labels (``ReferenceSet.check_images`` reports them all).
- ``thresholds-bad-value`` / ``thresholds-invalid-yaml``: usage error with file and line.
- ``gate-unknown-region``: a gate asking for region 'atlantis' fails listing the choices.
- ``unknown-object``: ``--t2i-objects bag,spaceship`` -> usage error naming the object.
- ``prompt-file-unknown-language``: the multilingual loader names file:line, the field and the code.
- ``reference-group-too-small``: a k-NN manifold over fewer than k+1 rows names the group and k.
- ``feature-dim-mismatch``: ``precision_coverage`` names both shapes.
- ``all-black-images`` / ``nan-images``: generated black images (a safety checker's output; NaN pixels
  cast to uint8 by diffusers' numpy_to_pil) are counted and listed in the summary; the gates still run.
- ``prompt-over-77-tokens``: CLIP's text encoder refuses it, naming the prompt.
- ``empty-prompt-set``: ``t2i.images([])`` and an empty prompt file both fail naming the cause.
- ``unwritable-cache-dir``: usage error naming ``--t2i-cache-dir`` and the path.
- ``allow-loosen-without-update`` / ``baseline-seed-without-baseline``: conflicting options.
- ``baseline-different-prompts``: an ``images:`` baseline lacking prompts names the manifest and them.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from PIL import Image

from t2i_fairness.base.cache import Cache, decode_array, decode_png, encode_array
from t2i_fairness.gating.verdicts import ThresholdFile

from demo_gates import GATE_FILE

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


# fakegen's colours, slowed down and logged; SLOWGEN_BLACK / SLOWGEN_NAN make the chosen output.
SLOWGEN = """
import os
import time

import numpy as np
from PIL import Image


class SlowGen:
    batch_size = 2

    def __init__(self):
        mode = "-black" if os.environ.get("SLOWGEN_BLACK") else "-nan" if os.environ.get("SLOWGEN_NAN") else ""
        self.fingerprint = "slowgen:v1" + mode

    def generate(self, prompts, seeds):
        marker = os.environ.get("SLOWGEN_MARKER")
        if marker:
            with open(marker, "a") as fh:
                fh.write(f"{len(prompts)}\\n")
        time.sleep(float(os.environ.get("SLOWGEN_DELAY", "0")))
        if os.environ.get("SLOWGEN_BLACK"):  # what a safety checker returns
            return [Image.new("RGB", (8, 8), 0) for _ in seeds]
        if os.environ.get("SLOWGEN_NAN"):  # NaN latents through diffusers' numpy_to_pil
            with np.errstate(invalid="ignore"):
                return [Image.fromarray((np.full((8, 8, 3), np.nan) * 255).round().astype("uint8")) for _ in seeds]
        return [Image.new("RGB", (8, 8), (s % 256, (s >> 8) % 256, (s >> 16) % 256)) for s in seeds]


def make():
    return SlowGen()


def make_none():
    gen = SlowGen()
    gen.generate = lambda prompts, seeds: [None for _ in seeds]
    return gen


def make_broken():
    raise RuntimeError("weights not mounted")
"""

N_REGIONS = 6


class Project:
    """A pytester folder with the gate file, the slow fake generator, a cache and a thresholds file."""

    def __init__(self, pytester: pytest.Pytester, objects: str = "bag,car", per_prompt: int = 3):
        self.pytester = pytester
        pytester.makepyfile(test_gates_demo=GATE_FILE, slowgen=SLOWGEN)
        pytester.syspathinsert()
        self.thresholds = pytester.path / "t.yaml"
        self.cache = pytester.path / "cache"
        self.n_images = N_REGIONS * len(objects.split(",")) * per_prompt
        self.args = ["--t2i-model", "python:slowgen:make", "--t2i-device", "cpu", "--t2i-objects", objects,
                     "--t2i-images-per-prompt", str(per_prompt), "--t2i-no-progress", "--t2i-bootstrap", "0",
                     "-p", "no:cacheprovider", "-p", "no:unraisableexception"]

    def paths(self, thresholds: Path | None = None, cache: Path | None = None) -> list[str]:
        return ["--t2i-thresholds", str(thresholds or self.thresholds), "--t2i-cache-dir", str(cache or self.cache)]

    def run(self, *extra: str, thresholds: Path | None = None, cache: Path | None = None) -> pytest.RunResult:
        return self.pytester.runpytest(*self.args, *self.paths(thresholds, cache), *extra)

    def pngs(self, cache: Path | None = None) -> list[Path]:
        return sorted(((cache or self.cache) / "images").rglob("*.png"))


@pytest.fixture(scope="module", autouse=True)
def heavy_imports_outside_pytester():
    """pytester drops modules first imported inside it, and torch cannot be imported twice in a process."""
    import diffusers  # noqa: F401
    import open_clip  # noqa: F401
    import torch  # noqa: F401

    import t2i_fairness.generators.diffusers_pipe  # noqa: F401
    import t2i_fairness.spine.workbench  # noqa: F401


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch) -> Project:
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    for var in ("SLOWGEN_DELAY", "SLOWGEN_MARKER", "SLOWGEN_BLACK", "SLOWGEN_NAN"):
        monkeypatch.delenv(var, raising=False)
    return Project(pytester)


# ------------------------------------------------------------------------------- crash safety


def _decodable(path: Path) -> bool:
    try:
        decode_png(path.read_bytes())
        return True
    except Exception:
        return False


def test_a_run_killed_mid_generation_resumes_with_the_same_scores(project, subprocess_env):
    marker = project.pytester.path / "calls.log"
    env = {**subprocess_env, "SLOWGEN_DELAY": "0.25", "SLOWGEN_MARKER": str(marker)}
    env["PYTHONPATH"] = os.pathsep.join([str(project.pytester.path), env["PYTHONPATH"]])
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [sys.executable, "-m", "pytest", *project.args, *project.paths(), "-q"]
    proc = subprocess.Popen(cmd, cwd=project.pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if len(project.pngs()) >= 6:
                break
            time.sleep(0.02)
        assert proc.poll() is None, f"the run ended before it could be killed:\n{proc.stdout.read().decode()}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL

    before = {p: p.read_bytes() for p in project.pngs()}
    assert 6 <= len(before) < project.n_images, "killed too late: every image was already made"
    assert all(_decodable(p) for p in before), "an entry the killed run left is not decodable"
    assert marker.read_text().split(), "the generator was never called"

    rerun = project.run("--t2i-update-thresholds")
    rerun.assert_outcomes(passed=N_REGIONS)
    rerun.stdout.fnmatch_lines([f"images: {project.n_images - len(before)} generated, {len(before)} from cache"])
    rerun.stdout.no_fnmatch_line("*unreadable cache entr*")
    after = project.pngs()
    assert len(after) == project.n_images and all(_decodable(p) for p in after)
    assert all(p.read_bytes() == data for p, data in before.items())  # nothing already made was made again

    fresh_thresholds = project.pytester.path / "fresh.yaml"
    fresh_cache = project.pytester.path / "fresh-cache"
    fresh = project.run("--t2i-update-thresholds", thresholds=fresh_thresholds, cache=fresh_cache)
    fresh.assert_outcomes(passed=N_REGIONS)
    fresh.stdout.fnmatch_lines([f"images: {project.n_images} generated, 0 from cache"])
    resumed = {g: (b.direction, b.value) for g, b in ThresholdFile.load(project.thresholds).gates.items()}
    uninterrupted = {g: (b.direction, b.value) for g, b in ThresholdFile.load(fresh_thresholds).gates.items()}
    assert resumed == uninterrupted and len(resumed) == N_REGIONS
    assert {p.relative_to(project.cache): p.read_bytes() for p in after} == {
        p.relative_to(fresh_cache): p.read_bytes() for p in project.pngs(fresh_cache)}


# ------------------------------------------------------------------------------- the bad-input matrix


class Ctx:
    """A case's surroundings: the project, a cache primed with entries, and the run's output."""

    def __init__(self, project: Project, monkeypatch):
        self.project = project
        self.pytester = project.pytester
        self.path = project.pytester.path
        self.monkeypatch = monkeypatch

    def run(self, *extra: str) -> pytest.RunResult:
        return self.project.run(*extra)

    def usage_error(self, *extra: str) -> str:
        result = self.run(*extra)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        assert " passed" not in result.stdout.str()  # the session ended before any test ran
        return result.stdout.str() + "\n" + result.stderr.str()

    def manifest(self, name: str, rows: list[tuple[str, int, str]], make_files: bool = True) -> Path:
        folder = self.path / name
        folder.mkdir()
        with open(folder / "manifest.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["prompt", "index", "path"])
            for prompt, index, file in rows:
                w.writerow([prompt, index, file])
                if make_files:
                    Image.new("RGB", (8, 8), (100 + index, 50, 0)).save(folder / file)
        return folder


def _has(text: str, *parts: str) -> None:
    for part in parts:
        assert part in text, f"{part!r} not in:\n{text}"


def case_model_path(ctx: Ctx) -> None:
    out = ctx.usage_error("--t2i-model", "./no-such-model", "-k", "africa")
    _has(out, "--t2i-model './no-such-model': no diffusers pipeline at", "no-such-model (model_index.json not found)")


def case_model_hub_id(ctx: Ctx) -> None:
    ctx.monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = ctx.usage_error("--t2i-model", "nobody-t2i/no-such-model", "-k", "africa")
    _has(out, "--t2i-model 'nobody-t2i/no-such-model' could not be loaded", "Check the id or path")


def case_python_factory_raises(ctx: Ctx) -> None:
    out = ctx.usage_error("--t2i-model", "python:slowgen:make_broken")
    _has(out, "--t2i-model 'python:slowgen:make_broken': the factory raised RuntimeError: weights not mounted")


def case_python_factory_unimportable(ctx: Ctx) -> None:
    out = ctx.usage_error("--t2i-model", "python:no_such_module:make")
    _has(out, "--t2i-model 'python:no_such_module:make': cannot import no_such_module.make", "no_such_module")


def case_generator_returns_none(ctx: Ctx) -> None:
    result = ctx.run("--t2i-model", "python:slowgen:make_none", "-k", "africa")
    result.assert_outcomes(failed=1, deselected=N_REGIONS - 1)
    _has(result.stdout.str(), "generator 'python:slowgen:make_none' returned NoneType instead of a PIL image",
         "for prompt 'bag in Africa'")


def case_manifest_missing_prompt(ctx: Ctx) -> None:
    folder = ctx.manifest("dalle", [("bag in Africa", i, f"bag-{i}.png") for i in range(3)])
    result = ctx.run("--t2i-model", f"images:{folder}", "--t2i-objects", "bag", "-k", "africa or europe")
    result.assert_outcomes(passed=0, failed=2, deselected=N_REGIONS - 2)  # no gate yet: Africa fails as missing
    _has(result.stdout.str(), f"{folder / 'manifest.csv'} lacks images for 1 prompt(s) the suite asks for: 'bag in Europe'")


def case_manifest_missing_file(ctx: Ctx) -> None:
    folder = ctx.manifest("dalle", [("bag in Africa", 0, "bag-0.png")])
    with open(folder / "manifest.csv", "a", newline="") as fh:
        fh.write("bag in Africa,1,gone.png\n")
    out = ctx.usage_error("--t2i-model", f"images:{folder}", "--t2i-objects", "bag")
    _has(out, f"{folder / 'manifest.csv'}: 1 image file(s) not found: line 3: gone.png")


def _reference_case(ctx: Ctx, damage: Callable[[Path], None]) -> None:
    from t2i_fairness.references.sets import Record, ReferenceSet, open_image

    good, bad = ctx.path / "good.png", ctx.path / "bad.png"
    Image.new("RGB", (32, 32), (10, 200, 30)).save(good)
    Image.effect_noise((64, 64), 60).convert("RGB").save(bad)
    damage(bad)
    records = (Record(str(good), "bag", "africa"), Record(str(bad), "car", "europe"))
    open_image(records[0])
    with pytest.raises(ValueError) as info:
        open_image(records[1])
    _has(str(info.value), f"cannot read reference image {bad} (car, europe)")
    ref = ReferenceSet("mine", records)
    with pytest.raises(ValueError) as info:
        ref.check_images()
    _has(str(info.value), "reference set 'mine': 1 unreadable image(s)", str(bad))
    assert str(good) not in str(info.value)


def case_reference_corrupt_image(ctx: Ctx) -> None:
    def scramble(p: Path) -> None:
        data = bytearray(p.read_bytes())
        data[8:40] = b"\xff" * 32  # the IHDR chunk
        p.write_bytes(bytes(data))

    _reference_case(ctx, scramble)


def case_reference_truncated_image(ctx: Ctx) -> None:
    _reference_case(ctx, lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]))


def case_thresholds_bad_value(ctx: Ctx) -> None:
    ctx.project.thresholds.write_text("gates:\n  ok: {min: 0.1}\n  bad: {min: high}\n")
    out = ctx.usage_error()
    _has(out, f"--t2i-thresholds: {ctx.project.thresholds}:3: gate 'bad': min must be a number, got 'high'")


def case_thresholds_invalid_yaml(ctx: Ctx) -> None:
    ctx.project.thresholds.write_text("gates:\n  ok: {min: 0.1}\n  bad: {min: [0.2\n")
    out = ctx.usage_error()
    _has(out, f"--t2i-thresholds: {ctx.project.thresholds}:", "invalid YAML")


def case_gate_unknown_region(ctx: Ctx) -> None:
    ctx.pytester.makepyfile(test_atlantis="""
        from t2i_fairness.vocab.geode import geode_prompts

        def test_atlantis(t2i, gate):
            prompts = [p.text for p in geode_prompts("object_in_region", t2i.options.objects, ["atlantis"])]
            gate(0.5, n=len(t2i.images(prompts)))
    """)
    result = ctx.run("test_atlantis.py")
    result.assert_outcomes(failed=1)
    _has(result.stdout.str(), "unknown region 'atlantis'; choose from ['africa'")


def case_unknown_object(ctx: Ctx) -> None:
    out = ctx.usage_error("--t2i-objects", "bag,spaceship")
    _has(out, "--t2i-objects: unknown object(s) ['spaceship']; choose from bag,")


def case_prompt_file_unknown_language(ctx: Ctx) -> None:
    from t2i_fairness.vocab.multilingual import PromptFileError, load_prompts

    path = ctx.path / "prompts.jsonl"
    path.write_text(json.dumps({"prompt_id": "p1", "lang": "eng_Latn", "text": "a bag"}) + "\n"
                    + json.dumps({"prompt_id": "p1", "lang": "klingon", "text": "a bag"}) + "\n")
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    _has(str(info.value), f"{path}:2: field 'lang':", "klingon")
    assert (info.value.line, info.value.field) == (2, "lang")


def case_reference_group_too_small(ctx: Ctx) -> None:
    from t2i_fairness.metrics.manifold import ReferenceManifold

    rows = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)  # k + 1 rows, k = 3
    with pytest.raises(ValueError) as info:
        ReferenceManifold.build(rows, 3, group="geode/africa")
    _has(str(info.value), "geode/africa", "has 4 row(s)", "nearest_k=3 needs at least 5")
    ReferenceManifold.build(np.vstack([rows, rows[:1] + 1]), 3, group="geode/africa")  # k + 2 is enough


def case_feature_dim_mismatch(ctx: Ctx) -> None:
    from t2i_fairness.metrics.manifold import precision_coverage

    rng = np.random.default_rng(0)
    with pytest.raises(ValueError) as info:
        precision_coverage(rng.normal(size=(10, 4)), rng.normal(size=(6, 3)), 3, group="geode/europe")
    _has(str(info.value), "same number of features", "geode/europe", "(10, 4) and (6, 3)")


def _black_case(ctx: Ctx, env: str) -> None:
    ctx.monkeypatch.setenv(env, "1")
    result = ctx.run("-k", "africa", "--t2i-objects", "bag", "--t2i-images-per-prompt", "2")
    result.assert_outcomes(failed=1, deselected=N_REGIONS - 1)  # measured (0.0) and proposed, not crashed
    result.stdout.fnmatch_lines([
        "*test_brightness?object_in_region-africa?: no gate in *; measured 0* (n=2)*",
        "images: 2 generated, 0 from cache",
        "2 generated image(s) are entirely black (safety checker? NaN output?); they are scored as they are:",
        "  'bag in Africa' (seed *)",
        "  'bag in Africa' (seed *)",
    ])


def case_all_black_images(ctx: Ctx) -> None:
    _black_case(ctx, "SLOWGEN_BLACK")


def case_nan_images(ctx: Ctx) -> None:
    _black_case(ctx, "SLOWGEN_NAN")


def case_prompt_over_77_tokens(ctx: Ctx) -> None:
    from t2i_fairness.models.clip import ClipModel

    clip = ClipModel.from_profile("tiny", "cpu")
    long = "a photo of a bag " + " ".join(["in a very crowded and colourful market street"] * 10)
    assert clip.count_tokens(long) > 77
    clip.encode_texts(["a photo of a bag"])
    with pytest.raises(ValueError) as info:
        clip.encode_texts(["a photo of a bag", long])
    _has(str(info.value), "1 text(s) exceed CLIP's 77 tokens", long[:40], "shorten the prompt")


def case_empty_prompt_set(ctx: Ctx) -> None:
    from t2i_fairness.vocab.multilingual import PromptFileError, load_prompts

    ctx.pytester.makepyfile(test_empty="""
        def test_nothing(t2i, gate):
            rows = t2i.images([])
            gate(0.5, n=len(rows))
    """)
    result = ctx.run("test_empty.py")
    result.assert_outcomes(failed=1)
    _has(result.stdout.str(), "images() got an empty prompt set")
    empty = ctx.path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(PromptFileError) as info:
        load_prompts(empty)
    _has(str(info.value), str(empty), "no prompts in the file")


def case_unwritable_cache_dir(ctx: Ctx) -> None:
    blocker = ctx.path / "not-a-dir"
    blocker.write_text("")
    out = ctx.usage_error("--t2i-cache-dir", str(blocker / "cache"), "-k", "africa")
    _has(out, f"--t2i-cache-dir '{blocker / 'cache'}' is not writable")


def case_allow_loosen_without_update(ctx: Ctx) -> None:
    _has(ctx.usage_error("--t2i-allow-loosen"), "--t2i-allow-loosen: only makes sense with --t2i-update-thresholds")


def case_baseline_seed_without_baseline(ctx: Ctx) -> None:
    _has(ctx.usage_error("--t2i-baseline-seed", "7"), "--t2i-baseline-seed: only makes sense with --t2i-baseline-model")


def case_baseline_different_prompts(ctx: Ctx) -> None:
    folder = ctx.manifest("baseline", [("bag in Africa", i, f"bag-{i}.png") for i in range(2)])
    result = ctx.run("--t2i-baseline-model", f"images:{folder}", "--t2i-objects", "bag", "--t2i-images-per-prompt", "2",
                     "-k", "europe")
    assert result.parseoutcomes().get("failed", 0) >= 1
    _has(result.stdout.str(), f"{folder / 'manifest.csv'} lacks images for 1 prompt(s) the suite asks for: 'bag in Europe'")


CASES = {name[len("case_"):].replace("_", "-"): fn for name, fn in list(globals().items()) if name.startswith("case_")}


def _snapshot(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and "locks" not in p.parts}


def _prime(project: Project) -> None:
    """Africa's two 'bag' images and their features, as a run of the gate file would cache them."""
    from t2i_fairness.spine.generation import ImageFactory, derive_seed
    from t2i_fairness.generators import GenerationSettings, resolve_generator

    sys.path.insert(0, str(project.pytester.path))
    sys.modules.pop("slowgen", None)
    try:
        source = resolve_generator("python:slowgen:make", GenerationSettings(), "cpu", lambda p, i: derive_seed(p, i, 0))
        cache = Cache(project.cache)
        rows = ImageFactory(source, cache).images(["bag in Africa"], 2)
    finally:
        sys.path.remove(str(project.pytester.path))
        sys.modules.pop("slowgen", None)
    assert cache.stats.generated == 2
    features = project.cache / "features" / "demo"
    for ref in rows[0]:
        cache.write(features / f"{ref.key}.npy", encode_array(np.asarray(ref.load(), np.float32).mean(axis=(0, 1))))


@pytest.mark.parametrize("case", CASES)
def test_bad_input(project, monkeypatch, case):
    """Prime the cache with one gate's images, run the case, and find every entry still there and decodable."""
    _prime(project)
    before = _snapshot(project.cache)
    # the two images, their features and the images' index (their sizes and digests, one row-store segment)
    assert sorted(p.suffix for p in before) == [".npy", ".npy", ".png", ".png", ".rows"]

    CASES[case](Ctx(project, monkeypatch))

    after = _snapshot(project.cache)
    assert {p: after.get(p) for p in before} == before, "entries written before the case changed or vanished"
    assert all(_decodable(p) for p in after if p.suffix == ".png")
    assert all(decode_array(p.read_bytes()).shape == (3,) for p in after if p.suffix == ".npy")
    assert not [p for p in after if p.name.endswith(".tmp")]


def test_black_images_from_xdist_workers_are_merged_into_one_report():
    from t2i_fairness.gating.session import GateSession
    from t2i_fairness.report.terminal import GateReport

    session = GateSession(Path("t.yaml"))
    session.merge_cache_stats({"generated": 8, "blank": [f"'bag in Africa' (seed {i})" for i in range(7)]})
    session.merge_cache_stats({"generated": 8, "from_cache": 1, "blank": [f"'car in Europe' (seed {i})" for i in range(5)]})
    lines = GateReport(session).lines()
    i = lines.index("12 generated image(s) are entirely black (safety checker? NaN output?); they are scored as they are:")
    assert lines[i - 1] == "images: 16 generated, 1 from cache"
    assert lines[i + 1 : i + 12] == [f"  'bag in Africa' (seed {k})" for k in range(7)] + [
        f"  'car in Europe' (seed {k})" for k in range(3)] + ["  ... and 2 more"]
