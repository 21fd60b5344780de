"""Row norms against NumPy's."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

import fastprop.rows as rows_module


def test_inverse_norms_block_by_block(monkeypatch):
    X = np.random.default_rng(9).normal(size=(50, 7)).astype(np.float32)
    monkeypatch.setattr(rows_module, "NORM_BLOCK_ROWS", 8)
    assert_allclose(rows_module.inverse_norms(X), 1.0 / np.linalg.norm(X.astype(np.float64), axis=1), rtol=1e-12)
    assert rows_module.inverse_norms(X / np.linalg.norm(X, axis=1, keepdims=True)) is None
    unit = rows_module.unit_rows(X)
    assert unit.dtype == np.float32
    assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-6)
    assert rows_module.unit_rows(unit) is unit  # already unit: no copy


def test_inverse_norms_of_unit_rows_times_powers_of_two_are_exact_powers():
    rng = np.random.default_rng(0)
    unit = rng.normal(size=(50, 12))
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    unit = unit.astype(np.float32)
    assert rows_module.inverse_norms(unit) is None
    exponents = rng.integers(-60, 60, size=50)
    scaled = (unit * np.ldexp(1.0, exponents)[:, None]).astype(np.float32)
    factors = rows_module.inverse_norms(scaled)
    assert np.array_equal(factors, np.ldexp(1.0, -exponents))
    assert np.array_equal((scaled * factors[:, None]).astype(np.float32), unit)  # the very bits of the unit rows
    general = unit * rng.uniform(0.5, 3.0, size=(50, 1)).astype(np.float32)
    assert_allclose(rows_module.inverse_norms(general), 1 / np.linalg.norm(general.astype(np.float64), axis=1))


def test_direction_spread_is_one_minus_the_mean_cosine_similarity(monkeypatch):
    rng = np.random.default_rng(10)
    X = (rng.normal(size=(200, 6)) + [3.0, 0, 0, 0, 0, 0]).astype(np.float32)
    unit = X.astype(np.float64) / np.linalg.norm(X.astype(np.float64), axis=1, keepdims=True)
    cosines = unit @ unit.T
    assert_allclose(rows_module.direction_spread(X, rows_module.inverse_norms(X)), 1.0 - cosines.mean(), rtol=1e-6)
    assert_allclose(rows_module.direction_spread(unit.astype(np.float32), None), 1.0 - cosines.mean(), rtol=1e-6)
    parallel = np.tile(unit[:1], (5, 1)).astype(np.float32)
    assert rows_module.direction_spread(parallel, None) == pytest.approx(0.0, abs=1e-6)
    assert rows_module.direction_spread(parallel, None) >= 0.0  # rounding never below 0
    assert rows_module.direction_spread(parallel[:1], None) == pytest.approx(0.0, abs=1e-6)  # one row
    assert rows_module.direction_spread(np.empty((0, 6), dtype=np.float32), None) == 1.0
    monkeypatch.setattr(rows_module, "SPREAD_SAMPLE_ROWS", 50)
    monkeypatch.setattr(rows_module, "NORM_BLOCK_ROWS", 16)
    every_fourth = unit[::4]
    mean = every_fourth.mean(axis=0)
    assert_allclose(rows_module.direction_spread(X, rows_module.inverse_norms(X)), 1.0 - mean @ mean, rtol=1e-6)
