"""Tests of t2i_fairness.metrics.manifold: equality with ``prdc``, brute force, properties, errors.

The reference for every number is ``prdc.compute_prdc`` on the features cast to float64 and an
independent brute-force float64 implementation of the formulas written below. Hard cases use
integer-valued features: their squared distances are exact in float64 for every method, so ties,
duplicates and points exactly on a radius are decided identically by everybody.
"""

from __future__ import annotations

import contextlib
import io
import os

import hypothesis.extra.numpy as hnp
import numpy as np
import prdc as prdc_package
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from t2i_fairness.metrics import manifold as mf

KEYS = ("precision", "recall", "density", "coverage")
PROPERTY = settings(max_examples=40, deadline=None, database=None)


# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------


def package_prdc(real, fake, k):
    """``prdc.compute_prdc`` on float64 copies, stdout swallowed, values as Python floats."""
    with contextlib.redirect_stdout(io.StringIO()):
        out = prdc_package.compute_prdc(np.asarray(real, np.float64), np.asarray(fake, np.float64), k)
    return {key: float(out[key]) for key in KEYS}


def brute_distances(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=-1))


def brute_radii(x, k):
    """k-th nearest other point: sort each row of the self-distances; index 0 is the point itself."""
    return np.sort(brute_distances(x, x), axis=1)[:, k]


def brute_prdc(real, fake, k):
    r_real, r_fake = brute_radii(real, k), brute_radii(fake, k)
    d = brute_distances(fake, real)  # (n_fake, n_real)
    in_real_ball = d < r_real[None, :]
    in_fake_ball = d < r_fake[:, None]
    return {
        "precision": float(in_real_ball.any(axis=1).mean()),
        "recall": float(in_fake_ball.any(axis=0).mean()),
        "density": float((1.0 / k) * in_real_ball.sum(axis=1).mean()),
        "coverage": float(in_real_ball.any(axis=0).mean()),
    }


def pc_of(scores):
    return {"precision": scores["precision"], "coverage": scores["coverage"]}


def gaussian_sets(seed, n_real, n_fake, dim, shift=0.3, dtype=np.float64):
    rng = np.random.default_rng(seed)
    real = rng.normal(size=(n_real, dim))
    fake = rng.normal(size=(n_fake, dim)) * 1.1 + shift
    return real.astype(dtype), fake.astype(dtype)


# --------------------------------------------------------------------------------------------
# Equality with prdc and brute force
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n_real, n_fake, dim, k",
    [(5, 6, 1, 3), (30, 25, 2, 1), (64, 80, 8, 3), (150, 120, 32, 5), (200, 90, 512, 10), (120, 150, 2048, 3)],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_random_data_equals_prdc_and_brute_force(n_real, n_fake, dim, k, dtype):
    real, fake = gaussian_sets(n_real * dim + k, n_real, n_fake, dim, dtype=dtype)
    ours = mf.prdc(real, fake, k)
    assert ours == package_prdc(real, fake, k)
    assert ours == brute_prdc(real, fake, k)
    assert all(type(v) is float for v in ours.values())
    assert mf.precision_coverage(real, fake, k) == pc_of(ours)


def integer_cloud(seed, n, dim, low=-2, high=2):
    return np.random.default_rng(seed).integers(low, high + 1, size=(n, dim)).astype(np.float64)


HARD_CASES = {
    # many exactly equal distances on a small lattice
    "lattice_ties": lambda: (integer_cloud(1, 40, 3), integer_cloud(2, 35, 3), 3),
    # rows repeated k+1 times have radius exactly 0; fake copies of real rows
    "duplicates": lambda: (
        np.repeat(integer_cloud(3, 8, 4), [1, 2, 4, 4, 1, 3, 5, 1], axis=0),
        np.concatenate([integer_cloud(3, 8, 4)[:5], integer_cloud(4, 10, 4)]),
        3,
    ),
    # more tied neighbours than the top-k pass keeps (k + 8) and than the float32 mask pass allows
    "heavy_duplicates": lambda: (
        np.repeat(integer_cloud(13, 3, 2), [50, 20, 5], axis=0),
        np.concatenate([integer_cloud(13, 3, 2)[:2], integer_cloud(14, 20, 2)]),
        3,
    ),
    # lattice line: 12 equidistant neighbours tie for every radius in 1-D with k = 10
    "equidistant_line": lambda: (np.arange(40.0)[:, None], np.arange(0.5, 30.0, 1.5)[:, None], 10),
    # on a line with spacing 2 and k=1 every radius is 2; fakes at -2 and 10 sit exactly on one
    "exactly_on_radius": lambda: (
        np.array([[0.0], [2.0], [4.0], [6.0], [8.0]]),
        np.array([[-2.0], [1.0], [2.0], [3.0], [10.0], [5.0]]),
        1,
    ),
    # Pythagorean points: equal integer distances in 2-D
    "equal_distances_2d": lambda: (
        np.array([[0, 0], [3, 4], [4, 3], [5, 0], [0, 5], [-3, 4], [-4, -3], [6, 8]], dtype=float),
        np.array([[0, 0], [1, 1], [5, 5], [3, 0], [-3, -4], [2, 6], [8, 6]], dtype=float),
        2,
    ),
    # k = n - 2, the largest prdc accepts
    "k_is_n_minus_2": lambda: (integer_cloud(5, 7, 2, -5, 5), integer_cloud(6, 9, 2, -5, 5), 5),
    "k_is_n_minus_2_fake": lambda: (integer_cloud(7, 12, 3), integer_cloud(8, 6, 3), 4),
    # every real point identical: all radii 0, nothing is inside
    "all_identical": lambda: (np.ones((6, 3)), integer_cloud(9, 6, 3), 2),
    # fake set equal to the real set
    "fake_is_real": lambda: (integer_cloud(10, 20, 2), integer_cloud(10, 20, 2), 3),
    # large offsets with tiny spread: the float32 identity alone is useless here
    "far_from_origin": lambda: (
        4096.0 + integer_cloud(11, 30, 5) / 256.0,
        4096.0 + integer_cloud(12, 30, 5) / 256.0,
        3,
    ),
}


@pytest.mark.parametrize("case", sorted(HARD_CASES))
@pytest.mark.parametrize("chunk_size", [None, 3])
def test_hard_cases_equal_prdc_and_brute_force(case, chunk_size):
    real, fake, k = HARD_CASES[case]()
    ours = mf.prdc(real, fake, k, chunk_size=chunk_size)
    assert ours == brute_prdc(real, fake, k)
    assert ours == package_prdc(real, fake, k)
    assert mf.precision_coverage(real, fake, k, chunk_size=chunk_size) == pc_of(ours)


def test_exactly_on_radius_is_outside():
    real, fake, k = HARD_CASES["exactly_on_radius"]()
    np.testing.assert_array_equal(mf.real_radii(real, k), [2.0, 2.0, 2.0, 2.0, 2.0])
    # inside: 1, 2, 3, 5 ; on a radius (outside): -2 and 10
    assert mf.precision_coverage(real, fake, k)["precision"] == 4 / 6


def test_two_far_clusters_use_the_float64_fallback(monkeypatch):
    """Clusters at +-2**20 with spacing 2**-6: float32 cannot order these distances at all."""
    rng = np.random.default_rng(3)
    offset = np.zeros(16)
    offset[0] = 2.0**20

    def cloud(n):
        half = rng.integers(-3, 4, size=(n, 16)) / 64.0
        return np.concatenate([offset + half[: n // 2], -offset + half[n // 2 :]])

    real, fake = cloud(120), cloud(100)  # 60 and 50 per cluster: more candidates than allowed
    tiers = []
    original = mf._prepare

    def spy(x, frame, tier, device):
        tiers.append((x.shape[0], tier.dtype))
        return original(x, frame, tier, device)

    monkeypatch.setattr(mf.exact, "_prepare", spy)
    monkeypatch.setattr(mf.exact, "_FALLBACK_MIN_PAIRS", 0)  # cross blocks fall back too
    ours = mf.prdc(real, fake, 3, chunk_size=16)
    assert {(120, torch.float64), (100, torch.float64)} <= set(tiers)
    assert ours == brute_prdc(real, fake, 3)  # prdc's own float64 identity is not exact here
    assert mf.precision_coverage(real, fake, 3, chunk_size=16) == pc_of(ours)


@pytest.mark.parametrize("k", [1, 4])
def test_real_radii_equal_prdc_radii(k):
    real = gaussian_sets(k, 80, 2, 16)[0]
    expected = prdc_package.prdc.compute_nearest_neighbour_distances(real, k)
    ours = mf.real_radii(real, k)
    assert ours.dtype == np.float64 and ours.shape == (80,)
    np.testing.assert_array_equal(ours, brute_radii(real, k))
    np.testing.assert_allclose(ours, expected, rtol=1e-12)  # prdc: float64 identity rounding


def test_float32_input_equals_prdc_on_float64_cast():
    real, fake = gaussian_sets(5, 100, 90, 64, dtype=np.float32)
    assert mf.prdc(real, fake, 4) == package_prdc(real.astype(np.float64), fake.astype(np.float64), 4)


@pytest.mark.parametrize("log2_scale", [300, -300])
def test_extreme_magnitudes(log2_scale):
    real, fake, k = HARD_CASES["lattice_ties"]()
    scale = 2.0**log2_scale
    assert mf.prdc(real * scale, fake * scale, k) == mf.prdc(real, fake, k)


def test_mixed_float32_reference_and_float64_fake():
    """Both sets must be centred on the same value even when only one is float32."""
    rng = np.random.default_rng(7)
    real = (1000.0 + rng.normal(size=(80, 16))).astype(np.float32)
    fake = 1000.0 + rng.normal(size=(70, 16)) * 1.2
    expected = pc_of(package_prdc(real, fake, 3))
    assert mf.precision_coverage(real, fake, 3) == expected
    assert mf.precision_coverage(mf.ReferenceManifold.build(real, 3), fake) == expected
    assert mf.prdc(real, fake, 3) == package_prdc(real, fake, 3)


def test_float32_error_bound_holds():
    """The bound E on |q - dhat^2| is never exceeded and is not absurdly loose."""
    rng = np.random.default_rng(0)
    worst = 0.0
    for dim, spread, offset in [(2048, 1.0, 0.0), (512, 1e-3, 50.0), (64, 1e5, -3e5), (7, 1.0, 0.0)]:
        a = offset + spread * rng.normal(size=(50, dim))
        b = offset + spread * rng.standard_t(2, size=(40, dim))
        frame = mf._Frame.make(a, b)
        wa, wb = (mf._prepare(x, frame, mf._F32, torch.device("cpu")) for x in (a, b))
        bounds = mf._Bounds.make(frame, mf._F32, wa, wb)
        q = mf._identity_block(wa, slice(None), wb).double().numpy()
        exact = brute_distances(wa.x.double().numpy(), wb.x.double().numpy()) ** 2
        e = 2 * bounds.c * (wa.norm[:, None] ** 2 + wb.norm[None, :] ** 2) + bounds.qabs
        ratio = np.abs(q - exact) / e
        assert ratio.max() < 1.0
        worst = max(worst, float(ratio.max()))
    assert worst > 1e-4  # sanity: the bound is conservative, not vacuous


# --------------------------------------------------------------------------------------------
# Hypothesis properties (small integer clouds: ties and duplicates are frequent)
# --------------------------------------------------------------------------------------------


@st.composite
def clouds(draw, min_extra=0):
    k = draw(st.integers(1, 4))
    dim = draw(st.integers(1, 4))
    n_real = draw(st.integers(k + 2 + min_extra, 14))
    n_fake = draw(st.integers(k + 2, 14))
    values = st.integers(-3, 3).map(float)
    real = draw(hnp.arrays(np.float64, (n_real, dim), elements=values))
    fake = draw(hnp.arrays(np.float64, (n_fake, dim), elements=values))
    return real, fake, k


@PROPERTY
@given(clouds())
def test_property_equals_brute_force_and_prdc(data):
    real, fake, k = data
    ours = mf.prdc(real, fake, k)
    assert ours == brute_prdc(real, fake, k)
    assert ours == package_prdc(real, fake, k)
    assert mf.precision_coverage(real, fake, k) == pc_of(ours)


@PROPERTY
@given(clouds())
def test_property_bounds(data):
    scores = mf.prdc(*data)
    for key in ("precision", "recall", "coverage"):
        assert 0.0 <= scores[key] <= 1.0
    assert 0.0 <= scores["density"] <= data[0].shape[0] / data[2]


@PROPERTY
@given(clouds(), st.randoms(use_true_random=False))
def test_property_row_permutation_invariance(data, rnd):
    real, fake, k = data
    p_real = rnd.sample(range(real.shape[0]), real.shape[0])
    p_fake = rnd.sample(range(fake.shape[0]), fake.shape[0])
    assert mf.prdc(real[p_real], fake[p_fake], k) == mf.prdc(real, fake, k)


@PROPERTY
@given(
    clouds(),
    st.integers(-6, 6),
    st.booleans(),
    st.lists(st.integers(-50, 50), min_size=4, max_size=4),
    st.randoms(use_true_random=False),
)
def test_property_similarity_invariance(data, log2_scale, flip, shift, rnd):
    """Exact similarities (power-of-two scale, integer shift, signed coordinate permutation)."""
    real, fake, k = data
    dim = real.shape[1]
    rotation = np.eye(dim)[rnd.sample(range(dim), dim)] * np.where(np.arange(dim) % 2 == int(flip), -1.0, 1.0)
    move = np.asarray(shift[:dim], dtype=np.float64)

    def transform(x):
        return (x @ rotation + move) * 2.0**log2_scale

    assert mf.prdc(transform(real), transform(fake), k) == mf.prdc(real, fake, k)


@PROPERTY
@given(clouds(), hnp.arrays(np.float64, st.tuples(st.integers(1, 6), st.just(4)), elements=st.integers(-3, 3).map(float)))
def test_property_coverage_grows_with_fake_points(data, extra):
    real, fake, k = data
    extra = extra[:, : real.shape[1]]
    before = mf.precision_coverage(real, fake, k)["coverage"]
    after = mf.precision_coverage(real, np.concatenate([fake, extra]), k)["coverage"]
    assert after >= before


@PROPERTY
@given(clouds())
def test_property_real_against_itself(data):
    """Without repeated rows every radius is > 0, so each real point lies in its own ball."""
    real, _, k = data
    assume(mf.deduplicate(real, "keep_one").shape[0] >= k + 2)
    scores = mf.precision_coverage(real, real, k, dedupe="keep_one")
    assert scores == {"precision": 1.0, "coverage": 1.0}


@PROPERTY
@given(clouds(), st.integers(1, 5))
def test_property_chunk_size_does_not_matter(data, chunk_size):
    real, fake, k = data
    assert mf.prdc(real, fake, k, chunk_size=chunk_size) == mf.prdc(real, fake, k)
    np.testing.assert_array_equal(mf.real_radii(real, k, chunk_size=chunk_size), mf.real_radii(real, k))


def test_continuous_similarity_invariance():
    """A generic rotation, shift and scale: float64 rounding moves no decision on continuous data."""
    real, fake = gaussian_sets(11, 120, 100, 24)
    rng = np.random.default_rng(12)
    rotation, _ = np.linalg.qr(rng.normal(size=(24, 24)))
    shift = rng.normal(size=24) * 10

    def transform(x):
        return (x @ rotation + shift) * 3.7

    assert mf.prdc(transform(real), transform(fake), 5) == mf.prdc(real, fake, 5)


# --------------------------------------------------------------------------------------------
# Inputs: torch tensors, dtypes, no mutation
# --------------------------------------------------------------------------------------------


def test_torch_inputs_equal_numpy_inputs():
    real, fake = gaussian_sets(21, 70, 60, 12)
    expected = mf.prdc(real, fake, 3)
    assert mf.prdc(torch.from_numpy(real), torch.from_numpy(fake), 3) == expected
    grad = torch.from_numpy(real).requires_grad_(True)
    assert mf.prdc(grad, torch.from_numpy(fake), 3) == expected
    r32, f32 = real.astype(np.float32), fake.astype(np.float32)
    assert mf.prdc(torch.from_numpy(r32), f32, 3) == mf.prdc(r32, f32, 3)
    half = torch.from_numpy(r32).half()
    assert mf.prdc(half, f32, 3) == mf.prdc(half.float().numpy(), f32, 3)
    assert mf.precision_coverage(torch.from_numpy(real), fake, 3) == pc_of(expected)
    np.testing.assert_array_equal(mf.real_radii(torch.from_numpy(real), 3), mf.real_radii(real, 3))


def test_integer_inputs_are_cast_to_float64():
    real, fake, k = HARD_CASES["lattice_ties"]()
    assert mf.prdc(real.astype(np.int64), fake.astype(np.int32), k) == mf.prdc(real, fake, k)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inputs_are_not_modified(dtype):
    real, fake = gaussian_sets(31, 40, 30, 8, dtype=dtype)
    real_copy, fake_copy = real.copy(), fake.copy()
    mf.prdc(real, fake, 3)
    mf.precision_coverage(torch.from_numpy(real), torch.from_numpy(fake), 3, dedupe="drop_all")
    mf.ReferenceManifold.build(real, 3)
    np.testing.assert_array_equal(real, real_copy)
    np.testing.assert_array_equal(fake, fake_copy)


def test_explicit_cpu_device():
    real, fake = gaussian_sets(41, 30, 30, 4)
    assert mf.prdc(real, fake, 3, device="cpu") == mf.prdc(real, fake, 3, device=torch.device("cpu"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_equals_cpu():
    real, fake = gaussian_sets(42, 300, 200, 64, dtype=np.float32)
    assert mf.prdc(real, fake, 5, device="cuda") == mf.prdc(real, fake, 5, device="cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_requested_without_cuda():
    with pytest.raises(ValueError, match="CUDA is not available"):
        mf.prdc(np.zeros((5, 2)), np.zeros((5, 2)), 1, device="cuda")


def test_tf32_setting_is_restored():
    backend = torch.backends.mkldnn.matmul
    before = backend.fp32_precision
    try:
        backend.fp32_precision = "tf32"
        real, fake = gaussian_sets(43, 30, 30, 4, dtype=np.float32)
        assert mf.prdc(real, fake, 3) == package_prdc(real, fake, 3)
        assert backend.fp32_precision == "tf32"
    finally:
        backend.fp32_precision = before


# --------------------------------------------------------------------------------------------
# Dedupe
# --------------------------------------------------------------------------------------------


def duplicated_sets():
    base = integer_cloud(50, 12, 3, -6, 6)
    real = np.concatenate([base, base[:3], base[:1], -0.0 * base[4:5] + base[4:5]])
    other = integer_cloud(51, 10, 3, -6, 6)
    fake = np.concatenate([other, base[:2], other[:1]])  # copies of real rows; one repeated row
    return real, fake


def unique_rows(x, keep_one):
    _, first, counts = np.unique(x + 0.0, axis=0, return_index=True, return_counts=True)
    keep = first if keep_one else first[counts == 1]
    return x[np.sort(keep)]


def test_dedupe_none_is_prdc_default():
    real, fake = duplicated_sets()
    assert mf.prdc(real, fake, 2) == mf.prdc(real, fake, 2, dedupe="none") == package_prdc(real, fake, 2)


@pytest.mark.parametrize("mode, keep_one", [("keep_one", True), ("drop_all", False)])
def test_dedupe_modes_apply_to_each_set_separately(mode, keep_one):
    real, fake = duplicated_sets()
    expected = package_prdc(unique_rows(real, keep_one), unique_rows(fake, keep_one), 2)
    assert mf.prdc(real, fake, 2, dedupe=mode) == expected
    assert mf.precision_coverage(real, fake, 2, dedupe=mode) == pc_of(expected)
    # fake rows that copy real rows are not duplicates: they stay
    assert mf.deduplicate(fake, mode).shape[0] == (12 if keep_one else 11)


def test_deduplicate_rows():
    x = np.array([[0.0, 1.0], [2.0, 3.0], [-0.0, 1.0], [4.0, 5.0], [2.0, 3.0]])
    np.testing.assert_array_equal(mf.deduplicate(x, "keep_one"), [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    np.testing.assert_array_equal(mf.deduplicate(x, "drop_all"), [[4.0, 5.0]])
    np.testing.assert_array_equal(mf.deduplicate(x, "none"), x)
    np.testing.assert_array_equal(mf.deduplicate(torch.from_numpy(x)), [[4.0, 5.0]])


def test_dedupe_leaving_too_few_rows_names_the_mode():
    real = np.repeat(np.eye(3), 3, axis=0)
    with pytest.raises(ValueError, match=r"real_features \(group 'asia'\) has 0 row\(s\) after dedupe='drop_all'"):
        mf.prdc(real, np.eye(5)[:, :3], 1, dedupe="drop_all", group="asia")


# --------------------------------------------------------------------------------------------
# Reusing reference radii
# --------------------------------------------------------------------------------------------


def test_reference_manifold_reuse_and_npz_roundtrip(tmp_path):
    real, fake = gaussian_sets(61, 90, 70, 16, dtype=np.float32)
    expected = mf.precision_coverage(real, fake, 4)
    ref = mf.ReferenceManifold.build(real, 4)
    assert mf.precision_coverage(ref, fake) == expected
    assert mf.precision_coverage(ref, fake, nearest_k=4) == expected
    assert mf.precision_coverage(real, fake, real_radii=ref.radii) == expected
    assert mf.precision_coverage(real, fake, real_radii=torch.tensor(ref.radii)) == expected
    path = tmp_path / "africa.npz"
    ref.to_npz(path)
    ref.to_npz(path)  # replaces the previous file
    assert sorted(os.listdir(tmp_path)) == ["africa.npz"]
    again = mf.ReferenceManifold.from_npz(path)
    assert again.nearest_k == 4 and again.features.dtype == np.float32
    np.testing.assert_array_equal(again.radii, ref.radii)
    np.testing.assert_array_equal(again.features, real)
    assert mf.precision_coverage(again, fake) == expected
    with pytest.raises(ValueError, match="read-only"):
        again.radii[0] = 1.0


def test_reference_manifold_build_dedupes():
    real, fake = duplicated_sets()
    ref = mf.ReferenceManifold.build(real, 2, dedupe="drop_all")
    assert ref.features.shape[0] == unique_rows(real, False).shape[0]
    expected = pc_of(package_prdc(unique_rows(real, False), fake, 2))
    assert mf.precision_coverage(ref, fake) == expected


def test_failed_npz_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    ref = mf.ReferenceManifold.build(np.arange(12.0).reshape(6, 2), 2)

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(mf.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        ref.to_npz(tmp_path / "x.npz")
    assert os.listdir(tmp_path) == []


def test_from_npz_rejects_other_files(tmp_path):
    np.savez(tmp_path / "other.npz", features=np.zeros((5, 2)))
    with pytest.raises(ValueError, match=r"missing arrays \['format_version', 'nearest_k', 'radii'\]"):
        mf.ReferenceManifold.from_npz(tmp_path / "other.npz")


def test_reference_manifold_validates_its_fields():
    with pytest.raises(ValueError, match=r"radii must have shape \(6,\)"):
        mf.ReferenceManifold(np.zeros((6, 2)), np.zeros(5), 2)
    with pytest.raises(ValueError, match="radii must be finite and >= 0; 1 value"):
        mf.ReferenceManifold(np.zeros((6, 2)), np.array([0, 0, 0, -1.0, 0, 0]), 2)
    with pytest.raises(ValueError, match="nearest_k=5 needs at least 7"):
        mf.ReferenceManifold(np.zeros((6, 2)), np.zeros(6), 5)


def test_manifold_argument_conflicts():
    ref = mf.ReferenceManifold.build(np.arange(12.0).reshape(6, 2), 2)
    with pytest.raises(ValueError, match="nearest_k=3 differs from the manifold's nearest_k=2"):
        mf.precision_coverage(ref, np.zeros((3, 2)), 3)
    with pytest.raises(ValueError, match="real_radii must be None"):
        mf.precision_coverage(ref, np.zeros((3, 2)), real_radii=ref.radii)
    with pytest.raises(ValueError, match=r"same number of features \(group 'europe'\), got shapes \(6, 2\) and \(3, 5\)"):
        mf.precision_coverage(ref, np.zeros((3, 5)), group="europe")


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------

GOOD = np.arange(40.0).reshape(10, 4)


@pytest.mark.parametrize(
    "real, fake, kwargs, message",
    [
        (GOOD[:4], GOOD, {"nearest_k": 3, "group": "africa"},
         r"real_features \(group 'africa'\) has 4 row\(s\), but nearest_k=3 needs at least 5"),
        (GOOD, GOOD[:3], {"nearest_k": 2, "group": "africa"},
         r"fake_features \(group 'africa'\) has 3 row\(s\), but nearest_k=2 needs at least 4"),
        (GOOD, GOOD[:, :3], {"group": "americas"},
         r"same number of features \(group 'americas'\), got shapes \(10, 4\) and \(10, 3\)"),
        (np.where(np.arange(40).reshape(10, 4) % 7 == 0, np.nan, GOOD), GOOD, {},
         r"real_features has 6 row\(s\) with NaN or inf values \(of 10; first at row 0\)"),
        (GOOD, np.where(GOOD == 13.0, np.inf, GOOD), {"group": "asia"},
         r"fake_features \(group 'asia'\) has 1 row\(s\) with NaN or inf"),
        (GOOD.ravel(), GOOD, {}, r"real_features must be a 2-D array \(n_samples, n_features\), got shape \(40,\)"),
        (GOOD, GOOD[None], {}, r"fake_features must be a 2-D array .* got shape \(1, 10, 4\)"),
        (GOOD, GOOD, {"nearest_k": 0}, "nearest_k must be an integer >= 1, got 0"),
        (GOOD, GOOD, {"nearest_k": 2.0}, "nearest_k must be an integer >= 1, got 2.0"),
        (GOOD, GOOD, {"nearest_k": True}, "nearest_k must be an integer >= 1, got True"),
        (GOOD, GOOD, {"dedupe": "drop"}, r"dedupe must be one of \('none', 'keep_one', 'drop_all'\), got 'drop'"),
        (GOOD, GOOD, {"chunk_size": 0}, "chunk_size must be a positive integer or None, got 0"),
        (GOOD.astype(complex), GOOD, {}, "real_features must hold real numbers"),
        (GOOD * 1e200, GOOD, {}, r"real_features has values as large as 3.9e\+201"),
        (np.zeros((10, 0)), np.zeros((10, 0)), {}, "real_features has no feature columns"),
        (GOOD, GOOD, {"device": "tpu:x"}, "device must be a torch device"),
    ],
)
def test_invalid_input_raises_named_errors(real, fake, kwargs, message):
    with pytest.raises(ValueError, match=message):
        mf.prdc(real, fake, **kwargs)


def test_precision_coverage_needs_fake_rows_and_valid_radii():
    with pytest.raises(ValueError, match=r"fake_features \(group 'oceania'\) has 0 row\(s\), but at least 1"):
        mf.precision_coverage(GOOD, np.zeros((0, 4)), group="oceania")
    # the fake set needs no radius, so a single fake row is fine
    assert mf.precision_coverage(GOOD, GOOD[:1], 3) == {"precision": 1.0, "coverage": 0.2}
    with pytest.raises(ValueError, match=r"real_radii must have shape \(10,\), one per real row, got \(9,\)"):
        mf.precision_coverage(GOOD, GOOD, real_radii=np.ones(9))
    with pytest.raises(ValueError, match=r"real_radii must be finite and >= 0; 1 value\(s\) are not \(first at index 2: nan\)"):
        mf.precision_coverage(GOOD, GOOD, real_radii=np.array([1, 1, np.nan, 1, 1, 1, 1, 1, 1, 1.0]))


def test_real_radii_validation():
    with pytest.raises(ValueError, match=r"real_features \(group 'x'\) has 3 row\(s\), but nearest_k=2 needs at least 4"):
        mf.real_radii(GOOD[:3], 2, group="x")
