"""Calls from several Python threads: one lock where Numba's threading layer needs it.

Numba runs ``parallel=True`` kernels on one of three threading layers. ``tbb``
and ``omp`` are thread-safe; ``workqueue``, the only one guaranteed to be
present (what a plain ``pip install`` gets without TBB or an OpenMP runtime),
aborts the whole process ("Concurrent access has been detected") when two
threads launch parallel kernels at once. Every public entry point that runs
parallel kernels is decorated with :func:`serialised`: under ``workqueue``
(or before any parallel kernel has run, when Numba has not chosen a layer
yet) it holds one process-wide lock, so concurrent calls run one after the
other; under ``tbb`` or ``omp`` it does nothing and they run concurrently.
Either way each call's result is the one it would have alone. The same
decorator runs the call with every OpenBLAS on one thread
(:func:`~fastprop._blas.blas_on_calling_thread`): Numba's threads, and the
large products :func:`fastprop.products.matmul` splits between the calling
thread and one helper thread (shared by concurrent calls, which then queue
their halves on it), are the only parallel work of a fit.

Processes: GNU OpenMP (Numba's ``omp`` layer in pip wheels on Linux) cannot
run again in a child forked after it ran; Numba then ends the child with
SIGTERM at its first parallel kernel. A decorated call in such a child
raises a RuntimeError that says how to start the processes instead (a call
already running in the thread that forked is not stopped). The child learns
it, and gets a lock of its own, from an ``os.register_at_fork`` hook set at
import: a hook cannot be set later for forks that happen before.
"""

import functools
import os
import threading

import numba

from ._blas import blas_on_calling_thread

#: The layers Numba documents as safe for concurrent launches from several threads.
_THREADSAFE_LAYERS = ("tbb", "omp")
#: Re-entrant: a fit that builds its graph enters a serialised function twice.
_LOCK = threading.RLock()
#: Whether this process was forked from one whose parallel kernels ran on GNU OpenMP.
_forked_after_gnu_openmp = False
FORKED_AFTER_GNU_OPENMP = (
    "This process was forked from one that had already run Numba's parallel kernels (fastprop's or any "
    "other's) on its GNU OpenMP threading layer, which cannot run again after fork() (Numba would end this "
    "process). Start "
    "worker processes with the 'spawn' or 'forkserver' start method (multiprocessing.get_context('spawn'), "
    "ProcessPoolExecutor(mp_context=...)), or fork them before the first fit, or set "
    "NUMBA_THREADING_LAYER=workqueue (or install tbb) before fastprop is imported."
)


def _threadsafe_layer():
    """Whether Numba has chosen a thread-safe layer (it chooses at the first parallel launch)."""
    try:
        return numba.threading_layer() in _THREADSAFE_LAYERS
    except ValueError:  # no parallel kernel has run in this process yet
        return False


def _gnu_openmp_in_use():
    """Whether Numba has launched its parallel kernels on GNU OpenMP in this process."""
    try:
        if numba.threading_layer() != "omp":
            return False
    except ValueError:  # no parallel kernel has run in this process yet
        return False
    from numba.np.ufunc import omppool

    return getattr(omppool, "openmp_vendor", "GNU") == "GNU"


def _after_fork_in_child():
    """A forked child: a lock of its own (the parent's holder is not here); whether OpenMP can run."""
    global _LOCK, _forked_after_gnu_openmp
    _LOCK = threading.RLock()
    _forked_after_gnu_openmp = _forked_after_gnu_openmp or _gnu_openmp_in_use()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def serialised(function):
    """Run ``function`` with BLAS on the calling thread, under the lock unless Numba's layer is thread-safe.

    Raises a RuntimeError in a child forked after GNU OpenMP ran (see the module notes).
    """

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if _forked_after_gnu_openmp:
            raise RuntimeError(FORKED_AFTER_GNU_OPENMP)
        with blas_on_calling_thread():
            if _threadsafe_layer():
                return function(*args, **kwargs)
            with _LOCK:
                return function(*args, **kwargs)

    return wrapper
