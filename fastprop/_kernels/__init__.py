"""Numba kernels over plain arrays; the public modules validate, these trust."""
