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
(:func:`~fastprop._blas.blas_on_calling_thread`): Numba's threads are the
only parallel work of a fit.
"""

import functools
import threading

import numba

from ._blas import blas_on_calling_thread

#: The layers Numba documents as safe for concurrent launches from several threads.
_THREADSAFE_LAYERS = ("tbb", "omp")
#: Re-entrant: a fit that builds its graph enters a serialised function twice.
_LOCK = threading.RLock()


def _threadsafe_layer():
    """Whether Numba has chosen a thread-safe layer (it chooses at the first parallel launch)."""
    try:
        return numba.threading_layer() in _THREADSAFE_LAYERS
    except ValueError:  # no parallel kernel has run in this process yet
        return False


def serialised(function):
    """Run ``function`` with BLAS on the calling thread, under the lock unless Numba's layer is thread-safe."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with blas_on_calling_thread():
            if _threadsafe_layer():
                return function(*args, **kwargs)
            with _LOCK:
                return function(*args, **kwargs)

    return wrapper
