"""Large dense matrix products in two halves, on two threads when Numba may use two.

A fit keeps every OpenBLAS on one thread (:mod:`fastprop._blas`: BLAS pools
that spin beside Numba's cost more than they give on two cores), so its
softmax regressions, most of a fit on real sets (bench/RESULTS.md, issue
#17), ran on one core while the other idled. :func:`matmul` splits a large
product into two halves of its output's rows and runs one half on a helper
thread while the calling thread runs the other: each half is a one-thread
BLAS call, and the threads wait for each other by blocking, not spinning, so
a busy machine costs a switch, not a spin. OpenBLAS may block a half
otherwise than the whole, so the last bits can differ from the whole
product's (on this machine not for the products of the real sets' fits,
whose 36 arrays stayed the same to the bit, but e.g. for 800 x 384 by
384 x 450); a product is always split the same way whatever the number of
threads (with one, or when no thread can be started, as at the
interpreter's exit, the halves run one after the other), so its values do
not depend on that. One helper thread serves every thread of the process: a
caller that finds it busy with another caller's half runs both of its own
halves itself rather than queue behind it (the same halves, so the same
values).
"""

import os
import threading
from concurrent.futures import wait  # concurrent.futures._base only: no atexit registration at import

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
#: Held while a half is queued on or running on the helper thread.
_helper_free = threading.Semaphore(1)


def matmul(a, b, out=None):
    """``a @ b`` for 2-d float arrays, into ``out`` when given (of the product's shape, not overlapping ``a``).

    From :data:`SPLIT_FROM` multiply-adds on, and with two output rows or
    more, computed as two halves of the output's rows, on two threads when
    ``numba.get_num_threads()`` is 2 or more.
    """
    rows, inner = a.shape
    columns = b.shape[1]
    if out is None:
        out = np.empty((rows, columns), dtype=np.result_type(a, b))
    if rows * inner * columns < SPLIT_FROM or rows < 2:
        return _product(a, b, out)
    half = rows // 2
    _in_two(lambda: _product(a[:half], b, out[:half]), lambda: _product(a[half:], b, out[half:]))
    return out


def _product(a, b, out):
    return np.matmul(a, b, out=out)


def _in_two(first, second):
    """``first()`` on the helper thread and ``second()`` here; both here with one Numba thread, when the helper is
    busy with another caller's half (queueing behind it cost 0.85-0.88x the speed of unsplit products with 4-8
    fitting threads on 2 cores; running here 0.96-1.00x, bench/RESULTS.md, issue #17) or cannot start."""
    future = None
    if _numba_threads() >= 2 and _helper_free.acquire(blocking=False):
        free = _helper_free  # a forked child replaces the module's semaphore: release the one acquired

        def on_helper():
            try:
                first()
            finally:
                free.release()  # before the future is done, so that this caller's next product finds it free

        try:
            future = _helper_thread().submit(on_helper)
        except RuntimeError:  # no new thread at the interpreter's exit: the same halves, one after the other
            free.release()
    if future is None:
        first()
        second()
        return
    try:
        second()
        wait([future])
    except BaseException:
        if future.cancel():  # still queued: it never runs
            free.release()
        else:  # running: it writes into the output, let it end
            _wait_out(future)
        raise
    future.result()


def _wait_out(future):
    """Wait until ``future`` is done, through interrupts (the first of which is raised afterwards)."""
    interrupted = None
    while True:
        try:
            wait([future])
            break
        except BaseException as error:
            interrupted = interrupted or error
    if interrupted is not None:
        raise interrupted


def _numba_threads():
    """``numba.get_num_threads()``, without launching Numba's threading layer when no layer runs yet.

    Launching it (GNU OpenMP in pip wheels) would make every child forked afterwards unable to run a parallel
    kernel; before a launch no thread can have called ``set_num_threads`` (it launches one), so the count is
    the configured one.
    """
    try:
        numba.threading_layer()
    except ValueError:
        return numba.config.NUMBA_NUM_THREADS
    return numba.get_num_threads()


def _helper_thread():
    global _helper
    with _helper_lock:
        if _helper is None:
            # imported here: its import registers a threading atexit hook, which raises at the interpreter's
            # exit (a RuntimeError, which _in_two answers by running both halves here)
            from concurrent.futures.thread import ThreadPoolExecutor

            _helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fastprop-products")
        return _helper


def _after_fork_in_child():
    """A forked child has no helper thread (only the thread that forked): it makes a new one when needed."""
    global _helper, _helper_lock, _helper_free
    _helper, _helper_lock, _helper_free = None, threading.Lock(), threading.Semaphore(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
