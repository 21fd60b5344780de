"""Row norms against NumPy's."""

import numpy as np
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
