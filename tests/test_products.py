"""Large products in two halves (fastprop.products): NumPy's values, the same whatever the thread count."""

import signal

import numba
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fastprop.products as products
from fastprop.products import SPLIT_FROM, matmul
from forks import status_of_forked_check

SHAPES = [
    (3000, 384, 64),  # split by rows
    (40, 2000, 900),  # more columns than rows: split by columns
    (900, 384, 1),  # one column: not split
    (20, 30, 40),  # below SPLIT_FROM
]


@pytest.mark.parametrize("rows, inner, columns", SHAPES)
def test_halves_give_numpys_product(rows, inner, columns):
    rng = np.random.default_rng(rows)
    a, b = rng.normal(size=(rows, inner)), rng.normal(size=(inner, columns))
    expected = a @ b
    assert_allclose(matmul(a, b), expected, rtol=1e-12, atol=1e-12)
    out = np.full((rows, columns), np.nan)
    assert matmul(a, b, out=out) is out
    assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    # a transposed view, as the softmax gradient's X.T @ residual
    assert_allclose(matmul(a.T.copy().T, b), expected, rtol=1e-12, atol=1e-12)


def test_the_split_does_not_depend_on_the_thread_count(monkeypatch):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3000, 384)), rng.normal(size=(384, 64))
    assert a.shape[0] * a.shape[1] * b.shape[1] >= SPLIT_FROM
    calls = []
    monkeypatch.setattr(products, "_helper_thread", lambda real=products._helper_thread: calls.append(1) or real())
    two = matmul(a, b)
    with_two_threads = len(calls)
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        one = matmul(a, b)
    finally:
        numba.set_num_threads(previous)
    assert_array_equal(one, two)  # the same halves, one after the other
    assert with_two_threads == (1 if previous >= 2 else 0) and len(calls) == with_two_threads


def test_a_forked_child_makes_its_own_helper_thread():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3000, 384)), rng.normal(size=(384, 64))
    expected = matmul(a, b)  # the helper thread exists in the parent now (with two Numba threads)

    def child_check():
        signal.alarm(30)  # the parent's helper thread is not in the child: waiting on it would hang
        return 0 if np.array_equal(matmul(a, b), expected) else 1

    assert status_of_forked_check(child_check) == 0
