"""Validation of memory requests: refuse up front what this machine cannot hold."""

import os


def check_memory(n_bytes, what, hint):
    """Refuse up front a request for more memory than the machine has.

    It would otherwise end in a ``MemoryError`` halfway, or, where the
    operating system overcommits, in the out-of-memory killer. No check where
    the physical memory is unknown (e.g. Windows).

    Parameters
    ----------
    n_bytes : int
        An estimate of what the request allocates.
    what : str
        The request, with the parameters that size it (``"GCN(hidden=10**9)"``).
    hint : str
        How to make it fit.
    """
    total = physical_memory()
    if total is not None and n_bytes > total:
        raise ValueError(
            f"{what} needs about {n_bytes / 2**30:,.1f} GiB of memory, more than this machine's "
            f"{total / 2**30:,.1f} GiB; {hint}"
        )


def physical_memory():
    """Bytes of physical memory, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
