"""Validation of feature matrices: :func:`check_features`.

A feature matrix must be a dense, real, 2-D and non-empty array of finite
values whose rows float32 can hold (or that are rescaled into its range),
with no all-zero row where cosines are taken; it is returned as
C-contiguous float32.
"""

import numpy as np
import scipy.sparse as sp

from ._common import _MAX_SHOWN, NonNumericInputError, _refusal, _shown

#: Rows checked at a time, so that checking a million embeddings never
#: allocates an (n_samples, n_features) temporary.
_ROWS_PER_BLOCK = 65536
#: ``check_features(..., rescale_rows=True)`` leaves rows whose largest
#: magnitude is within ``[2**-_SAFE_EXPONENT, 2**_SAFE_EXPONENT]`` as they are.
_SAFE_EXPONENT = 40
#: ``check_features`` without ``rescale_rows`` refuses a row whose largest magnitude is below this:
#: float32's smallest normal number divided by 2**11, where its subnormals keep fewer than 12 bits.
_SMALLEST_FLOAT32_ROW = float(np.finfo(np.float32).tiny) * 2.0**-11


def check_features(X, *, name="X", cosine=True, rescale_rows=False, computing_method=None):
    """Validate a feature matrix and return it as C-contiguous float32.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
        Numeric features; float16/float64/integer input is converted.
    name : str, default="X"
        Argument name used in error messages.
    cosine : bool, default=True
        Reject all-zero rows, whose cosine similarity is undefined.
    rescale_rows : bool, default=False
        For callers that use only the rows' directions (cosine similarity,
        FastProp): scale every row whose largest magnitude is outside
        ``[2**-40, 2**40]`` by a power of two so that it lies in [0.5, 1).
        That is exact, changes no cosine, and keeps float32 sums of squares
        and products with the rows far from overflow and underflow (finite
        float32 rows as large as 1e38, or float64 rows as large as 1e300,
        would otherwise give inf or NaN). Rows inside the range, as every
        ordinary embedding is, are left as they are.
    computing_method : str or None, default=None
        For a method (named here) that computes on the features themselves,
        not their directions (a baseline's network): a row whose largest
        magnitude is above ``2**40``, where its products overflow, is
        refused, and so are features all below ``2**-40`` in magnitude,
        where float32 keeps few of their bits (a single small row, e.g. a
        centred sample at the mean, is fine).

    Returns
    -------
    ndarray of shape (n_samples, n_features), float32
        A converted copy, or ``X`` itself when it already is C-contiguous float32
        (and no row needed rescaling). It is never modified by fastprop.
    """
    if sp.issparse(X):
        raise ValueError(
            f"{name} is a sparse matrix; fastprop needs a dense array of embeddings. "
            f"Convert it with {name}.toarray() if it fits in memory."
        )
    if np.ma.is_masked(X):  # np.asarray would drop the mask and use the values under it
        raise ValueError(
            f"{name} is a masked array with {np.ma.count_masked(X)} masked value(s), which fastprop cannot "
            f"leave out; fill them ({name}.filled(value)) or drop their rows."
        )
    array = np.asarray(X)
    if array.dtype == object:
        try:
            array = array.astype(np.float64)
        except (TypeError, ValueError) as error:
            raise NonNumericInputError(
                f"{name} holds entries that are not numbers ({error}). Pass a numeric array such as "
                "float32 embeddings."
            ) from None
        except OverflowError:
            raise ValueError(
                f"{name} holds integers too large for float64 (beyond ~1.8e308). Scale {name} down, or "
                "pass it as floats."
            ) from None
    if array.dtype.kind in "US":  # as an object array of text above: the same error and the same start
        first = repr(array.flat[0].item()) if array.size else ""
        example = f" (e.g. {first if len(first) <= 40 else first[:30] + '...'})" if array.size else ""
        raise NonNumericInputError(
            f"{name} holds entries that are not numbers: text of dtype {array.dtype}{example}, where it must hold "
            f"real numbers. Pass a numeric array such as float32 embeddings (text that spells numbers converts "
            f"with {name}.astype(numpy.float32))."
        )
    if np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"Complex data not supported: {name} has dtype {array.dtype}; pass real numbers.")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise _refusal(array.dtype)(
            f"{name} must hold real numbers, got dtype {array.dtype}. "
            "Pass a numeric array such as float32 embeddings."
        )
    if array.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features), got shape {array.shape}. Reshape your data "
            f"either using {name}.reshape(-1, 1) if it has a single feature or {name}.reshape(1, -1) if "
            "it is a single sample."
        )
    for axis, what in ((0, "sample"), (1, "feature")):
        if array.shape[axis] == 0:
            raise ValueError(
                f"{name} is empty: 0 {what}(s) (shape={array.shape}) while a minimum of 1 is required."
            )
    if array.dtype.kind == "f" and array.dtype.itemsize > 8:
        array = _within_float64(array, name)
    largest = _largest_magnitudes(array, name)
    exponents = None
    if rescale_rows:
        outside = (largest > 0) & ((largest < 2.0**-_SAFE_EXPONENT) | (largest > 2.0**_SAFE_EXPONENT))
        if outside.any():
            exponents = np.where(outside, np.frexp(largest)[1], 0)
    elif array.dtype.itemsize > 4 and np.issubdtype(array.dtype, np.floating):
        # Past float32's largest value a row would be inf; below _SMALLEST_FLOAT32_ROW it keeps under 12 bits
        # (at 1e-300: all zero) and would be computed on as what it is not.
        for beyond, what, direction in (
            (largest > np.finfo(np.float32).max, "with a value that overflows float32", "down"),
            ((largest > 0) & (largest < _SMALLEST_FLOAT32_ROW),
             f"too small for float32 (below {_SMALLEST_FLOAT32_ROW:.3g} it keeps fewer than 12 bits)", "up"),
        ):
            if beyond.any():
                bad = np.flatnonzero(beyond)
                raise ValueError(
                    f"{name} has {bad.size} row(s) {what}, the first is row {bad[0]} (largest magnitude "
                    f"{float(largest[bad[0]]):.3g}). fastprop computes in float32: scale {name} {direction} first."
                )
    if computing_method is not None:
        huge = np.flatnonzero(largest > 2.0**_SAFE_EXPONENT)
        scale = float(largest.max())
        if huge.size or 0 < scale < 2.0**-_SAFE_EXPONENT:
            where = (f"{huge.size} row(s) with a magnitude above 2**{_SAFE_EXPONENT} (~1e12), the first is row "
                     f"{huge[0]} ({float(largest[huge[0]]):.3g})" if huge.size else
                     f"no magnitude above 2**-{_SAFE_EXPONENT} (~1e-12; its largest is {scale:.3g})")
            raise ValueError(
                f"{name} has {where}: {computing_method} computes on the features as they are, and at that scale "
                f"its products overflow or float32 keeps few of their bits. Scale {name} first, e.g. divide it by "
                f"its largest magnitude (FastProp and the graph-only methods use the rows' directions and take "
                f"them as they are)."
            )
    if exponents is None:
        features = np.ascontiguousarray(array, dtype=np.float32)
    else:
        features = np.empty(array.shape, dtype=np.float32)
        for start in range(0, array.shape[0], _ROWS_PER_BLOCK):
            stop = start + _ROWS_PER_BLOCK
            features[start:stop] = np.ldexp(np.asarray(array[start:stop], dtype=np.float64),
                                            -exponents[start:stop, None])
    if cosine:
        zero_rows = ~features.any(axis=1)
        if zero_rows.any():
            bad = np.flatnonzero(zero_rows)
            raise ValueError(
                f"{name} has {bad.size} all-zero row(s) (rows {_shown(bad)}"
                f"{', ...' if bad.size > _MAX_SHOWN else ''}); their cosine similarity is "
                "undefined. Remove them or give them a non-zero embedding."
            )
    return features


def _within_float64(array, name):
    """An extended-precision ``array`` as float64; raises where a finite row leaves float64's range.

    Such a row would read as infinite (values above ~1.8e308) or as all zero
    (every value below ~4.9e-324) after the conversion, and be reported as
    what it is not.
    """
    with np.errstate(over="ignore", under="ignore"):
        converted = array.astype(np.float64)
    finite = np.isfinite(array).all(axis=1)
    overflow = finite & ~np.isfinite(converted).all(axis=1)
    underflow = finite & array.any(axis=1) & ~converted.any(axis=1)
    beyond = overflow | underflow
    if beyond.any():
        bad = np.flatnonzero(beyond)
        raise ValueError(
            f"{name} ({array.dtype}) has {bad.size} row(s) with values beyond float64's range, the first is row "
            f"{bad[0]}; fastprop computes in float64 and float32. Scale those rows into float64's range first "
            "(only their directions matter)."
        )
    return converted


def _largest_magnitudes(array, name):
    """Each row's largest absolute value, in float64; raises on NaN or infinite values.

    Computed block by block from each row's minimum and maximum (NaN
    propagates into both), so no (n_samples, n_features) temporary is made.
    """
    largest = np.empty(array.shape[0])
    finite = np.empty(array.shape[0], dtype=bool)
    for start in range(0, array.shape[0], _ROWS_PER_BLOCK):
        block = array[start:start + _ROWS_PER_BLOCK]
        low = block.min(axis=1).astype(np.float64)
        high = block.max(axis=1).astype(np.float64)
        stop = start + block.shape[0]
        finite[start:stop] = np.isfinite(low) & np.isfinite(high)
        largest[start:stop] = np.maximum(np.abs(low), np.abs(high))
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise ValueError(
            f"{name} has {bad.size} row(s) with NaN or infinite values, the first is row "
            f"{bad[0]}. Remove or impute them before building the graph."
        )
    return largest
