"""Validation of scalar parameters: integers, booleans, reals, choices, ``n_neighbors`` and ``random_state``.

An integer fastprop takes must fit int64 (:func:`fits_int64`), as it reaches
NumPy, Numba or hnswlib as a machine integer.
"""

import math
import numbers

import numpy as np

from ._common import _INT64_MAX, _INT64_MIN


def check_integer(name, value, *, low=None, high=None):
    """Validate an integer parameter in the closed range ``[low, high]``.

    An open end is int64's: every integer fastprop takes reaches NumPy,
    Numba or hnswlib as a machine integer, where a larger Python int would
    fail deep inside with an OverflowError.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    low = _INT64_MIN if low is None else low
    high = _INT64_MAX if high is None else high
    _check_range(name, value, low, high, True, True)
    return int(value)


def check_bool(name, value):
    """Validate a True/False parameter."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


def check_real(name, value, *, low=None, high=None, low_inclusive=True, high_inclusive=True):
    """Validate a finite real parameter in a range; open ends are ``None``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}.")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # a Python int beyond float64's range
        finite = False
    if not finite:
        if isinstance(value, numbers.Integral):  # e.g. 10**400: its size, not a prefix that reads as finite
            digits = int(abs(int(value)).bit_length() * math.log10(2)) + 1  # repr fails past 4,300 digits
            shown = f"{'a negative' if value < 0 else 'an'} integer of about {digits} digits"
        else:
            shown = repr(value)
            shown = shown if len(shown) <= 40 else f"{shown[:30]}..."
        raise ValueError(f"{name} must be finite, got {shown}.")
    _check_range(name, value, low, high, low_inclusive, high_inclusive)
    return float(value)


def _check_range(name, value, low, high, low_inclusive, high_inclusive):
    too_low = low is not None and (value < low if low_inclusive else value <= low)
    too_high = high is not None and (value > high if high_inclusive else value >= high)
    if too_low or too_high:
        left = "-inf" if low is None else "-2**63" if low == _INT64_MIN else f"{low}"
        right = "inf" if high is None else "2**63 - 1" if high == _INT64_MAX else f"{high}"
        bracket_left = "[" if low_inclusive and low is not None else "("
        bracket_right = "]" if high_inclusive and high is not None else ")"
        raise ValueError(
            f"{name}={value!r} is out of range; allowed: "
            f"{bracket_left}{left}, {right}{bracket_right}."
        )


def check_choice(name, value, choices):
    """Validate that ``value`` is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name}={value!r} is not supported; choose one of {allowed}.")
    return value


def check_n_neighbors(n_neighbors, n_samples):
    """Validate the number of neighbours of a kNN graph on ``n_samples`` points."""
    check_integer("n_neighbors", n_neighbors, low=1)
    if n_neighbors >= n_samples:
        raise ValueError(
            f"n_neighbors={n_neighbors!r} must be smaller than the number of samples "
            f"({n_samples}); the largest allowed value is {n_samples - 1}."
        )
    return int(n_neighbors)


def check_random_state(random_state):
    """Turn ``random_state`` into a ``numpy.random.Generator``.

    ``None`` gives fresh entropy, an int a reproducible stream; a Generator is
    used as it is.
    """
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state={random_state!r} must be a non-negative integer.")
        return np.random.default_rng(int(random_state))
    raise ValueError(
        f"random_state must be None, a non-negative int or a numpy.random.Generator, "
        f"got {random_state!r}."
    )


def fits_int64(value):
    """Whether the Python integer ``value`` is an int64."""
    return _INT64_MIN <= value <= _INT64_MAX
