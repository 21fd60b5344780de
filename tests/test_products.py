"""Large products in two halves (fastprop.products): NumPy's values, the same whatever the thread count."""

import signal
import subprocess
import sys
import threading

import numba
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fastprop.products as products
from fastprop.products import SPLIT_FROM, matmul
from forks import status_of_forked_check

SHAPES = [
    (3000, 384, 64),  # split
    (40, 2000, 900),  # more columns than rows: split by rows too
    (1, 384, 90000),  # one row: not split
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


def recorded_halves(monkeypatch):
    """Each half's (first row, rows, thread name), as ``matmul`` hands them to NumPy."""
    calls = []
    real = products._product

    def product(a, b, out):
        calls.append((out.shape[0], threading.current_thread().name))
        return real(a, b, out)

    monkeypatch.setattr(products, "_product", product)
    return calls


def test_the_split_does_not_depend_on_the_thread_count(monkeypatch):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3001, 384)), rng.normal(size=(384, 64))
    assert a.shape[0] * a.shape[1] * b.shape[1] >= SPLIT_FROM
    calls = recorded_halves(monkeypatch)
    two = matmul(a, b)
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        one = matmul(a, b)
    finally:
        numba.set_num_threads(previous)
    assert_array_equal(one, two)
    # the same two halves either way (1500 and 1501 rows); with two threads one ran on the helper thread
    assert sorted(rows for rows, _ in calls[:2]) == sorted(rows for rows, _ in calls[2:]) == [1500, 1501]
    helpers = [name for _, name in calls if name.startswith("fastprop-products")]
    assert len(helpers) == (1 if previous >= 2 else 0)


def test_a_caller_that_finds_the_helper_busy_runs_both_halves_itself(monkeypatch):
    """A stress test: with 4-8 fitting threads every caller queued behind the one helper thread."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(3001, 384)), rng.normal(size=(384, 64))
    calls = recorded_halves(monkeypatch)
    alone = matmul(a, b)
    assert products._helper_free.acquire(blocking=False)  # another caller's half holds the helper
    try:
        busy = matmul(a, b)
    finally:
        products._helper_free.release()
    assert_array_equal(busy, alone)
    assert sorted(rows for rows, _ in calls[2:]) == [1500, 1501]
    assert {name for _, name in calls[2:]} == {threading.current_thread().name}


def test_concurrent_callers_get_the_products_they_would_get_alone():
    rng = np.random.default_rng(4)
    pairs = [(rng.normal(size=(2000 + 7 * k, 384)), rng.normal(size=(384, 64))) for k in range(4)]
    alone = [matmul(a, b) for a, b in pairs]
    results = [[] for _ in pairs]

    def repeat(k):
        for _ in range(20):
            results[k].append(matmul(*pairs[k]))

    threads = [threading.Thread(target=repeat, args=(k,)) for k in range(len(pairs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for expected, got in zip(alone, results):
        assert len(got) == 20
        for product in got:
            assert_array_equal(product, expected)
    assert products._helper_free.acquire(blocking=False)  # every caller released the helper
    products._helper_free.release()


def test_an_error_in_a_half_is_raised_once_after_both_end(monkeypatch):
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(3000, 384)), rng.normal(size=(384, 64))

    def failing(a, b, out):
        raise FloatingPointError("a half failed")

    monkeypatch.setattr(products, "_product", failing)
    with pytest.raises(FloatingPointError, match="a half failed") as raised:
        matmul(a, b)
    assert raised.value.__context__ is None  # not the helper's copy on top of the caller's


def printed_by(code):
    """What a fresh Python process running ``code`` prints, once it has exited with status 0."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_product_at_the_interpreters_exit_runs_its_halves_here():
    """A review: a fit still running at the interpreter's exit (a background thread, an atexit handler) failed,
    the helper thread refusing new work then."""
    code = ("import atexit, numpy as np; from fastprop.products import matmul\n"
            "a = np.ones((3000, 384)); b = np.ones((384, 64))\n"
            "matmul(a, b)\n"  # the helper thread exists
            "def at_exit():\n"
            "    assert (matmul(a, b) == 384.0).all(); print('ok')\n"
            "atexit.register(at_exit)\n")
    assert printed_by(code) == "ok"


def test_a_first_import_at_the_interpreters_exit_runs_its_halves_here():
    """A stress test: importing the thread pool registers a threading atexit hook, which raises at the exit."""
    code = ("import atexit, numpy as np\n"
            "def at_exit():\n"
            "    from fastprop.products import matmul\n"
            "    assert (matmul(np.ones((3000, 384)), np.ones((384, 64))) == 384.0).all(); print('ok')\n"
            "atexit.register(at_exit)\n")
    assert printed_by(code) == "ok"


def test_a_product_does_not_launch_numbas_threading_layer():
    """A stress test: launching it (GNU OpenMP) would leave every child forked later unable to run a parallel
    kernel, for a process that had only computed products."""
    code = ("import numba, numpy as np; from fastprop.products import matmul\n"
            "matmul(np.ones((3000, 384)), np.ones((384, 64)))\n"
            "try:\n    numba.threading_layer()\nexcept ValueError:\n    print('not launched')\n")
    assert printed_by(code) == "not launched"


def test_a_forked_child_makes_its_own_helper_thread():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3000, 384)), rng.normal(size=(384, 64))
    expected = matmul(a, b)  # the helper thread exists in the parent now (with two Numba threads)

    def child_check():
        signal.alarm(30)  # the parent's helper thread is not in the child: waiting on it would hang
        return 0 if np.array_equal(matmul(a, b), expected) else 1

    assert status_of_forked_check(child_check) == 0
