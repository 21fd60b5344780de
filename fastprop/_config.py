"""One place for the Numba compile options used by every kernel.

``fastmath`` stays off: the kernels rely on IEEE semantics (no NaN/inf
shortcuts), and bit-for-bit determinism matters more than the last few percent.
"""

JIT_OPTIONS = {"nogil": True, "cache": True, "fastmath": False}
PARALLEL_JIT_OPTIONS = {**JIT_OPTIONS, "parallel": True}
