"""Tests of the synthetic mixture generator and of the embedding loader."""

import time
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from fastprop.evaluation.datasets import load_embeddings, make_noisy_mixture
from fastprop.evaluation.protocol import make_noisy_task

BANKING77 = Path(__file__).resolve().parents[2] / "shared" / "data" / "banking77_minilm.npz"


def _knn_vote_accuracy(X, y, k=15):
    """Leave-one-out k-NN (cosine) majority vote accuracy on the in-class samples only."""
    X, y = X[y >= 0], y[y >= 0]
    similarity = X @ X.T
    np.fill_diagonal(similarity, -np.inf)
    neighbours = np.argpartition(-similarity, k, axis=1)[:, :k]
    votes = np.zeros((y.size, y.max() + 1), dtype=np.int64)
    np.add.at(votes, (np.repeat(np.arange(y.size), k), y[neighbours].ravel()), 1)
    return float((votes.argmax(axis=1) == y).mean())


# ---------------------------------------------------------------- make_noisy_mixture


def test_mixture_shapes_norms_and_labels():
    X, y = make_noisy_mixture(3000, 12, n_features=48, random_state=0)
    assert X.shape == (3000, 48) and X.dtype == np.float32 and X.flags.c_contiguous
    assert y.shape == (3000,) and y.dtype == np.int64
    assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-5)
    assert (y == -1).sum() == 600  # outlier_fraction=0.2
    assert_array_equal(np.unique(y[y >= 0]), np.arange(12))


def test_mixture_classes_are_uneven_and_imbalance_one_is_balanced():
    _, y = make_noisy_mixture(5000, 20, random_state=1)
    sizes = np.bincount(y[y >= 0])
    assert sizes.max() / sizes.min() == pytest.approx(5.0, rel=0.05)
    _, y = make_noisy_mixture(5000, 20, class_imbalance=1.0, random_state=1)
    sizes = np.bincount(y[y >= 0])
    assert sizes.max() - sizes.min() <= 1


def test_mixture_is_deterministic_for_a_seed():
    a = make_noisy_mixture(1000, 5, random_state=7)
    b = make_noisy_mixture(1000, 5, random_state=7)
    c = make_noisy_mixture(1000, 5, random_state=8)
    assert_array_equal(a[0], b[0])
    assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    d = make_noisy_mixture(1000, 5, random_state=np.random.default_rng(7))
    assert_array_equal(a[0], d[0])


def test_mixture_outlier_knobs():
    _, y = make_noisy_mixture(1000, 5, outlier_fraction=0.0, random_state=0)
    assert (y >= 0).all()
    _, y = make_noisy_mixture(1000, 5, outlier_fraction=0.5, diffuse_fraction=1.0,
                              n_outlier_classes=0, random_state=0)
    assert (y == -1).sum() == 500
    X, y = make_noisy_mixture(500, 3, n_features=8, intrinsic_dim=100, modes_per_class=1,
                              random_state=0)
    assert X.shape == (500, 8)


def test_mixture_is_hard_but_learnable_and_overlap_controls_it():
    # The calibrated default gives about 0.8 with 30-NN on 10,000 samples; on this
    # small sample the 15-NN vote should land in a broad band around it.
    X, y = make_noisy_mixture(2500, 10, random_state=0)
    default = _knn_vote_accuracy(X, y)
    assert 0.6 < default < 0.97
    easy = _knn_vote_accuracy(*make_noisy_mixture(2500, 10, overlap=0.5, random_state=0))
    hard = _knn_vote_accuracy(*make_noisy_mixture(2500, 10, overlap=1.5, random_state=0))
    assert hard < default < easy


def test_mixture_outliers_sit_near_real_classes():
    X, y = make_noisy_mixture(3000, 10, diffuse_fraction=0.0, random_state=0)
    similarity = X[y == -1] @ X[y >= 0].T
    # Clustered outliers have in-class neighbours about as close as in-class samples do.
    inlier_similarity = X[y >= 0][:300] @ X[y >= 0].T
    np.fill_diagonal(inlier_similarity, -1)
    assert np.median(similarity.max(axis=1)) > 0.8 * np.median(inlier_similarity.max(axis=1))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_samples=0), r"n_samples=0 is out of range"),
        (dict(n_classes=0), r"n_classes=0 is out of range"),
        (dict(n_features=1), r"n_features=1 is out of range"),
        (dict(overlap=0.0), r"overlap=0.0 is out of range; allowed: \(0, 1000000.0\]"),
        (dict(class_imbalance=0.5), r"class_imbalance=0.5 is out of range"),
        (dict(outlier_fraction=1.0), r"outlier_fraction=1.0 is out of range"),
        (dict(diffuse_fraction=1.5), r"diffuse_fraction=1.5 is out of range"),
        (dict(modes_per_class=0), r"modes_per_class=0 is out of range"),
        (dict(n_samples=10, n_classes=20), r"n_samples=10 leaves 8 in-class samples"),
        (dict(n_outlier_classes=0), r"n_outlier_classes=0 but diffuse_fraction=0.3"),
        (dict(random_state=-1), r"random_state=-1 must be a non-negative"),
    ],
)
def test_mixture_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_noisy_mixture(**({"n_samples": 200, "n_classes": 5} | kwargs))


@pytest.mark.slow
def test_mixture_is_fast():
    make_noisy_mixture(1000, random_state=0)
    start = time.perf_counter()
    make_noisy_mixture(100_000, 100, n_features=128, random_state=0)
    assert time.perf_counter() - start < 2.0


# ---------------------------------------------------------------- load_embeddings


def test_load_embeddings_round_trips_npz_and_npy(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 6))
    y = rng.integers(-1, 3, size=20)
    np.savez(tmp_path / "both.npz", X=X, y=y, names=np.array(["a", "b"]))
    loaded_X, loaded_y = load_embeddings(tmp_path / "both.npz")
    assert loaded_X.dtype == np.float32 and loaded_y.dtype == np.int64
    assert_allclose(loaded_X, X, rtol=1e-6)
    assert_array_equal(loaded_y, y)

    np.savez_compressed(tmp_path / "only_x.npz", X=X)
    assert load_embeddings(str(tmp_path / "only_x.npz"))[1] is None
    np.save(tmp_path / "x.npy", X.astype(np.float16))
    loaded_X, loaded_y = load_embeddings(tmp_path / "x.npy")
    assert loaded_y is None and loaded_X.shape == (20, 6)


def test_load_embeddings_errors(tmp_path):
    X = np.ones((4, 3))
    with pytest.raises(ValueError, match=r"has suffix '\.csv'; load_embeddings reads '\.npz'"):
        load_embeddings(tmp_path / "x.csv")
    with pytest.raises(ValueError, match="does not exist"):
        load_embeddings(tmp_path / "missing.npz")
    np.savez(tmp_path / "no_x.npz", features=X, labels=[0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"has no array 'X'; it holds \['features', 'labels'\]"):
        load_embeddings(tmp_path / "no_x.npz")
    np.savez(tmp_path / "short_y.npz", X=X, y=[0, 1])
    with pytest.raises(ValueError, match=r"y in .* has shape \(2,\) but X has 4 rows"):
        load_embeddings(tmp_path / "short_y.npz")
    np.savez(tmp_path / "float_y.npz", X=X, y=[0.5, 1, 2, 3])
    with pytest.raises(ValueError, match="y must hold integer labels"):
        load_embeddings(tmp_path / "float_y.npz")
    np.savez(tmp_path / "neg_y.npz", X=X, y=[0, -2, 1, 1])
    with pytest.raises(ValueError, match=r"labels below -1 \(e.g. -2\)"):
        load_embeddings(tmp_path / "neg_y.npz")
    np.savez(tmp_path / "nan.npz", X=np.where(np.eye(4, 3) > 0, np.nan, 1.0))
    with pytest.raises(ValueError, match="NaN or infinite"):
        load_embeddings(tmp_path / "nan.npz")
    np.savez(tmp_path / "objects.npz", X=np.array([{"a": 1}, None], dtype=object))
    with pytest.raises(ValueError, match=r"objects.npz: array 'X' holds Python objects .* never unpickles"):
        load_embeddings(tmp_path / "objects.npz")
    (tmp_path / "garbage.npy").write_bytes(b"not numpy at all")
    with pytest.raises(ValueError, match="garbage.npy"):
        load_embeddings(tmp_path / "garbage.npy")
    (tmp_path / "truncated.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match="truncated.npz"):
        load_embeddings(tmp_path / "truncated.npz")


# ---------------------------------------------------------------- real data


@pytest.mark.skipif(not BANKING77.is_file(), reason=f"real data not found at {BANKING77}")
def test_banking77_loads_and_yields_a_protocol_task():
    X, y = load_embeddings(BANKING77)
    assert X.shape == (13083, 384) and X.dtype == np.float32
    assert_allclose(np.linalg.norm(X[:100], axis=1), 1.0, atol=1e-4)
    assert_array_equal(np.unique(y), np.arange(77))
    task = make_noisy_task(y, 10, label_ratio=0.01, noise_ratio=0.3, random_state=0)
    assert task.subset(X).shape == (task.n_samples, 384)
    n_unseeded = (~task.seed_mask & (task.truth >= 0)).sum()
    assert (task.truth == -1).sum() == round(0.3 / 0.7 * n_unseeded)
    assert set(np.unique(task.truth[task.seed_mask])) == set(range(10))
