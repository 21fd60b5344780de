"""Large dense matrix products in two halves, on two threads when Numba may use two.

A fit keeps every OpenBLAS on one thread (:mod:`fastprop._blas`: BLAS pools
that spin beside Numba's cost more than they give on two cores), so its
softmax regressions, most of a fit on real sets (bench/RESULTS.md, issue
#17), ran on one core while the other idled. :func:`matmul` splits a large
product into two halves of its output, the rows or the columns, whichever
are more, and runs one half on a helper thread while the calling thread
runs the other: each half is a one-thread BLAS call, and the threads wait
for each other by blocking, not spinning, so a busy machine costs a switch,
not a spin. A product is always split the same way whatever the number of
threads (with one, the halves run one after the other), so its values do
not depend on it.
"""

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

__all__ = ["SPLIT_FROM", "matmul"]

#: Products of at least this many multiply-adds (rows x inner x columns) are split: below, the hand-off
#: costs about what the second thread saves (a 366 x 366 by 366 x 102 product, 14M, 1.26 -> 1.13 ms; 130 x
#: 384 by 384 x 77, 4M, 0.36 -> 0.52 ms; 6,366 x 384 by 384 x 64, 156M, 15.1 -> 8.5 ms; one OpenBLAS thread
#: each, 2 cores).
SPLIT_FROM = 2**24

_helper = None
_helper_lock = threading.Lock()


def matmul(a, b, out=None):
    """``a @ b`` for 2-d float arrays, into ``out`` when given (C-ordered float64 of the product's shape).

    From :data:`SPLIT_FROM` multiply-adds on, computed as two halves of the
    output's rows (when it has at least as many rows as columns) or
    columns, on two threads when ``numba.get_num_threads()`` is 2 or more.
    Each output entry is the same inner product either way.
    """
    rows, inner = a.shape
    columns = b.shape[1]
    if out is None:
        out = np.empty((rows, columns), dtype=np.result_type(a, b))
    if rows * inner * columns < SPLIT_FROM or min(rows, columns) < 2:
        return np.matmul(a, b, out=out)
    if rows >= columns:
        half = rows // 2
        first = (a[:half], b, out[:half])
        second = (a[half:], b, out[half:])
    else:
        half = columns // 2
        first = (a, b[:, :half], out[:, :half])
        second = (a, b[:, half:], out[:, half:])
    _in_two(lambda: np.matmul(*first[:2], out=first[2]), lambda: np.matmul(*second[:2], out=second[2]))
    return out


def _in_two(first, second):
    """``first()`` on the helper thread and ``second()`` here, or both here with one Numba thread."""
    if numba.get_num_threads() < 2:
        first()
        second()
        return
    future = _helper_thread().submit(first)
    try:
        second()
    finally:
        future.result()


def _helper_thread():
    global _helper
    with _helper_lock:
        if _helper is None:
            _helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fastprop-products")
        return _helper


def _after_fork_in_child():
    """A forked child has no helper thread (only the thread that forked): it makes a new one when needed."""
    global _helper, _helper_lock
    _helper, _helper_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
