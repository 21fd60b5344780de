"""Exact copies among rows: hashing rows, checking hash runs, and spreading neighbour lists to copies."""

import numba
import numpy as np

from .._config import JIT_OPTIONS, PARALLEL_JIT_OPTIONS

#: FNV-1a, 64 bits: offset basis and prime.
_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@numba.njit(**PARALLEL_JIT_OPTIONS)
def row_hashes(words, hashes):
    """FNV-1a of each row's 32-bit words: rows with the same bits have the same hash.

    Parameters
    ----------
    words : ndarray of shape (n_rows, n_words), uint32
        The rows' bit patterns (a float32 array viewed as uint32).
    hashes : ndarray of shape (n_rows,), uint64
        Output.
    """
    for row in numba.prange(words.shape[0]):
        value = _FNV_OFFSET
        for column in range(words.shape[1]):
            value = (value ^ np.uint64(words[row, column])) * _FNV_PRIME
        hashes[row] = value


@numba.njit(**JIT_OPTIONS)
def runs_hold_copies(words, rows, run_start):
    """Whether every row of each run has the bits of the run's first row.

    Run ``r`` is ``rows[run_start[r]:run_start[r + 1]]`` (rows of one hash).
    False as soon as one row differs (two different rows of one hash).
    """
    for run in range(run_start.size - 1):
        first = rows[run_start[run]]
        for position in range(run_start[run] + 1, run_start[run + 1]):
            other = rows[position]
            for column in range(words.shape[1]):
                if words[other, column] != words[first, column]:
                    return False
    return True


@numba.njit(**PARALLEL_JIT_OPTIONS)
def spread_to_copies(own_group, list_of_row, group_start, group_rows, neighbour_groups, neighbour_similarities,
                     indices, similarities):
    """Each row's neighbour list from groups': its copies first, then the nearest groups' rows.

    Row ``v`` lists the other rows of its own group ``own_group[v]`` (none
    when -1; similarity 1) in increasing row order, then the rows of the
    groups ``neighbour_groups[list_of_row[v]]``, nearest first (each
    group's rows in increasing order, at that group's similarity), until
    its ``k`` entries are filled: the order an exact search gives copies
    (equal scores keep increasing row order). Rows are independent: the
    parallel loop is race free.

    Parameters
    ----------
    own_group : ndarray of shape (n_rows,), int64
        The group of each row listed (a fitted row), or -1 (a new point).
    list_of_row : ndarray of shape (n_rows,), int64
        The row of ``neighbour_groups`` each row reads.
    group_start : ndarray of shape (n_groups + 1,), int64
    group_rows : ndarray of shape (n_fitted,), int64
        Rows sorted by group, then row: group ``g`` is
        ``group_rows[group_start[g]:group_start[g + 1]]``.
    neighbour_groups : ndarray of shape (n_lists, k_groups), int64
    neighbour_similarities : ndarray of shape (n_lists, k_groups), float32
        Nearest groups (other than the row's own), most similar first;
        enough to fill ``k`` entries for every row (the entries they leave
        unfilled are -1, similarity 0).
    indices : ndarray of shape (n_rows, k), integer
    similarities : ndarray of shape (n_rows, k), float32
        Outputs.
    """
    k = indices.shape[1]
    for row in numba.prange(own_group.size):
        own = own_group[row]
        count = 0
        if own >= 0:
            for position in range(group_start[own], group_start[own + 1]):
                if count == k:
                    break
                other = group_rows[position]
                if other != row:
                    indices[row, count] = other
                    similarities[row, count] = 1.0
                    count += 1
        listed = 0
        source = list_of_row[row]
        while count < k and listed < neighbour_groups.shape[1]:
            near = neighbour_groups[source, listed]
            if near < 0 or near >= group_start.size - 1:  # not a group: never read outside the arrays
                break
            for position in range(group_start[near], group_start[near + 1]):
                if count == k:
                    break
                indices[row, count] = group_rows[position]
                similarities[row, count] = neighbour_similarities[source, listed]
                count += 1
            listed += 1
        for position in range(count, k):
            indices[row, position] = -1
            similarities[row, position] = 0.0
