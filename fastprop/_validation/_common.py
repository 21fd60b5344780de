"""What the validation parts share: how many bad entries a message shows, int64's range, and the error that
refuses an array of no numbers."""

import numpy as np

_MAX_SHOWN = 5
_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


def _shown(indices):
    """Format the first few of ``indices`` for an error message."""
    indices = [int(i) for i in indices[:_MAX_SHOWN]]
    return ", ".join(map(str, indices))


class NonNumericInputError(ValueError, TypeError):
    """An array that should hold numbers holds something else (a ValueError, and a TypeError
    as NumPy's own conversion raises)."""


def _refusal(dtype):
    """The error class that refuses an array of ``dtype`` where numbers are wanted.

    :class:`NonNumericInputError` where the dtype holds no numbers at all (text, bytes, objects,
    dates, records), so that callers who catch either ValueError or TypeError (as scikit-learn's
    users do) catch it; ValueError for numbers of the wrong kind (bool, complex).
    """
    return ValueError if dtype.kind in "biufc" else NonNumericInputError
