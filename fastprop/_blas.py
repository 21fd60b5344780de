"""BLAS on the calling thread only, for the length of a fit.

NumPy and SciPy each ship their own OpenBLAS (``pip`` wheels: NumPy's
``scipy_openblas64_``, SciPy's ``scipy_openblas``), each with a pool of
threads that busy-wait after every call, and Numba's parallel kernels have
a third pool that does the same. A fit alternates between them (a
softmax regression's products in NumPy, a smoothing kernel in Numba; when
this was measured, the regressions' solver was SciPy's L-BFGS-B, on SciPy's
OpenBLAS), and on two cores each pool then waits for
cores the others are spinning on. Measured on 2 vCPUs (bench/RESULTS.md,
issue #17): one NumPy product of 130 x 384 by 384 x 77 after a SciPy BLAS
call took 12.5 ms instead of 0.44 ms; a default ``FastProp`` fit on
Banking77 4.1 s instead of 1.5 s, the global SGC baseline 0.96 s instead of
0.22 s. Within :func:`blas_on_calling_thread` every OpenBLAS the process
has loaded runs on the thread that calls it, and the only parallel work
left is Numba's and the large products that :func:`fastprop.products.matmul`
splits in two halves, each a one-thread BLAS call on a thread of its own.

The count is a setting of the whole process (OpenBLAS has no per-thread
count in these builds: ``openblas_set_num_threads_local`` changes it for
every thread, measured), so it is set when the first of any concurrent
fits starts and given back when the last one ends; BLAS calls the user
makes on other threads meanwhile run on one thread too, and a count another
thread sets meanwhile (threadpoolctl) holds for the fits too and is
overridden when the last one ends. A forked child keeps only the blocks of
the thread that forked (:func:`_after_fork_in_child`). Another BLAS (MKL,
Accelerate, BLIS) is left as it is: ``OPENBLAS_NUM_THREADS=1``,
``MKL_NUM_THREADS=1`` or threadpoolctl do the same from outside. The
libraries are found through ``/proc/self/maps``, so on Linux only.
"""

import contextlib
import ctypes
import os
import threading

#: Shared libraries whose file name contains this are OpenBLAS builds.
_OPENBLAS_NAME = "openblas"
#: The name of the thread-count getter and setter, by build: plain, 64-bit integer
#: interface, and the ``scipy_openblas`` wheels of NumPy (64-bit) and SciPy.
_SYMBOL_PAIRS = (
    ("openblas_get_num_threads", "openblas_set_num_threads"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
)
_MAPS = "/proc/self/maps"

_controls = {}  # path -> (getter, setter), or None for a library without them
_lock = threading.Lock()
_holders = {}  # thread ident -> how many blocks of blas_on_calling_thread that thread is inside now
_saved = []  # (setter, count) to give back when the last of them ends


def _loaded_openblas_paths():
    """The paths of the OpenBLAS libraries mapped into this process (empty off Linux)."""
    try:
        with open(_MAPS) as maps:
            fields = [line.split() for line in maps]
    except OSError:
        return []
    paths = {entry[-1] for entry in fields if len(entry) >= 6 and entry[-1].startswith("/")}
    return sorted(path for path in paths if _OPENBLAS_NAME in os.path.basename(path).lower())


def _control(path):
    """The thread-count ``(getter, setter)`` of the library at ``path``, or None; looked up once."""
    if path not in _controls:
        _controls[path] = None
        try:
            # RTLD_NOLOAD: a handle to the library already mapped, never a second copy.
            library = ctypes.CDLL(path, mode=os.RTLD_NOLOAD)
        except OSError:
            return None
        for getter_name, setter_name in _SYMBOL_PAIRS:
            getter = getattr(library, getter_name, None)
            setter = getattr(library, setter_name, None)
            if getter is not None and setter is not None:
                getter.argtypes, getter.restype = [], ctypes.c_int
                setter.argtypes, setter.restype = [ctypes.c_int], None
                _controls[path] = (getter, setter)
                break
    return _controls[path]


def openblas_thread_counts():
    """The thread count of every OpenBLAS loaded now that has a known getter, by path."""
    controls = {path: _control(path) for path in _loaded_openblas_paths()}
    return {path: control[0]() for path, control in controls.items() if control is not None}


@contextlib.contextmanager
def blas_on_calling_thread():
    """Within the block, every loaded OpenBLAS runs on one thread; the counts come back after the last block."""
    me = threading.get_ident()
    with _lock:
        if not _holders:
            for path in _loaded_openblas_paths():
                control = _control(path)
                if control is not None:
                    getter, setter = control
                    _saved.append((setter, getter()))
                    setter(1)
        _holders[me] = _holders.get(me, 0) + 1
    try:
        yield
    finally:
        with _lock:
            _holders[me] -= 1
            if not _holders[me]:
                del _holders[me]
            if not _holders:
                _give_back()


def _give_back():
    """Set every OpenBLAS back to the count saved when the first block began."""
    for setter, count in reversed(_saved):
        setter(count)
    _saved.clear()


def _after_fork_in_child():
    """A forked child has only the thread that forked: the other threads' blocks end here.

    Without this a fit running on another thread at the fork left the
    child's OpenBLAS on one thread for good, and its lock held by a thread
    that does not exist in the child.
    """
    global _lock
    _lock = threading.Lock()
    me = threading.get_ident()
    for ident in [ident for ident in _holders if ident != me]:
        del _holders[ident]
    if not _holders:
        _give_back()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
