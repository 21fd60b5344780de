"""Labels as users have them: integers or class names, with a marker for "unlabeled".

Every estimator encodes ``y`` once into class indices (``-1`` unlabeled) with
:func:`check_labels`, works on those, and decodes its outputs with
:func:`decode_labels`, where the same marker stands for an outlier. Integer
labels keep their historical rules (the marker is -1, classes are >= 0);
class names may be strings or any sortable objects of one kind.
"""

import numbers
import warnings

import numpy as np

from ._estimator_protocol import rebuilt_with_twin, with_scikit_learn_twin
from ._validation import as_integer_labels, fits_int64
from ._validation._common import _MAX_SHOWN


class DataConversionWarning(UserWarning):
    """Labels arrived in a shape that was converted (as scikit-learn's warning of the same name).

    When scikit-learn is loaded, the warning is also its ``DataConversionWarning``, so that its filters apply.
    """

    def __reduce__(self):  # the twin class is made at run time: pickled as this one, rebuilt as the receiver's
        return rebuilt_with_twin, (DataConversionWarning, self.args)


#: Why a y of names with unlabeled=None can hold the class "nan".
NAN_AS_TEXT = ("Its class 'nan' may be a missing label: NumPy turns a NaN in a list of strings into the text 'nan'; "
               "pass numpy.array(y, dtype=object) (or a pandas Series) to keep it a NaN. ")
#: The default marker of an unlabeled sample in ``y`` (and of an outlier in the outputs).
UNLABELED = -1
#: ``FastProp.score`` warns when at least this share of its ``y`` is the unlabeled marker: so many
#: known outliers are rare, a semi-supervised ``y`` in scikit-learn's model selection is not (~99%).
MARKED_SHARE_WARNING = 0.9


def _shown_values(values):
    values = list(values[:_MAX_SHOWN])
    return ", ".join(repr(value.item() if isinstance(value, np.generic) else value) for value in values)


def _distinct(values):
    """The distinct values, in order of first appearance (any kind of label)."""
    return list(dict.fromkeys(values.tolist()))


def _is_name_array(labels):
    return labels.dtype.kind in "UO"


def _refuse_trailing_nul(names, name):
    """Refuse strings of an object array that end in NUL: NumPy's str dtype drops trailing NULs."""
    if names.dtype.kind == "O" and any(isinstance(value, str) and value.endswith("\0") for value in names):
        raise ValueError(
            f"class names in {name} end in a NUL character ('\\0'), which NumPy's strings drop (so 'a' "
            "and 'a\\0' would be one class); remove them."
        )


def check_unlabeled(unlabeled):
    """Validate the ``unlabeled`` marker: an int, a string or None."""
    if isinstance(unlabeled, (bool, np.bool_)) or not (
        unlabeled is None or isinstance(unlabeled, (numbers.Integral, str))
    ):
        raise ValueError(
            f"unlabeled must be an int (default -1), a string or None, got {unlabeled!r}."
        )
    if isinstance(unlabeled, numbers.Integral) and not fits_int64(unlabeled):
        raise ValueError(
            f"unlabeled={unlabeled!r} is outside int64 ([-2**63, 2**63 - 1]), the labels' type; use a small "
            "integer such as -1."
        )
    return unlabeled


def _is_missing(value):
    """None, a NaN, or pandas' ``NA`` (known by its type's name: fastprop does not import pandas)."""
    if value is None or type(value).__name__ == "NAType":
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) and value != value


def _marker_mask(labels, unlabeled):
    """Where ``labels`` (a str or object array) holds the marker.

    With an integer marker its decimal string counts too, since
    ``numpy.asarray(["cat", -1])`` turns -1 into "-1". The marker None
    is a missing label: None, a NaN or pandas' ``NA`` (pandas 3 stores a
    None of a column of names as NaN).
    """
    if labels.dtype.kind == "U":
        if unlabeled is None:
            return np.zeros(labels.shape, dtype=bool)
        return labels == str(unlabeled)
    if unlabeled is None:
        return np.fromiter((_is_missing(value) for value in labels), dtype=bool, count=labels.size)
    text = str(unlabeled)
    return np.fromiter(
        (isinstance(value, (str, numbers.Integral)) and not isinstance(value, (bool, np.bool_))
         and (value == unlabeled or value == text) for value in labels),
        dtype=bool, count=labels.size,
    )


def check_labels(y, n_samples, unlabeled=UNLABELED, stacklevel=1):
    """Validate semi-supervised labels; ``unlabeled`` (default -1) marks an unlabeled sample.

    Parameters
    ----------
    y : array_like of shape (n_samples,)
        Integer labels, or class names (strings, or objects of one sortable kind).
    n_samples : int
    unlabeled : int, str or None
        The marker of an unlabeled sample.
    stacklevel : int, default=1
        Where the warnings point: 1 is the caller, 2 its caller, and so on
        (the user's line, past ``fit`` and its wrapper).

    Returns
    -------
    classes : ndarray
        The sorted distinct labels other than the marker: int64 for integer
        labels, the names' dtype otherwise.
    encoded : ndarray of shape (n_samples,), int64
        Index into ``classes`` for labeled samples, -1 for unlabeled ones.
    """
    unlabeled = check_unlabeled(unlabeled)
    if y is None:
        raise ValueError(
            f"fit requires y to be passed, but the target y is None; pass one label per sample "
            f"({unlabeled!r} for unlabeled samples)."
        )
    labels = np.asarray(y)
    if labels.ndim == 2 and labels.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected; it is used as y.ravel(). "
            "Pass a 1-D array of labels to silence this warning.",
            with_scikit_learn_twin(DataConversionWarning), stacklevel=stacklevel + 1,
        )
        labels = labels.ravel()
    if labels.ndim != 1:
        raise ValueError(f"y must be 1-D (n_samples,), got shape {labels.shape}.")
    if labels.shape[0] != n_samples:
        raise ValueError(
            f"y has {labels.shape[0]} labels but X has {n_samples} samples; "
            f"pass one label per sample ({unlabeled!r} for unlabeled)."
        )
    if labels.dtype.kind == "S":
        labels = labels.astype(str)
    if _is_name_array(labels):
        labeled = ~_marker_mask(labels, unlabeled)
        named = labels[labeled]
        if labels.dtype.kind == "O":
            if all(isinstance(value, str) for value in named):
                _refuse_trailing_nul(named, "y")
                named = named.astype(str)
            elif all(isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
                     for value in named):
                named = as_integer_labels(named, "y")
            else:
                missing = any(_is_missing(value) for value in named)  # NaN or pandas' NA
                hint = (f" A NaN or NA is a label here, not a missing one: pass unlabeled=None, which marks "
                        f"missing labels, or fill them with the marker first (with pandas, "
                        f"y.fillna({unlabeled!r}))." if missing else "")
                raise ValueError(
                    "y mixes labels of different kinds (e.g. strings and numbers) or holds labels "
                    f"that are neither integers nor strings ({_shown_values(named)}); use integers, "
                    f"or strings with unlabeled={unlabeled!r} marking the unlabeled samples.{hint}"
                )
    else:
        if not isinstance(unlabeled, numbers.Integral):
            nan = (" Its NaN are missing labels: fill them with the marker (with pandas, y.fillna(-1)) and keep "
                   "the default unlabeled=-1." if labels.dtype.kind == "f" and np.isnan(labels).any() else "")
            raise ValueError(
                f"y holds numbers but unlabeled={unlabeled!r} is not one; use an integer marker "
                f"(default -1) with integer labels.{nan}"
            )
        if labels.dtype.kind == "f" and not (np.isfinite(labels).all() and np.array_equal(labels, np.round(labels))):
            nan = " (NaN: fill missing labels with the marker first, with pandas y.fillna(-1))" if np.isnan(
                labels).any() else ""
            raise ValueError(
                f"Unknown label type: y holds non-integral numbers{nan}, which are not class labels; "
                "pass integers or class names (strings), with -1 (or the unlabeled marker) for "
                "unlabeled samples."
            )
        if labels.dtype.kind == "u" and unlabeled < 0:
            wrapped = np.iinfo(labels.dtype).max + unlabeled + 1  # the marker stored in an unsigned dtype
            if np.any(labels == wrapped):  # no sample of an unsigned y can carry a negative marker
                raise ValueError(
                    f"y is {labels.dtype} and holds {wrapped}, which is what {unlabeled} becomes in "
                    f"{labels.dtype}: store the labels in a signed dtype (y.astype(np.int64)) so that "
                    f"{unlabeled} marks the unlabeled samples."
                )
        labels = as_integer_labels(labels, "y")
        labeled = labels != unlabeled
        named = labels[labeled]
        if unlabeled == UNLABELED and (named < 0).any():
            raise ValueError(
                f"y has negative labels other than -1 ({_shown_values(np.unique(named[named < 0]))}); "
                "-1 is the only marker for unlabeled samples, class labels must be >= 0."
            )
    if not labeled.any():
        raise ValueError(
            f"y has no labeled sample (all labels are {unlabeled!r}); give at least one seed label."
        )
    classes, encoded_labeled = np.unique(named, return_inverse=True)
    if labeled.all():
        marker_is_a_class = unlabeled != UNLABELED and any(str(name) == "-1" for name in classes.tolist())
        nan_as_text = unlabeled is None and "nan" in classes.tolist()
        warnings.warn(
            f"y has no sample marked unlabeled={unlabeled!r}"
            f"{' but holds -1, which is a class label here' if marker_is_a_class else ''}: every sample is a "
            "seed and nothing is propagated. "
            f"{'Pass unlabeled=-1 if -1 marks the unlabeled samples. ' if marker_is_a_class else ''}"
            f"{NAN_AS_TEXT if nan_as_text else ''}"
            "(A scikit-learn meta-estimator that encodes y, such as VotingClassifier, BaggingClassifier, "
            "OneVsRestClassifier or cross_val_predict(method='predict_proba'), makes the marker a class; "
            "FastProp and the baselines of fastprop.baselines take the marker as unlabeled=..., -1 by default.)",
            UserWarning, stacklevel=stacklevel + 1,
        )
    encoded = np.full(n_samples, -1, dtype=np.int64)
    encoded[labeled] = encoded_labeled.ravel()
    if classes.dtype.kind in "iu":
        classes = classes.astype(np.int64)
    return classes, encoded


def _same_kind(value, classes):
    """Whether ``value`` is a label of the kind of ``classes``: a string for names, an integer (no bool) else."""
    if classes.dtype.kind in "iu":
        return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
    return isinstance(value, str)


def encode_known(labels, classes, unlabeled=UNLABELED, *, name, unknown_is_wrong=False):
    """Class indices of known labels in the user's space; the marker (a known outlier) gives -1.

    Raises a ValueError naming the labels that are not classes of ``y``;
    with ``unknown_is_wrong`` such labels give -2 instead (a point no
    prediction can get right, as in ``sklearn.metrics.accuracy_score``),
    unless they are of another kind than the classes (text, None, NaN or a
    fraction for integer classes, anything but text for names), which is
    still an error.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {labels.shape}.")
    if labels.dtype.kind == "S":
        labels = labels.astype(str)
    if _is_name_array(labels):
        _refuse_trailing_nul(labels, name)
        outlier = _marker_mask(labels, unlabeled)
    else:
        labels = as_integer_labels(labels, name)
        outlier = labels == unlabeled if isinstance(unlabeled, numbers.Integral) else np.zeros(labels.shape, bool)
    lookup = {value: index for index, value in enumerate(classes.tolist())}
    encoded = np.array([-1 if is_outlier else lookup.get(value, -2)
                        for value, is_outlier in zip(labels.tolist(), outlier.tolist())], dtype=np.int64)
    unknown = encoded == -2
    if unknown_is_wrong and all(_same_kind(value, classes) for value in labels[unknown].tolist()):
        return encoded
    if unknown.any():
        text_for_numbers = (classes.dtype.kind in "iu" and labels.dtype.kind == "U"
                            and any(value.lstrip("-").isascii() and value.lstrip("-").isdigit()
                                    for value in labels[unknown].tolist()))
        hint = (" They are text while the classes are integers: NumPy turns a list that mixes strings and "
                "integers into strings; pass numpy.array(labels, dtype=object)." if text_for_numbers else "")
        raise ValueError(
            f"{name} {_shown_values(_distinct(labels[unknown]))} are not among the classes of the fit's y "
            f"({_shown_values(classes)}{', ...' if classes.size > _MAX_SHOWN else ''}); use "
            f"{unlabeled!r} for samples of no known class.{hint}"
        )
    return encoded


def warn_if_mostly_marked(truth, unlabeled, stacklevel):
    """Warn when :data:`MARKED_SHARE_WARNING` of a scored ``truth`` (:func:`encode_known`) is the marker.

    ``stacklevel`` as the caller's own ``warnings.warn`` would take it.
    """
    if truth.size and np.mean(truth == -1) >= MARKED_SHARE_WARNING:
        warnings.warn(
            f"score: {np.mean(truth == -1):.0%} of y is the unlabeled marker {unlabeled!r}, "
            "and score counts each such point as a known outlier, right when rejected. If they are "
            "unlabeled samples (a semi-supervised y, e.g. in GridSearchCV or cross_val_score), the score "
            "rewards rejecting: score on points of known truth only, e.g. with test folds of seeds only "
            "(README, Model selection).", UserWarning, stacklevel=stacklevel + 1)


def decode_labels(classes, encoded, unlabeled=UNLABELED):
    """The user's labels of class indices ``encoded``; -1 (an outlier) becomes ``unlabeled``.

    Integer classes with an integer marker give int64; names give their
    string dtype when the marker is a string too, an object array otherwise.
    """
    encoded = np.asarray(encoded)
    outlier = encoded < 0
    picked = classes[np.where(outlier, 0, encoded)] if classes.size else np.empty(encoded.shape, classes.dtype)
    if classes.dtype.kind in "iu" and isinstance(unlabeled, numbers.Integral):
        return np.where(outlier, unlabeled, picked).astype(np.int64)
    if classes.dtype.kind == "U" and isinstance(unlabeled, str):
        return np.where(outlier, np.array(unlabeled), picked)
    decoded = picked.astype(object)
    decoded[outlier] = unlabeled
    return decoded


def check_validation(validation, n_samples, labeled_mask, classes, unlabeled=UNLABELED):
    """Validate a ``(indices, labels)`` pair of samples with known truth.

    Labels are in the user's label space; the ``unlabeled`` marker (default
    -1) means a known outlier.

    Returns
    -------
    indices : ndarray of int64
    encoded : ndarray of int64
        Index into ``classes``, or -1 for a known outlier.
    """
    try:
        indices, labels = validation
    except (TypeError, ValueError):
        raise ValueError(
            "validation must be a pair (indices, labels) of equal-length 1-D arrays, "
            f"got {type(validation).__name__}."
        ) from None
    indices = np.asarray(indices)
    labels = np.asarray(labels)
    if indices.ndim != 1 or labels.ndim != 1 or indices.shape != labels.shape:
        raise ValueError(
            "validation must be (indices, labels) of equal-length 1-D arrays, got shapes "
            f"{indices.shape} and {labels.shape}."
        )
    if indices.size == 0:
        raise ValueError("validation is empty; pass at least one (index, label) pair or None.")
    indices = _unlabeled_indices(indices, n_samples, labeled_mask, "validation indices",
                                 f"set y[i] = {unlabeled!r} or drop them from validation")
    return indices, encode_known(labels, classes, unlabeled, name="validation labels")


_SPLITTER_HINT = (" They index the samples of the X given to fit: a scikit-learn splitter or search passes them to "
                  "every fold as they are (README, Model selection).")


def _unlabeled_indices(indices, n_samples, labeled_mask, name, hint):
    """``indices`` as int64: integers in range, distinct, none of them a seed (``hint`` says what to do)."""
    if indices.dtype == np.bool_:
        raise ValueError(
            f"{name} must be sample indices, got a boolean mask; pass numpy.flatnonzero(mask) instead."
        )
    integral_floats = (np.issubdtype(indices.dtype, np.floating) and np.isfinite(indices).all()
                       and np.array_equal(indices, np.round(indices)))
    if not (np.issubdtype(indices.dtype, np.integer) or integral_floats):
        raise ValueError(
            f"{name} must be integer sample indices in [0, {n_samples - 1}], got dtype {indices.dtype}"
            f"{' with non-integral values' if np.issubdtype(indices.dtype, np.floating) else ''}."
        )
    indices = as_integer_labels(indices, name)
    out_of_range = (indices < 0) | (indices >= n_samples)
    if out_of_range.any():
        raise ValueError(f"{name} must be in [0, {n_samples - 1}]; got {_shown_values(indices[out_of_range])}."
                         f"{_SPLITTER_HINT}")
    if np.unique(indices).size != indices.size:
        raise ValueError(f"{name} must be distinct; some index appears twice.")
    seeds = labeled_mask[indices]
    if seeds.any():
        raise ValueError(f"{name} {_shown_values(indices[seeds])} are labeled seeds; {hint}.{_SPLITTER_HINT}")
    return indices


def check_known_outliers(outliers, n_samples, labeled_mask, validation):
    """Validate the indices of samples known to belong to no class; sorted int64 (empty for None)."""
    if outliers is None:
        return np.empty(0, dtype=np.int64)
    indices = np.asarray(outliers)
    if indices.ndim != 1:
        raise ValueError(f"outliers must be a 1-D array of sample indices, got shape {indices.shape}.")
    indices = _unlabeled_indices(indices, n_samples, labeled_mask, "outliers", "a known outlier is unlabeled in y")
    if validation is not None:
        both = np.intersect1d(indices, validation[0])
        if both.size:
            raise ValueError(
                f"outliers {_shown_values(both)} are also validation samples; give each known sample once "
                "(as an outlier to learn from, or in validation to choose the threshold)."
            )
    return np.sort(indices)
