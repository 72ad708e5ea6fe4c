"""Through pytester: a model retrained into the same folder (or a hub id whose ``main`` moves, or a
scorer checkpoint replaced in place) is run again, says why, and going back to the old weights is a
warm run; changes of settings since the bounds were set are listed once, at the top.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from t2i_fairness.gating.verdicts import ThresholdFile

from demo_gates import DemoProject

GATE = "test_brightness[object_in_region-africa]"
COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


@pytest.fixture(scope="session", autouse=True)
def heavy_imports_outside_pytester():
    """As in test_plugin.py: what in-process runs import is loaded before them (torch cannot be imported twice)."""
    import diffusers  # noqa: F401
    import open_clip  # noqa: F401
    import torch  # noqa: F401

    import t2i_fairness.generators.diffusers_pipe  # noqa: F401
    import t2i_fairness.models.clip  # noqa: F401
    import t2i_fairness.spine.workbench  # noqa: F401


@pytest.fixture(scope="session")
def saved_tiny(tmp_path_factory, tiny_generator) -> Path:
    """The tiny StableDiffusionPipeline saved with ``save_pretrained()``, as a model team's CI would."""
    folder = tmp_path_factory.mktemp("saved") / "tiny-sd"
    tiny_generator.pipe.save_pretrained(folder)
    return folder


def perturb_safetensors(path: Path, tensor: str, delta: float) -> None:
    """Add ``delta`` to one float32 tensor of a .safetensors file in place: same size, new bytes (a retrain)."""
    data = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    info = header[tensor]
    assert info["dtype"] == "F32", info
    start, end = (8 + n + o for o in info["data_offsets"])
    values = np.frombuffer(bytes(data[start:end]), dtype="<f4") + np.float32(delta)
    data[start:end] = values.astype("<f4").tobytes()
    st = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # as `cp -p` would: only the status-change time tells



def _measured(bound) -> float:
    """The measurement a written bound was set from: the bound sits its recorded margin below it (``min``)."""
    return bound.value + bound.margin if bound.direction == "min" else bound.value - bound.margin

class Project(DemoProject):
    def __init__(self, pytester: pytest.Pytester, *model: str):
        super().__init__(pytester, *model, "--t2i-artifacts", str(pytester.path / "artifacts"), "--t2i-objects", "bag",
                         "--t2i-images-per-prompt", "2", "-k", "africa")

    def measured(self, *extra: str) -> tuple[pytest.RunResult, float]:
        """Run, writing the measured value as the bound (whichever way it moved), and return it."""
        result = self.run("--t2i-update-thresholds", "--t2i-allow-loosen", *extra)
        result.assert_outcomes(passed=1, deselected=5)
        return result, _measured(ThresholdFile.load(self.thresholds).gates[GATE])

    def pngs(self) -> int:
        return len(list((self.cache / "images").rglob("*.png")))


def summary(result: pytest.RunResult) -> list[str]:
    """The lines of the plugin's terminal summary."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "t2i-fairness gates" in line)
    out = lines[start + 1:]
    assert out[0].startswith("verdict: ") and out[1].startswith("selection: ") and out[2] == ""  # pytest's verdict first
    return out[3:]  # then the changes, once, above the gate table


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("FAKEGEN_BATCH", "4")


SMALL = ("--t2i-steps", "2", "--t2i-height", "64", "--t2i-width", "64", "--t2i-batch-size", "2")


def test_weights_retrained_into_the_same_folder_are_generated_anew_and_the_summary_says_why(
        pytester, clean_env, saved_tiny):
    folder = pytester.path / "nightly"
    shutil.copytree(saved_tiny, folder)
    unet = folder / "unet" / "diffusion_pytorch_model.safetensors"
    project = Project(pytester, "--t2i-model", str(folder), *SMALL)

    first, before = project.measured()
    first.stdout.fnmatch_lines(["images: 2 generated, 0 from cache"])
    assert "new weights" not in first.stdout.str()  # the first run on a cache has nothing to compare with
    old = unet.read_bytes()
    old_model = ThresholdFile.load(project.thresholds).provenances
    (old_digest,) = {re.search(r"@(sha256-[0-9a-f]{16}):", p["model"]).group(1) for p in old_model.values()}

    perturb_safetensors(unet, "conv_out.bias", 0.5)  # the nightly retrain, written in place
    second, after = project.measured()
    lines = summary(second)
    (note,) = [line for line in lines if line.startswith(f"model {folder}: ")]
    new_digest = re.search(r"new weights (sha256-[0-9a-f]{16}) ", note).group(1)
    assert note == (f"model {folder}: new weights {new_digest} (the last run with this cache had {old_digest}): "
                    f"its images are generated anew; what was cached under {old_digest} stays")
    # said once, at the top, with the bound's provenance change it explains
    assert lines[0] == "WARNING: 1 gate(s) were set under other settings:" and lines[4] == note
    assert lines[2].startswith("  bounds: 1 of 1 gates, 1 provenance group: ")
    assert lines[3].startswith("  meaning: another model or scorer (model): its images and scores were made anew "
                               "and the bounds describe the other one, so they are NOT comparable")
    assert re.fullmatch(rf"  model: diffusers:nightly@{old_digest}:[0-9a-f]{{12}} -> diffusers:nightly@{new_digest}:[0-9a-f]{{12}}",
                        lines[1])
    second.stdout.fnmatch_lines(["images: 2 generated, 0 from cache"])
    assert after != before  # the retrained model was run, not the previous one's images read
    assert project.pngs() == 4  # nothing cached under the old weights was removed or overwritten

    unet.write_bytes(old)  # yesterday's weights again
    third, again = project.measured()
    third.stdout.fnmatch_lines([f"model {folder}: back to weights {old_digest} (last seen *; the last run had "
                                f"{new_digest}): what was cached under them is used again",
                                "images: 0 generated, 2 from cache"])
    assert again == before and project.pngs() == 4


def test_a_scorer_checkpoint_changed_in_place_re_encodes_its_images(pytester, clean_env, monkeypatch, tmp_path):
    """``--t2i-scorers paper`` with CLIP's config pointing at a local checkpoint: replacing the file
    re-encodes the (cached) images; restoring it reads the features from the cache again."""
    import torch

    from t2i_fairness.models import configs
    from t2i_fairness.models.clip import ClipModel

    checkpoint = tmp_path / "clip.pt"
    torch.save(ClipModel.from_profile("tiny").model.state_dict(), checkpoint)
    config = tmp_path / "clip-paper.json"
    config.write_text(json.dumps({"model": "t2i-tiny-clip", "pretrained": str(checkpoint)}))
    monkeypatch.setitem(configs._EXTRA, "clip-paper", config)
    pytester.makepyfile(test_clip_gate="""
        import pytest
        from t2i_fairness.vocab.geode import GEODE_REGIONS, geode_prompts

        @pytest.mark.parametrize("region", ["africa"], ids=["object_in_region-africa"])
        def test_brightness(region, t2i, gate):  # the gate id of the demo file: a CLIP feature's mean instead
            prompts = [p.text for p in geode_prompts("object_in_region", t2i.options.objects, [region])]
            refs = [ref for row in t2i.images(prompts) for ref in row]
            feats = t2i.features(t2i.scorer("clip"), refs)
            gate(float(feats[:, 0].mean()), n=len(refs))
    """)
    project = Project(pytester, "--t2i-model", "python:fakegen:make", "--t2i-scorers", "paper", "test_clip_gate.py")
    project.args.remove("-k")
    project.args.remove("africa")
    measured = lambda: project.run("--t2i-update-thresholds", "--t2i-allow-loosen")  # noqa: E731

    first = measured()
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["images: 2 generated, 0 from cache", "features:open_clip: 2 computed, 0 from cache"])
    before = _measured(ThresholdFile.load(project.thresholds).gates[GATE])

    state = torch.load(checkpoint)
    original = checkpoint.read_bytes()
    state["visual.proj"] = state["visual.proj"] * -1.0  # another scorer, same file name
    torch.save(state, checkpoint)
    second = measured()
    second.stdout.fnmatch_lines([
        "scorer clip (paper): new weights sha256-* (the last run with this cache had sha256-*): its features are "
        "computed anew; what was cached under sha256-* stays",
        "images: 0 generated, 2 from cache", "features:open_clip: 2 computed, 0 from cache"])
    assert _measured(ThresholdFile.load(project.thresholds).gates[GATE]) == pytest.approx(-before, abs=2e-6)  # bounds keep 6 decimals

    checkpoint.write_bytes(original)
    third = measured()
    third.stdout.fnmatch_lines(["scorer clip (paper): back to weights sha256-* (last seen *): its cached features "
                                "are used again", "features:open_clip: 0 computed, 2 from cache"])
    assert _measured(ThresholdFile.load(project.thresholds).gates[GATE]) == before


def test_a_hub_id_whose_main_moves_is_run_again_and_a_pinned_revision_is_warm(
        pytester, clean_env, monkeypatch, saved_tiny, tmp_path):
    from huggingface_hub import constants

    from test_identity import fake_hub_snapshot

    hub = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    fake_hub_snapshot(hub, "org/tiny-sd", COMMIT_A, saved_tiny)
    b = fake_hub_snapshot(hub, "org/tiny-sd", COMMIT_B, saved_tiny, ref=None)
    perturb_safetensors(b / "unet" / "diffusion_pytorch_model.safetensors", "conv_out.bias", 0.5)
    project = Project(pytester, "--t2i-model", "org/tiny-sd", *SMALL)

    first, at_a = project.measured()
    first.stdout.fnmatch_lines(["images: 2 generated, 0 from cache"])
    (prov,) = ThresholdFile.load(project.thresholds).provenances.values()
    assert prov["model"].startswith(f"diffusers:org/tiny-sd@{COMMIT_A[:12]}:")

    (hub / "models--org--tiny-sd" / "refs" / "main").write_text(COMMIT_B)  # a new upload to main
    second, at_b = project.measured()
    second.stdout.fnmatch_lines([f"model org/tiny-sd: new weights {COMMIT_B[:12]} (the last run with this cache had "
                                 f"{COMMIT_A[:12]}): its images are generated anew*", "images: 2 generated, 0 from cache"])
    assert at_b != at_a  # commit B's weights were loaded, not A's

    pinned, again = project.measured("--t2i-model-revision", COMMIT_A)
    pinned.stdout.fnmatch_lines(["images: 0 generated, 2 from cache"])
    assert again == at_a


def test_images_replaced_behind_an_unchanged_manifest_are_read_again(pytester, clean_env):
    folder = pytester.path / "api"
    folder.mkdir()
    with open(folder / "manifest.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["prompt", "index", "path"])
        w.writeheader()
        for i in range(2):
            Image.new("RGB", (8, 8), (40, 40, 40)).save(folder / f"{i}.png")
            w.writerow({"prompt": "bag in Africa", "index": i, "path": f"{i}.png"})
    project = Project(pytester, "--t2i-model", f"images:{folder}")
    first, before = project.measured()
    first.stdout.fnmatch_lines(["images: 2 generated, 0 from cache"])
    Image.new("RGB", (8, 8), (240, 240, 240)).save(folder / "1.png")  # new content under the same name
    second, after = project.measured()
    second.stdout.fnmatch_lines([f"images {folder / 'manifest.csv'}: new images sha256-* (the last run with this cache "
                                 "had sha256-*): images whose files changed are read anew*", "images: 2 generated, 1 from cache (1 of the generated were still cached*"])
    assert after == pytest.approx((40 + 240) / 2 / 255, abs=2e-6)  # bounds keep 6 decimals
    assert before == pytest.approx(40 / 255, abs=2e-6)


def test_a_method_fingerprint_warns_hits_the_cache_and_is_never_recorded_as_a_bound_method(pytester, clean_env):
    pytester.makepyfile(methodgen="""
        from PIL import Image

        class Gen:
            batch_size = 4

            def fingerprint(self):
                return "house-model"

            def generate(self, prompts, seeds):
                return [Image.new("RGB", (8, 8), (s % 256, 0, 0)) for s in seeds]

        def make():
            return Gen()
    """)
    project = Project(pytester, "--t2i-model", "python:methodgen:make")
    first, _ = project.measured()
    first.stdout.fnmatch_lines([
        "*T2IIdentityWarning: --t2i-model 'python:methodgen:make': its `fingerprint` is a method; it was called once "
        "and gave 'house-model'*",
        "*T2IIdentityWarning: --t2i-model 'python:methodgen:make': its fingerprint 'house-model' names no version*",
        "images: 2 generated, 0 from cache"])
    second, _ = project.measured()
    second.stdout.fnmatch_lines(["images: 0 generated, 2 from cache"])
    text = project.thresholds.read_text()
    assert "model: house-model" in text and "bound method" not in text and " at 0x" not in text


def test_settings_changed_since_the_bounds_were_set_are_listed_once_at_the_top(pytester, clean_env):
    project = Project(pytester, "--t2i-model", "python:fakegen:make", "--t2i-report", str(pytester.path / "report"))
    project.args.remove("-k")
    project.args.remove("africa")
    project.run("--t2i-update-thresholds").assert_outcomes(passed=6)
    t = ThresholdFile.load(project.thresholds)
    for prov in t.provenances.values():
        prov.update(gpu="NVIDIA A100-SXM4-40GB", diffusers="0.1.0")
    t.save()
    result = project.run()
    result.assert_outcomes(passed=6, warnings=0)  # said once in the summary, not warned per gate
    from importlib.metadata import version

    lines = summary(result)
    assert lines[:3] == ["WARNING: 6 gate(s) were set under other settings:",
                         f"  diffusers: 0.1.0 -> {version('diffusers')}",
                         "  gpu: NVIDIA A100-SXM4-40GB -> None"]
    assert lines[3].startswith("  bounds: 6 of 6 gates, ") and lines[5] == ""
    assert lines[4].startswith("  meaning: the same model and sample in another environment (diffusers, gpu): "
                               "the bounds are comparable, but the values may have moved")
    assert lines[6].startswith("gate ") and sum("diffusers:" in line for line in lines) == 1
    page = (pytester.path / "report" / "index.html").read_text()
    top = re.search(r'<section id="changes".*?</section>', page, re.S).group(0)
    assert page.count('id="changes"') == 1 and "NVIDIA A100-SXM4-40GB" in top and "6 gate(s)" in top
    assert page.index('id="changes"') < page.index('id="gates"')
    assert "settings changed since" not in page  # no longer one run note per gate
