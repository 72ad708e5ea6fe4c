"""A retrained checkpoint is never judged on the previous model's images (issue 14).

Unit tests of :mod:`t2i_fairness.base.identity` (digests remembered per file, hub commits, the
notes a changed identity leaves), of every generator form's fingerprint, then the plugin end to
end: weights changed in place in a folder, a scorer checkpoint changed in place, a hub id whose
``main`` moves, a manifest whose images are replaced, a ``python:`` factory whose fingerprint is a
method, and provenance changes listed once at the top of the summary and of the HTML report.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from t2i_fairness.errors import ModelLoadError, OptionError
from t2i_fairness.generators import GenerationSettings, factory_fingerprint, resolve_generator
from t2i_fairness.generators.diffusers_pipe import diffusers_fingerprint
from t2i_fairness.base import identity
from t2i_fairness.spine.generation import derive_seed

from demo_gates import GATE_FILE

TESTS = Path(__file__).resolve().parent
COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


# ------------------------------------------------------------------------------- digests remembered per file


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_digest_is_read_once_then_remembered_across_processes(tmp_path):
    weights = write(tmp_path / "w.safetensors", b"x" * 3_000_000)
    first = identity.DigestIndex(tmp_path / "identity")
    digest = first.file(weights)
    assert first.stats["read"] == 1 and first.stats["bytes"] == 3_000_000
    later = identity.DigestIndex(tmp_path / "identity")  # a later run reads the index, not the file
    assert later.file(weights) == digest and later.stats == {**later.stats, "files": 1, "read": 0, "bytes": 0}


def test_weights_rewritten_with_the_same_size_and_time_are_read_again(tmp_path):
    """A retrain copied in with ``cp -p`` keeps size and modification time; its status-change time cannot be kept."""
    weights = write(tmp_path / "w.bin", b"A" * 1000)
    index = identity.DigestIndex(tmp_path / "identity")
    old = index.file(weights)
    st = weights.stat()
    weights.write_bytes(b"B" * 1000)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert weights.stat().st_size == st.st_size and weights.stat().st_mtime_ns == st.st_mtime_ns
    again = identity.DigestIndex(tmp_path / "identity")
    assert again.file(weights) != old and again.stats["read"] == 1


def test_two_processes_writing_the_index_keep_each_other_s_entries(tmp_path):
    a, b = write(tmp_path / "a.bin", b"a"), write(tmp_path / "b.bin", b"b")
    one, two = identity.DigestIndex(tmp_path / "identity"), identity.DigestIndex(tmp_path / "identity")
    two._load()  # loaded before the other one wrote
    one.file(a)
    two.file(b)
    fresh = identity.DigestIndex(tmp_path / "identity")
    fresh.file(a), fresh.file(b)
    assert fresh.stats["read"] == 0


def test_an_unreadable_index_is_started_again(tmp_path):
    weights = write(tmp_path / "w.bin", b"w")
    write(tmp_path / "identity" / "digests.json", b"{not json")
    index = identity.DigestIndex(tmp_path / "identity")
    assert index.file(weights) == identity.DigestIndex(None).file(weights)
    assert '"version":1' in (tmp_path / "identity" / "digests.json").read_text()


def test_a_diffusers_folder_is_named_by_the_files_that_decide_its_pixels(tmp_path):
    folder = tmp_path / "ckpt"
    write(folder / "model_index.json", b'{"_class_name": "X", "unet": ["diffusers", "U"], "safety_checker": [null, null]}')
    write(folder / "unet" / "diffusion_pytorch_model.safetensors", b"unet-1")
    write(folder / "unet" / "config.json", b"{}")
    write(folder / "README.md", b"card")
    write(folder / "v1-5-pruned.ckpt", b"a single-file checkpoint from_pretrained does not read")
    write(folder / ".cache" / "huggingface" / "download.metadata", b"etag")
    write(folder / "safety_checker" / "model.safetensors", b"not named by model_index.json")
    names = [p.relative_to(folder).as_posix() for p in identity.diffusers_folder_files(folder)]
    assert names == ["model_index.json", "unet/config.json", "unet/diffusion_pytorch_model.safetensors"]
    before = identity.weights_digest(folder)
    for irrelevant in ("README.md", "v1-5-pruned.ckpt", ".cache/huggingface/download.metadata"):
        write(folder / irrelevant, b"changed")
    assert identity.weights_digest(folder) == before
    write(folder / "unet" / "diffusion_pytorch_model.safetensors", b"unet-2")
    assert identity.weights_digest(folder) != before
    write(folder / "unet" / "diffusion_pytorch_model.safetensors", b"unet-1")
    assert identity.weights_digest(folder) == before  # content-addressed: the old weights, the old identity


def test_the_note_says_new_weights_then_back_to_old_weights(tmp_path):
    index = identity.DigestIndex(tmp_path / "identity")
    assert index.remember("model /m", "sha256-aaaa").note("made anew", "reused") is None  # first run: nothing to say
    assert index.remember("model /m", "sha256-aaaa").note("made anew", "reused") is None
    new = index.remember("model /m", "sha256-bbbb").note("made anew", "reused")
    assert new == ("model /m: new weights sha256-bbbb (the last run with this cache had sha256-aaaa): made anew; "
                   "what was cached under sha256-aaaa stays")
    back = identity.DigestIndex(tmp_path / "identity").remember("model /m", "sha256-aaaa").note("made anew", "reused")
    assert back.startswith("model /m: back to weights sha256-aaaa (last seen 20") and back.endswith("reused")


# ------------------------------------------------------------------------------- hub commits


def fake_hub_snapshot(cache: Path, repo: str, commit: str, source: Path | None = None, ref: str | None = "main") -> Path:
    """The layout huggingface_hub writes: models--org--name/{refs/<ref>, snapshots/<commit>/...}."""
    root = cache / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / commit
    if source is not None:
        shutil.copytree(source, snapshot)
    else:
        write(snapshot / "model_index.json", b"{}")
    if ref:
        write(root / "refs" / ref, commit.encode())
    return snapshot


def test_a_hub_id_resolves_offline_to_the_commit_its_revision_points_to(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    fake_hub_snapshot(tmp_path, "org/model", COMMIT_A)
    fake_hub_snapshot(tmp_path, "org/model", COMMIT_B, ref="v2")
    assert identity.hub_commit("org/model") == COMMIT_A
    assert identity.hub_commit("org/model", "v2") == COMMIT_B
    assert identity.hub_commit("org/other", COMMIT_B) == COMMIT_B  # a commit needs neither hub nor cache
    with pytest.raises(ModelLoadError, match=r"--t2i-model 'org/model' could not be loaded \(revision 'v3' is not in the "
                                             r"Hugging Face cache .*--t2i-model-revision COMMIT"):
        identity.hub_commit("org/model", "v3")


def test_the_fingerprint_of_a_hub_id_names_its_commit(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    fake_hub_snapshot(tmp_path, "org/model", COMMIT_A)
    settings = GenerationSettings(steps=2, height=64, width=64)
    main = resolve_generator("org/model", settings, "cpu", derive_seed)
    assert main.fingerprint.startswith(f"diffusers:org/model@{COMMIT_A[:12]}:") and not main.loaded
    pinned = resolve_generator("org/model", settings, "cpu", derive_seed, revision=COMMIT_B)
    assert f"@{COMMIT_B[:12]}:" in pinned.fingerprint
    with pytest.raises(OptionError, match="--t2i-model-revision: 'v1' applies to a hub id; --t2i-model 'tiny' is not one"):
        resolve_generator("tiny", settings, "cpu", derive_seed, revision="v1")


def test_model_revision_option_is_checked():
    from t2i_fairness.spine.options import resolve_options

    def options(**raw):
        return resolve_options(lambda flag: raw.get(flag, [] if flag == "--t2i-reference" else None))

    assert options(**{"--t2i-model": "org/sd", "--t2i-model-revision": "v2"}).model_revision == "v2"
    assert options(**{"--t2i-model": "org/sd"}).model_revision is None
    with pytest.raises(OptionError, match="--t2i-model-revision: 'v2' applies to a hub id; --t2i-model 'tiny' is not one"):
        options(**{"--t2i-model-revision": "v2"})
    with pytest.raises(OptionError, match="--t2i-model-revision: expected a branch, tag or commit, got ' '"):
        options(**{"--t2i-model": "org/sd", "--t2i-model-revision": " "})


# ------------------------------------------------------------------------------- what the image key holds


def test_the_image_key_names_weights_precision_and_device_class():
    s = GenerationSettings(steps=2, guidance=7.0, height=64, width=64)
    base = diffusers_fingerprint("ckpt", s, "cpu", "sha256-aaaa")
    assert diffusers_fingerprint("ckpt", s, "cpu", "sha256-bbbb") != base  # weights
    assert diffusers_fingerprint("ckpt", s, "cuda", "sha256-aaaa") != base  # device class (and float16)
    assert diffusers_fingerprint("ckpt", s, "mps", "sha256-aaaa") != base
    assert diffusers_fingerprint("ckpt", s, "cuda:0", "w") == diffusers_fingerprint("ckpt", s, "cuda:3", "w")
    tiny = resolve_generator("tiny", GenerationSettings(), "cpu", derive_seed)
    assert re.fullmatch(r"diffusers:tiny-sd-[0-9a-f]{8}@init-[0-9a-f]{8}:[0-9a-f]{12}", tiny.fingerprint)


def test_provenance_names_device_gpu_and_library_versions(tmp_path):
    from t2i_fairness.spine.options import T2IOptions
    from t2i_fairness.spine.workbench import Workbench

    bench = Workbench(T2IOptions(model="python:fakegen:make", cache_dir=tmp_path, device="cpu", progress=False))
    prov = bench.provenance()
    assert prov["device"] == "cpu" and prov["gpu"] is None
    for lib in ("torch", "torchvision", "diffusers", "transformers", "open_clip", "timm"):
        assert prov[lib], lib
    assert prov["model"] == "fakegen:v1"


# ------------------------------------------------------------------------------- python: factories


class _MethodFingerprint:
    def fingerprint(self):
        return "house-model@2024-05-01"

    def generate(self, prompts, seeds):  # pragma: no cover - not called
        return []


def test_a_method_fingerprint_is_called_once_and_warned_about_never_recorded_as_a_bound_method():
    fp, notes = factory_fingerprint("python:m:make", _MethodFingerprint())
    assert fp == "house-model@2024-05-01" and "bound method" not in fp
    assert notes == ["--t2i-model 'python:m:make': its `fingerprint` is a method; it was called once and gave "
                     "'house-model@2024-05-01'. Make it a string attribute (the protocol's form)"]


@pytest.mark.parametrize("value, message", [
    ("", "its `fingerprint` is empty"),
    (3, "its `fingerprint` is a int (3), not a string"),
    ("<mymodel.Gen object at 0x7f3a2b>", "holds a memory address, different in every process"),
    (lambda: 7, "is a callable returning int, not a string"),
], ids=["empty", "int", "default-repr", "callable-not-str"])
def test_fingerprints_that_cannot_name_a_model_are_refused(value, message):
    gen = type("Gen", (), {})()
    gen.fingerprint = value
    with pytest.raises(ModelLoadError, match=re.escape(message)):
        factory_fingerprint("python:m:make", gen)


def test_an_unversioned_fingerprint_is_warned_about_with_the_fix():
    gen = type("Gen", (), {"fingerprint": "house-model"})()
    fp, (note,) = factory_fingerprint("python:m:make", gen)
    assert fp == "house-model"
    assert "names no version, date, commit or digest" in note
    # the fix as the user would type it: their fingerprint, then the digest call (no literal {raw} or {{)
    assert "e.g. f\"house-model@{weights_digest('/path/to/weights')}\" (t2i_fairness" in note
    assert "{raw}" not in note and "{{" not in note
    assert factory_fingerprint("python:m:make", type("Gen", (), {"fingerprint": "house-model-v7"})())[1] == []


# ------------------------------------------------------------------------------- images: manifests


def make_manifest(folder: Path, colours: list[tuple[int, int, int]], prompt: str = "bag in Africa") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "manifest.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["prompt", "index", "path"])
        w.writeheader()
        for i, colour in enumerate(colours):
            Image.new("RGB", (8, 8), colour).save(folder / f"{i}.png")
            w.writerow({"prompt": prompt, "index": i, "path": f"{i}.png"})
    return folder


def test_images_replaced_behind_an_unchanged_manifest_get_new_keys_one_by_one(tmp_path):
    from t2i_fairness.base.cache import Cache
    from t2i_fairness.spine.generation import ImageFactory
    from t2i_fairness.base.memo import no_progress

    folder = make_manifest(tmp_path / "api", [(10, 10, 10), (20, 20, 20), (30, 30, 30)])
    seeds = lambda p, i: derive_seed(p, i, 0)  # noqa: E731

    def refs():
        source = resolve_generator(f"images:{folder}", GenerationSettings(), "cpu", seeds)
        cache = Cache(tmp_path / "cache")
        return source, cache, ImageFactory(source, cache, 0, no_progress).images(["bag in Africa"], 3)[0]

    source, cache, first = refs()
    manifest_bytes = (folder / "manifest.csv").read_bytes()
    Image.new("RGB", (8, 8), (200, 0, 0)).save(folder / "1.png")  # same name, new content
    assert (folder / "manifest.csv").read_bytes() == manifest_bytes
    again, cache2, second = refs()
    assert again.fingerprint != source.fingerprint  # the provenance's model says the images changed
    assert [a.key == b.key for a, b in zip(first, second)] == [True, False, True]
    # only the replaced image is new: its canonical batch is read again whole (counted as generated), the
    # other two were still cached and kept
    assert cache2.stats.generated - cache2.stats.regenerated == 1 and cache2.stats.from_cache == 2
    assert np.asarray(second[1].load())[0, 0].tolist() == [200, 0, 0]
    assert first[1].path.exists()  # nothing cached under the old identity is removed


def test_an_image_changed_while_the_run_reads_it_is_an_error(tmp_path):
    from t2i_fairness.generators.manifest import ManifestGenerator

    folder = make_manifest(tmp_path / "api", [(10, 10, 10)])
    gen = ManifestGenerator(folder, lambda p, i: i)
    Image.new("RGB", (8, 8), (99, 0, 0)).save(folder / "0.png")
    with pytest.raises(ValueError, match=r"0\.png .* changed while this run was going on"):
        gen.generate(["bag in Africa"], [0])


# ------------------------------------------------------------------------------- the report lists changes once


def test_provenance_changes_are_grouped_once_with_counts_when_not_all_gates():
    from t2i_fairness.gating.session import GateSession
    from t2i_fairness.report.changes import change_lines

    s = GateSession(Path("t.yaml"))
    for i in range(5):
        changes = {"torch": ["2.1", "2.2"], "gpu": ["NVIDIA A100", "NVIDIA H100"]}
        if i == 0:
            changes["images_per_prompt"] = [6, 60]
        s.add(dict(gate=f"g{i}", nodeid="n", value=1.0, n=1, direction="min", status="pass", bound=0.5, write=None,
                   message="", provenance={}, provenance_changes=changes))
    lines = change_lines(s)
    assert lines[:4] == ["WARNING: 5 gate(s) were set under other settings:",
                         "  gpu: NVIDIA A100 -> NVIDIA H100",
                         "  images_per_prompt: 6 -> 60 (1 gates)",
                         "  torch: 2.1 -> 2.2"]
    # the records name no bound group here; what it means, in one line: environment first, then the sample
    assert lines[4:] == ["  meaning: the same model and sample in another environment (gpu, torch): the bounds are "
                         "comparable, but the values may have moved with the numerics (images are made anew where the "
                         "device is in their key); a gate that fails now may reflect the environment, not the model; "
                         "and measured on another sample (images_per_prompt), with other sampling noise"]


def test_provenance_meaning_names_a_model_change_not_comparable_and_says_why_for_random_weights():
    from t2i_fairness.gating.session import GateSession
    from t2i_fairness.report.changes import provenance_summary

    s = GateSession(Path("t.yaml"))
    for i in range(3):
        s.add(dict(gate=f"g{i}", nodeid="n", value=1.0, n=1, direction="min", status="pass", bound=0.5, write=None,
                   message="", provenance={}, bound_provenance="aaaa1111" if i else "bbbb2222",
                   provenance_changes={"model": ["diffusers:tiny@init-f19abe91:x", "diffusers:tiny@init-8a6de055:x"],
                                       "transformers": ["5.23.0", "5.24.0"]}))
    p = provenance_summary(s)
    assert (p.kind, p.gates, p.total, p.groups) == ("identity", 3, 3, {"aaaa1111": 2, "bbbb2222": 1})
    assert "NOT comparable" in p.meaning and "the change of transformers made it another model" in p.meaning
    assert p.lines("t.yaml")[3] == "  bounds: 3 of 3 gates, 2 provenance groups: aaaa1111 (2), bbbb2222 (1) in t.yaml"
    from t2i_fairness.report.ci import run_json, step_summary

    assert "⚠️ 3 of 3 gates were set under other settings (`model`: " in step_summary(s)
    assert run_json(s)["provenance"]["kind"] == "identity"
