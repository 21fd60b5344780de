"""Running test code with a given number of Numba threads."""

import numba


def run_on_threads(n_threads, work):
    """``work()`` with ``n_threads`` Numba threads, the previous setting restored after."""
    previous = numba.get_num_threads()
    numba.set_num_threads(n_threads)
    try:
        return work()
    finally:
        numba.set_num_threads(previous)
