"""Validation of per-sample arrays: integer labels, sample weights, class distributions and confidences.

These check one array each (and :func:`check_scores` a triple of them
against known truth); :mod:`fastprop._labels` builds a fit's ``y`` and
validation set on :func:`as_integer_labels`.
"""

import math
import numbers

import numpy as np

from ._common import _INT64_MAX, NonNumericInputError, _refusal, _shown
from .scalars import fits_int64


def as_integer_labels(labels, name):
    """Return ``labels`` as int64, rejecting non-integral values and values outside int64.

    An object array is read as the numeric arrays are: integers (no bool) and
    finite whole floats, e.g. ``numpy.array([1.0, 2.0], dtype=object)``.
    A uint64 label of 2**64 - 1 used to wrap around to -1 (a seed silently
    dropped), and labels >= 2**63 to -9223372036854775808.
    """
    objects = labels.dtype == object
    integral = np.issubdtype(labels.dtype, np.integer) or (objects and all(map(_is_whole, labels.flat)))
    if np.issubdtype(labels.dtype, np.floating):
        integral = np.isfinite(labels).all() and np.array_equal(labels, np.round(labels))
    if integral:
        if labels.dtype.kind == "u":
            outside = labels > _INT64_MAX
        elif labels.dtype.kind == "f":
            outside = (labels >= 2.0**63) | (labels < -(2.0**63))
        elif objects:
            outside = np.fromiter((not _within_int64(value) for value in labels.flat), dtype=bool,
                                  count=labels.size).reshape(labels.shape)
        else:
            outside = np.zeros(labels.shape, dtype=bool)
        if outside.any():
            bad = labels[outside].flat[0]
            bad = bad.item() if isinstance(bad, np.generic) else bad  # a Python int already in an object array
            raise ValueError(
                f"{name} has label {bad!r}, outside int64 ([-2**63, 2**63 - 1]); fastprop's labels "
                "are int64. Encode the classes as small integers, e.g. with numpy.unique(..., return_inverse=True)."
            )
        return labels.astype(np.int64)
    error, detail = _refusal(labels.dtype), ""
    if np.issubdtype(labels.dtype, np.floating):
        detail = " with non-integral values"
    elif objects:
        bad = next(value for value in labels.flat if not _is_whole(value))
        bad = bad.item() if isinstance(bad, np.generic) else bad
        fraction = isinstance(bad, (float, np.floating))  # a fraction, NaN or infinity
        detail = f"{' with non-integral values' if fraction else ''} (e.g. {_short_repr(bad)})"
        error = ValueError if isinstance(bad, numbers.Number) else NonNumericInputError
    raise error(
        f"{name} must hold integer labels (-1 = unlabeled), got dtype {labels.dtype}{detail}. "
        "Encode class names as integers first, e.g. with numpy.unique(..., return_inverse=True)."
    )


def _is_whole(value):
    """Whether an object array's ``value`` is an integer label: an integer (no bool) or a finite whole float."""
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, numbers.Integral):
        return True
    if isinstance(value, float):  # Python's, and numpy.float64
        return math.isfinite(value) and value.is_integer()
    return isinstance(value, np.floating) and bool(np.isfinite(value) and value == np.floor(value))


def _within_int64(value):
    """Whether an integer or whole float (:func:`_is_whole`) is an int64."""
    return fits_int64(value) if isinstance(value, numbers.Integral) else -(2.0**63) <= value < 2.0**63


def _short_repr(value):
    shown = repr(value)
    return shown if len(shown) <= 40 else f"{shown[:30]}..."


def check_sample_weight(sample_weight, n_samples):
    """``score``'s weights: None, or ``n_samples`` finite non-negative reals with a positive sum; float64."""
    if sample_weight is None:
        return None
    weights = np.asarray(sample_weight)
    if weights.dtype == object or not (np.issubdtype(weights.dtype, np.number) or weights.dtype == np.bool_) \
            or np.iscomplexobj(weights):
        raise _refusal(weights.dtype)(f"sample_weight must hold real numbers, got dtype {weights.dtype}.")
    if weights.shape != (n_samples,):
        raise ValueError(f"sample_weight must have shape ({n_samples},), one weight per point, got {weights.shape}.")
    weights = weights.astype(np.float64)
    if not np.isfinite(weights).all():
        raise ValueError("sample_weight has NaN or infinite values; all must be finite.")
    if (weights < 0).any():
        raise ValueError("sample_weight has negative values; weights must be >= 0.")
    if not weights.sum() > 0:
        raise ValueError("sample_weight sums to 0; give at least one point a positive weight.")
    return weights


def check_distributions(distributions, n_samples, *, name="label_distributions"):
    """A method's class scores: (n_samples, n_classes), finite, non-negative, no all-zero row.

    Returns float64 rows normalised to sum 1.
    """
    array = np.asarray(distributions)
    if array.ndim != 2 or array.shape[0] != n_samples or array.shape[1] == 0:
        raise ValueError(
            f"{name} must have shape ({n_samples}, n_classes), one row per sample of the graph, got "
            f"shape {array.shape}."
        )
    if not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
        raise _refusal(array.dtype)(f"{name} must hold real numbers, got dtype {array.dtype}.")
    array = array.astype(np.float64)
    if not np.isfinite(array).all():
        raise ValueError(f"{name} has NaN or infinite values; all must be finite.")
    if (array < 0).any():
        raise ValueError(f"{name} has negative values; pass class probabilities (or scores >= 0).")
    with np.errstate(over="ignore"):
        totals = array.sum(axis=1, keepdims=True)
    if (totals == 0).any():
        bad = np.flatnonzero(totals[:, 0] == 0)
        raise ValueError(f"{name} has all-zero rows (rows {_shown(bad)}); every row needs a positive score.")
    overflow = np.flatnonzero(np.isinf(totals[:, 0]))
    if overflow.size:  # finite scores whose sum overflows: over the row's largest first
        rows = array[overflow] / array[overflow].max(axis=1, keepdims=True)
        array[overflow], totals[overflow] = rows, rows.sum(axis=1, keepdims=True)
    return array / totals


def check_confidence(confidence):
    """Validate a confidence array: 1-D, real, finite (it may be empty). Returns it as float64."""
    if confidence is None:
        raise ValueError("confidence is None; pass an array of one value per sample.")
    scores = np.asarray(confidence)
    if scores.ndim != 1:
        raise ValueError(f"confidence must be 1-D (n_samples,), got shape {scores.shape}.")
    if not (np.issubdtype(scores.dtype, np.floating) or np.issubdtype(scores.dtype, np.integer)):
        raise _refusal(scores.dtype)(f"confidence must hold real numbers, got dtype {scores.dtype}.")
    scores = scores.astype(np.float64)
    if not np.isfinite(scores).all():
        bad = np.flatnonzero(~np.isfinite(scores))
        raise ValueError(
            f"confidence has {bad.size} NaN or infinite value(s), the first at position {bad[0]} "
            f"({float(scores[bad[0]])}); all confidences must be finite."
        )
    return scores


def check_scores(confidence, predicted, truth, *, ranking_only=False):
    """Validate a ``(confidence, predicted, truth)`` triple of scores against known truth.

    Used by the outlier-threshold rules and the benchmark protocol. With
    ``ranking_only`` (an AUROC) ``predicted`` is not needed and must be None
    (else a ValueError).
    Returns float64 ``confidence`` and int64 ``predicted`` (or None) and ``truth``.
    """
    if ranking_only and predicted is not None:
        raise ValueError(
            f"predicted must be None with ranking_only=True (a ranking reads only confidence and truth), got "
            f"a {type(predicted).__name__}; pass predicted=None, or ranking_only=False to check it."
        )
    required = (("confidence", confidence), ("truth", truth)) + (() if ranking_only else (("predicted", predicted),))
    for name, value in required:
        if value is None:
            raise ValueError(f"{name} is None; pass an array of one value per sample.")
    arrays = {"confidence": np.asarray(confidence), "predicted": predicted, "truth": truth}
    arrays = {name: np.asarray(a) for name, a in arrays.items() if a is not None}
    for name, array in arrays.items():
        if array.ndim != 1:
            raise ValueError(f"{name} must be 1-D (n_samples,), got shape {array.shape}.")
    sizes = {name: array.shape[0] for name, array in arrays.items()}
    names = ", ".join(sizes)
    if len(set(sizes.values())) != 1:
        raise ValueError(f"{names} must have the same length, got lengths {sizes}.")
    if sizes["confidence"] == 0:
        raise ValueError(f"{names} are empty; pass at least one sample.")
    scores = check_confidence(arrays["confidence"])
    labels = {"predicted": None}
    for name in [name for name in arrays if name != "confidence"]:
        values = as_integer_labels(arrays[name], name)
        if (values < -1).any():
            raise ValueError(
                f"{name} has values below -1 (e.g. {int(values.min())}); use class indices "
                ">= 0, and -1 for an outlier."
            )
        labels[name] = values
    return scores, labels["predicted"], labels["truth"]


def check_pool_labels(y_all):
    """Validate a labelled pool: 1-D, non-empty, integer labels >= -1 (-1 = no class)."""
    labels = np.asarray(y_all)
    if labels.ndim != 1:
        raise ValueError(f"y_all must be 1-D (n_pool,), got shape {labels.shape}.")
    if labels.size == 0:
        raise ValueError("y_all is empty; pass one label per sample of the pool.")
    labels = as_integer_labels(labels, "y_all")
    if (labels < -1).any():
        raise ValueError(
            f"y_all has labels below -1 (e.g. {int(labels.min())}); class ids must be >= 0, "
            "and -1 marks a sample of no class."
        )
    return labels
