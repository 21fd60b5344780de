"""Exact copies among the rows of a feature matrix, for the hnsw search.

hnswlib's neighbour selection keeps a candidate only if it is closer to the
new point than to every neighbour already kept; a copy of a kept neighbour is
at distance 0 from it and is never kept. A large group of identical rows
(a sentence repeated many times) can so end up with no link to itself, and
its rows list far points instead of their copies (nmslib/hnswlib issues 263
and 341): measured on Banking77 with 65 of its sentences repeated 200 times
(26k rows), 10 of the 65 groups listed none of their copies, with neighbours
of similarity 0.52 where the exact search finds 0.78 and the copies 1. The
hnsw search therefore indexes one row of each group and gives every row its
copies first (:func:`fastprop._kernels.copies.spread_to_copies`), as the
exact search would.
"""

from dataclasses import dataclass

import numpy as np

from ._kernels.copies import row_hashes, runs_hold_copies

__all__ = ["CopyGroups", "GroupLists", "RowSubset", "copy_groups"]


@dataclass(frozen=True)
class CopyGroups:
    """Rows grouped by their exact bits.

    Attributes
    ----------
    representatives : ndarray of shape (n_groups,), int64
        The first row of each group, increasing: group ``g`` is the one of
        ``representatives[g]``.
    group : ndarray of shape (n_rows,), int64
        Each row's group.
    group_start, group_rows : ndarray of int64
        Group ``g``'s rows, increasing: ``group_rows[group_start[g]:group_start[g + 1]]``.
    """

    representatives: np.ndarray
    group: np.ndarray
    group_start: np.ndarray
    group_rows: np.ndarray

    @property
    def n_groups(self):
        """How many groups (each row's own when it has no copy)."""
        return self.representatives.size

    def group_lists(self):
        """What a search over the groups needs to list their rows (a predictor keeps this, not every row's group)."""
        return GroupLists(group_start=self.group_start, group_rows=self.group_rows)


@dataclass(frozen=True)
class GroupLists:
    """The rows of each group of identical rows, without the rows' groups.

    Attributes
    ----------
    group_start, group_rows : ndarray of int64
        As :class:`CopyGroups`'.
    """

    group_start: np.ndarray
    group_rows: np.ndarray

    @property
    def n_groups(self):
        """How many groups (each row's own when it has no copy)."""
        return self.group_start.size - 1


class RowSubset:
    """Rows ``rows`` of ``features``, gathered only when indexed: the hnsw search's blocks, never a whole copy.

    Supports what the hnsw search and :func:`fastprop.locality.spatial_order`
    read: ``shape`` and indexing by a slice or an array of positions.
    """

    def __init__(self, features, rows):
        self.features = features
        self.rows = rows
        self.shape = (rows.size, features.shape[1])

    def __getitem__(self, positions):
        return self.features[self.rows[positions]]


def copy_groups(features):
    """The groups of identical rows of ``features``, or None when no two rows are identical.

    Rows are hashed (64-bit FNV-1a of their bits) and the rows of one hash
    are checked to be identical; if two different rows ever share a hash,
    the groups are found by sorting the rows instead. ``0.0`` and
    ``-0.0`` are different bits, so rows that differ only there are not
    copies.

    Parameters
    ----------
    features : ndarray of shape (n_rows, n_features), float32, C-contiguous

    Returns
    -------
    CopyGroups or None
    """
    words = features.view(np.uint32)
    hashes = np.empty(features.shape[0], dtype=np.uint64)
    row_hashes(words, hashes)
    order = np.argsort(hashes, kind="stable")  # rows of one hash stay in increasing order
    sorted_hashes = hashes[order]
    starts = np.flatnonzero(np.r_[True, sorted_hashes[1:] != sorted_hashes[:-1]])
    if starts.size == features.shape[0]:
        return None
    run_start = np.r_[starts, features.shape[0]].astype(np.int64)
    if runs_hold_copies(words, order, run_start):
        run = np.repeat(np.arange(starts.size), np.diff(run_start))
        first_row = order[starts]
        group_of_run = np.argsort(np.argsort(first_row, kind="stable"), kind="stable")
        group = np.empty(features.shape[0], dtype=np.int64)
        group[order] = group_of_run[run]
    else:  # two different rows of one hash (about 1 in 10^10 at a million rows): sort the rows themselves
        _, first, group = np.unique(words, axis=0, return_index=True, return_inverse=True)
        group = np.argsort(np.argsort(first, kind="stable"), kind="stable")[group.ravel()]
    counts = np.bincount(group)
    if counts.size == features.shape[0]:  # a collision, and no copies
        return None
    group_rows = np.argsort(group, kind="stable")
    group_start = np.r_[0, np.cumsum(counts)].astype(np.int64)
    return CopyGroups(representatives=group_rows[group_start[:-1]], group=group, group_start=group_start,
                      group_rows=group_rows.astype(np.int64))
