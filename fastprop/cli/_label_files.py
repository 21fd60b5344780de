"""Labels of the command line: integers or class names, with a marker for "unlabeled".

The labels, one per sample, come from ``--labels`` (``.npy``, ``.npz`` with
array y, or text with one label per line), from the ``--label-column`` of a CSV
of features, or from array y of a ``.npz`` of features. ``--unlabeled MARKER``
(default ``-1``) marks an unlabeled sample; an empty line or field always does.

The labels are integers, as they always were, when the marker is an integer
and every other label is one; otherwise they are class names (strings), and
the marker is a string too, so that FastProp's outputs hold names and the
marker for outliers. Validation pairs (``--validation``) take labels of the
same kind.
"""

import csv
import warnings
from typing import NamedTuple

import numpy as np

from .._labels import check_labels, check_validation
from ._io import NUMPY_SUFFIXES, describe, load_array, read_lines, require_file
from ._numbers import looks_like_a_header, parse_integer, parse_real


class SeedLabels(NamedTuple):
    """Seed labels as :class:`fastprop.FastProp` takes them, checked.

    Attributes
    ----------
    y : ndarray of shape (n_samples,)
        int64 labels, or class names (str).
    unlabeled : int or str
        FastProp's ``unlabeled``: the marker in ``y``, and the label of outliers.
    classes : ndarray
        The sorted distinct labels other than the marker.
    encoded : ndarray of shape (n_samples,), int64
        Index into ``classes``, -1 for an unlabeled sample.
    """

    y: np.ndarray
    unlabeled: object
    classes: np.ndarray
    encoded: np.ndarray

    @property
    def n_seeds(self):
        """Number of labeled samples."""
        return int((self.encoded >= 0).sum())


def _is_integer_text(text):
    return parse_integer(text) is not None


def labels_from_texts(texts, marker, where="labels", lines=None):
    """``(y, unlabeled)`` of label texts (lines of a file, fields of a column); empty is unlabeled.

    With an integer marker (the default -1) the labels are integers when every
    one is, class names when none is a number; texts that mix integers with
    other labels, or numbers that are not integers (``1.0``, as
    ``numpy.savetxt`` writes labels), are refused at the first odd one, which
    is far more likely a mistake than a class. A marker that is not an
    integer reads every label as a name.

    Parameters
    ----------
    texts : list of str
    marker : str
        The text of ``--unlabeled``.
    where : str
        What holds the texts, for messages (e.g. ``"--labels y.txt"``).
    lines : sequence of int, optional
        The line number of each text; 1, 2, ... by default.

    Examples
    --------
    >>> y, unlabeled = labels_from_texts(["0", "", "2", "-1"], "-1")
    >>> y.tolist(), unlabeled
    ([0, -1, 2, -1], -1)
    >>> y, unlabeled = labels_from_texts(["cat", "", "dog"], "-1")
    >>> y.tolist(), unlabeled
    (['cat', '-1', 'dog'], '-1')
    """
    marker_value = parse_integer(marker)
    if marker_value is not None:
        lines = range(1, len(texts) + 1) if lines is None else lines
        labeled = [(line, text) for line, text in zip(lines, texts) if text not in ("", marker)]
        odd = [(line, text) for line, text in labeled if not _is_integer_text(text)]
        if not odd:
            values = [marker_value if text in ("", marker) else parse_integer(text) for text in texts]
            return np.array(values, dtype=np.int64), marker_value
        if len(odd) < len(labeled) or all(parse_real(text) is not None for _, text in odd):
            line, text = odd[0]
            raise ValueError(
                f"{where}, line {line}: {text!r} is not an integer label; write every label as an "
                "integer in plain digits (-?[0-9]+, e.g. numpy.savetxt(path, y, fmt='%d')) or every "
                "one as a class name (a marker that is not an integer, e.g. --unlabeled '', reads "
                "every label as a name)."
            )
    return np.array([marker if text == "" else text for text in texts], dtype=str), marker


def labels_from_array(array, marker, context):
    """``(y, unlabeled)`` of a stored array: names (an empty one is unlabeled) or numbers."""
    if array.dtype.kind in "SU":
        names = array.astype(str)
        return np.where(names == "", marker, names), marker
    marker_value = parse_integer(marker)
    if marker_value is None:
        raise ValueError(
            f"{context}holds numbers, but --unlabeled {marker!r} is not an integer; give the "
            "integer that marks an unlabeled sample (default -1)."
        )
    return array, marker_value


def seed_labels(y, unlabeled, n_samples, context):
    """Check ``y`` against ``n_samples`` (one clear message, prefixed by ``context``)."""
    try:
        with warnings.catch_warnings():  # no unlabeled sample: the error below says so for the command line
            warnings.filterwarnings("ignore", message="y has no sample marked unlabeled", category=UserWarning)
            classes, encoded = check_labels(y, n_samples, unlabeled)
    except ValueError as error:
        raise ValueError(f"{context}{error}") from None
    if not np.any(encoded < 0):
        raise ValueError(
            f"{context}no sample has the label {unlabeled!r} that --unlabeled says marks an unlabeled one, so "
            "every sample would be a seed and none is left to label; give --unlabeled the text or number "
            "your file uses for them (the default is -1; '' for empty lines)."
        )
    if classes.dtype.kind in "iu":
        y = np.asarray(y).astype(np.int64)
    return SeedLabels(y, unlabeled, classes, encoded)


def _drop_header(texts, n_samples, marker):
    """``texts`` without their header line if they have one, and the line number of the first label.

    The first line is a header ("label", or numpy.savetxt's "# label") when it
    starts with a letter (after "# ") and either the file has one line more
    than there are samples, or every other label is an integer (so that it
    cannot be one of them).
    """
    if not texts or not looks_like_a_header(texts[0]):
        return texts, 1
    rest = [text for text in texts[1:] if text not in ("", marker)]
    if len(texts) == n_samples + 1 or (rest and all(map(_is_integer_text, rest))):
        return texts[1:], 2
    return texts, 1


def _refuse_extra_blank_lines(lines, n_samples, where):
    """A ValueError when ``lines`` are more than the samples and end in blank lines (unlabeled samples, each).

    One line more is fine when line 1 is surely a header: a known header
    name (:data:`LABEL_COLUMN_NAMES`, ``# `` allowed), or no integer above
    integer labels. Otherwise a file of names ending in one blank line too
    many would lose its first label as a "header" and shift every other
    label by one.
    """
    blank_end = next((count for count, text in enumerate(reversed(lines)) if text), len(lines))
    if not blank_end or len(lines) <= n_samples:
        return
    labels = [text for text in lines[1:] if text]
    header = (lines[0].lower().removeprefix("# ").strip() in LABEL_COLUMN_NAMES
              or (parse_integer(lines[0]) is None and bool(labels) and all(map(_is_integer_text, labels))))
    if len(lines) == n_samples + 1 and header:
        return
    found = f"{where}: holds {len(lines)} lines for {n_samples} samples and ends with {blank_end} blank line(s)"
    if header:
        raise ValueError(f"{found} after its header line; remove {len(lines) - n_samples - 1} of the blank lines "
                         "at the end (each blank line is an unlabeled sample).")
    fix = f"remove {len(lines) - n_samples} of the blank lines at the end (each blank line is an unlabeled sample)"
    if len(lines) == n_samples + 1:
        raise ValueError(f"{found}: if line 1 is a header, name it 'label'; if it is a label, {fix}.")
    raise ValueError(f"{found}; {fix}, and if line 1 is a header, name it 'label'.")


def _label_texts(path, option):
    """The label on each line of a text file (one field per line, CSV quoting allowed)."""
    texts = []
    for number, row in enumerate(csv.reader(read_lines(path, option, " or give a .npy/.npz file")), start=1):
        if len(row) > 1:
            raise ValueError(
                f"{describe(option, path)}, line {number}: holds {len(row)} comma-separated fields; "
                "write one label per line (quote a name that holds a comma), or give labels in a "
                "column of a CSV of features with --features FILE.csv --label-column NAME."
            )
        texts.append(row[0].strip() if row else "")
    return texts


def load_labels(path, n_samples, marker, option="--labels"):
    """Seed labels from ``.npy``/``.npz`` (array y) or a text file with one label per line.

    Parameters
    ----------
    path : str or os.PathLike
    n_samples : int
    marker : str
        The text of ``--unlabeled``.
    option : str

    Returns
    -------
    SeedLabels
    """
    path = require_file(path, option)
    where = describe(option, path)
    if path.suffix.lower() in NUMPY_SUFFIXES:
        y, unlabeled = labels_from_array(load_array(path, "y", option), marker, f"{where}: ")
    else:
        lines = _label_texts(path, option)
        _refuse_extra_blank_lines(lines, n_samples, where)
        texts, first = _drop_header(lines, n_samples, marker)
        y, unlabeled = labels_from_texts(texts, marker, where, range(first, first + len(texts)))
    return seed_labels(y, unlabeled, n_samples, f"{where}: ")


def _validation_label(text, labels):
    """A validation label of the seeds' kind; the marker (or nothing) is a known outlier; None if no integer."""
    if text == "":
        return labels.unlabeled
    if isinstance(labels.unlabeled, str):
        return text
    return parse_integer(text)


#: Header names of a validation file's index column, and of its label column (lower case).
INDEX_COLUMN_NAMES = frozenset({"index", "idx", "id", "sample", "sample_index", "row"})
LABEL_COLUMN_NAMES = frozenset({"label", "class", "y", "truth", "target", "intent"})


def _index_column(header, where, line):
    """Which column of a validation file's ``header`` (on ``line``) holds the indices: 0 unless its names say 1."""
    names = [name.lower().removeprefix("# ").strip() for name in header]  # numpy.savetxt's header is a comment
    kinds = ["index" if name in INDEX_COLUMN_NAMES else "label" if name in LABEL_COLUMN_NAMES else None
             for name in names]
    if kinds[0] is not None and kinds[0] == kinds[1]:
        raise ValueError(f"{where}, line {line}: the header {','.join(header)!r} names two {kinds[0]} columns; "
                         "name one 'index' and the other 'label'.")
    return 1 if kinds[0] == "label" or kinds[1] == "index" else 0


def load_validation(path, labels, option="--validation"):
    """``(indices, labels)`` from a CSV of ``index,label`` lines (optional header).

    A header (the first line that is not blank, when it starts with a
    letter, after numpy.savetxt's "# ", and its second field is no integer)
    may name the columns in either order (``label,index``:
    :data:`INDEX_COLUMN_NAMES`, :data:`LABEL_COLUMN_NAMES`); without one, or with names neither knows,
    the index comes first. ``labels`` (:class:`SeedLabels`) are the seeds
    given to ``fit``; the pairs are checked against them: indices in range
    and unlabeled, labels among the classes or the marker (a known outlier;
    an empty label is one too).
    """
    path = require_file(path, option)
    where = describe(option, path)
    pairs = []
    index_column = 0
    first = True  # the first line that is not blank
    for number, row in enumerate(csv.reader(read_lines(path, option)), start=1):
        fields = [field.strip() for field in row]
        if not any(fields):
            continue
        header = first and len(fields) == 2 and looks_like_a_header(fields[0]) and parse_integer(fields[1]) is None
        first = False
        if header:
            index_column = _index_column(fields, where, number)  # e.g. "index,label" or "label,index"
            continue  # (a first line like "dog,5" is data in the wrong order, not a header: it is refused below)
        index, label = None, None
        if len(fields) == 2:
            index_text, label_text = fields[::-1] if index_column == 1 else fields
            index = parse_integer(index_text)
            label = None if index is None else _validation_label(label_text, labels)
        if label is None:
            kind = "a class name" if isinstance(labels.unlabeled, str) else "an integer label"
            order = "label,index" if index_column == 1 else "index,label"
            raise ValueError(
                f"{where}, line {number}: expected '{order}' with an index in plain digits "
                f"(-?[0-9]+) and {kind} like the seeds', got {','.join(fields)[:40]!r}."
            )
        pairs.append((index, label))
    if not pairs:
        raise ValueError(f"{where}: holds no 'index,label' line.")
    indices = np.array([index for index, _ in pairs], dtype=np.int64)
    truth = np.array([label for _, label in pairs], dtype=str if isinstance(labels.unlabeled, str) else np.int64)
    try:
        check_validation((indices, truth), labels.y.size, labels.encoded >= 0, labels.classes, labels.unlabeled)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    return indices, truth
