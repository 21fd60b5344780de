"""Validation of memory requests: refuse up front what this machine, or this container, cannot hold."""

import os

#: This container's memory limit under cgroup v2: a number of bytes, or "max" for none.
_CGROUP_V2_MEMORY_MAX = "/sys/fs/cgroup/memory.max"
#: The same under cgroup v1, where "no limit" is a huge number (e.g. 9223372036854771712).
_CGROUP_V1_MEMORY_LIMIT = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
#: A limit file holds a number of at most 20 digits; one longer than this is not a limit file.
_LIMIT_FILE_BYTES = 64


def check_memory(n_bytes, what, hint):
    """Refuse up front a request for more memory than the machine, or its container, has.

    It would otherwise end in a ``MemoryError`` halfway, or, where the
    operating system overcommits or a container's limit is reached, in the
    out-of-memory killer. The limit is :func:`memory_limit`'s. No check where
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
    limit = memory_limit()
    if limit is not None and n_bytes > limit[0]:
        n_available, in_container = limit
        available = f"{n_available / 2**30:,.1f} GiB"
        where = f"this container's memory limit of {available}" if in_container else f"this machine's {available}"
        raise ValueError(f"{what} needs about {n_bytes / 2**30:,.1f} GiB of memory, more than {where}; {hint}")


def memory_limit():
    """``(bytes, in_container)``: the memory a process here can have, or None where the physical memory is unknown.

    The smaller of the physical memory and the container's limit (cgroup v2
    or v1, :func:`container_memory_limit`), ``in_container`` saying which;
    a container limit at or above the physical memory (cgroup v1 writes "no
    limit" as about 2**63) is no limit. The files are read at every call:
    they are tiny, and a limit may change while the process runs.
    """
    total = physical_memory()
    if total is None:
        return None
    container = container_memory_limit()
    if container is not None and container < total:
        return container, True
    return total, False


def physical_memory():
    """Bytes of physical memory, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def container_memory_limit():
    """Bytes of this container's memory limit (the smaller of cgroup v2's and v1's), or None.

    None where no limit file says a number: absent or unreadable files, "max"
    (cgroup v2's "no limit") and anything else that is not a positive number
    of bytes. Never raises.
    """
    limits = [limit for limit in map(_read_limit, (_CGROUP_V2_MEMORY_MAX, _CGROUP_V1_MEMORY_LIMIT)) if limit]
    return min(limits) if limits else None


def _read_limit(path):
    """The positive number of bytes file ``path`` holds, or None (see :func:`container_memory_limit`)."""
    try:
        with open(path, "rb") as file:
            text = file.read(_LIMIT_FILE_BYTES + 1).strip()
    except (OSError, ValueError):  # absent, unreadable, a directory, a name with a NUL
        return None
    if len(text) > _LIMIT_FILE_BYTES or not text.isdigit():
        return None
    return int(text) or None
