"""What the validation parts share: how many bad entries a message shows, and int64's range."""

import numpy as np

_MAX_SHOWN = 5
_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


def _shown(indices):
    """Format the first few of ``indices`` for an error message."""
    indices = [int(i) for i in indices[:_MAX_SHOWN]]
    return ", ".join(map(str, indices))
