"""Files of the command line: checking paths, reading features, writing results.

Every reader raises ``ValueError`` with a message that names the option and
the file; arrays are read by :mod:`fastprop._files` (nothing unpickled, sizes
checked before anything is allocated), CSV tables by :mod:`._tables`, labels
by :mod:`._label_files`. Every writer goes through
:func:`fastprop._files.write_atomically`: a hidden temporary file in the
target's directory, renamed over the target only once it is complete.
"""

import csv
import io
import os
from pathlib import Path

import numpy as np

from .._files import NpzArchive, output_target, read_npy, write_atomically
from .._validation import check_features
from ._tables import read_feature_table

NUMPY_SUFFIXES = (".npy", ".npz")


def describe(option, path):
    """``--option path``, the way every message names a file."""
    return f"{option} {os.fspath(path)}"


def require_file(path, option):
    """Fail with a clear message unless ``path`` is an existing regular file."""
    path = Path(path)
    try:
        exists, regular = path.exists(), path.is_file()
    except OSError as error:  # e.g. a name too long for the file system
        raise ValueError(f"{describe(option, path)}: {error.strerror or error}.") from None
    if not exists:
        raise ValueError(f"{describe(option, path)}: no such file.")
    if not regular:
        raise ValueError(f"{describe(option, path)}: not a regular file.")
    return path


def check_output(path, option, inputs=()):
    """Check, before any work, that ``path`` can be written and is none of ``inputs``."""
    try:
        directory = output_target(path).parent  # the text as given: Path() would drop a trailing "/"
    except ValueError as error:
        raise ValueError(f"{describe(option, path)}: {error}") from None
    path = Path(path)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"{describe(option, path)}: directory {str(directory)!r} is not writable.")
    for other_option, other in inputs:
        if other is not None and path.exists() and Path(other).exists() and path.samefile(other):
            raise ValueError(
                f"{describe(option, path)}: is the {other_option} input; write the result elsewhere."
            )
    return path


def about_file(option, path, error):
    """``error`` (about the file at ``path``) prefixed by the option, the path named once."""
    text = str(error)
    if text.startswith(describe(option, path)):  # already named the way every message names a file
        return ValueError(text)
    if text.startswith(os.fspath(path)):  # the file readers' messages begin with the path
        return ValueError(f"{option} {text}")
    return ValueError(f"{describe(option, path)}: {text}")


def read_lines(path, option, alternative=""):
    r"""The lines of a UTF-8 text file (a byte-order mark is dropped); ``alternative``: what else the option reads.

    Lines end at ``\n``, ``\r\n`` or ``\r`` only: a form feed or another
    Unicode line separator inside a label stays in it (``str.splitlines``
    would split there and shift every later line).
    """
    try:
        with open(path, encoding="utf-8-sig", newline=None) as stream:  # "\r\n" and "\r" read as "\n"
            text = stream.read()
    except UnicodeDecodeError:
        raise ValueError(
            f"{describe(option, path)}: not a text file (it is not UTF-8); save it as UTF-8 text{alternative}."
        ) from None
    lines = text.split("\n")
    if lines[-1] == "":  # the end of the last line, or an empty file
        lines.pop()
    return lines


def load_array(path, name, option):
    """Array ``name`` of an ``.npz``, or the array of an ``.npy``, read defensively (:mod:`fastprop._files`)."""
    try:
        if path.suffix.lower() == ".npy":
            return read_npy(path)
        with NpzArchive(path) as archive:
            if name not in archive.names:
                raise ValueError(f"has no array {name!r} (it holds {archive.names!r}).")
            return archive.read(name)
    except ValueError as error:
        raise about_file(option, path, error) from None


def _read_npz_features(path):
    """``(X, y or None)`` of an ``.npz`` archive: array X, and y when it is there."""
    with NpzArchive(path) as archive:
        if "X" not in archive.names:
            raise ValueError(
                f"has no array 'X' (it holds {archive.names!r}); save the embeddings as "
                "numpy.savez(path, X=X, y=y)."
            )
        return archive.read("X"), archive.read("y") if "y" in archive.names else None


def load_features(path, option="--features", label_column=None):
    """Embeddings, and the labels stored with them, from ``.npy``, ``.npz`` or ``.csv``.

    Parameters
    ----------
    path : str or os.PathLike
        ``.npy`` (X), ``.npz`` (array X, optional array y) or ``.csv`` (one
        sample per line, numeric feature columns; see :mod:`._tables`).
    option : str
        The option that named the file, for messages.
    label_column : str or None
        For a ``.csv``: the column that holds the labels, not features.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float32
        Checked like every fastprop input (finite, no all-zero row).
    labels : ndarray, LabelColumn or None
        Array y of an ``.npz``, the ``label_column`` of a ``.csv``, or None.
    """
    path = require_file(path, option)
    suffix = path.suffix.lower()
    if label_column is not None and suffix != ".csv":
        raise ValueError(
            f"--label-column {label_column!r}: {describe(option, path)} is not a .csv file; a labels "
            "column is read from a CSV of features (give .npy/.npz labels with --labels)."
        )
    try:
        if suffix == ".npy":
            X, labels = read_npy(path), None
        elif suffix == ".npz":
            X, labels = _read_npz_features(path)
        elif suffix == ".csv":
            X, labels = read_feature_table(read_lines(path, option, " or give a .npy/.npz file"), label_column)
        else:
            raise ValueError(
                f"unknown suffix {path.suffix!r}; give .npy (X), .npz (arrays X and optional y) or "
                ".csv (a feature column per number, optionally a labels column)."
            )
        # graph and propagate read only the rows' directions: rows far from 1 in scale are rescaled, not lost
        return check_features(X, name="X", rescale_rows=True), labels
    except ValueError as error:
        raise about_file(option, path, error) from None


def result_writers(model, out=None, csv_path=None):
    """``(path, write)`` pairs of a FastProp result: ``.npz`` arrays and a CSV table.

    Labels are written as ``model.transduction_`` holds them: integers, or
    class names; an outlier carries ``model.unlabeled``.
    """
    outputs = []
    labels = np.asarray(model.transduction_)
    if out is not None:
        def write_npz(stream):
            np.savez(
                stream,
                labels=labels,
                confidence=np.asarray(model.confidence_),
                label_distributions=np.asarray(model.label_distributions_),
                classes=np.asarray(model.classes_),
                outlier_threshold=np.float64(model.outlier_threshold_),
            )
        outputs.append((out, write_npz))
    if csv_path is not None:
        def write_csv(stream):
            text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
            writer = csv.writer(text, lineterminator="\n")
            writer.writerow(["index", "label", "confidence", "is_outlier"])
            confidence = np.asarray(model.confidence_, dtype=np.float64)
            outlier = labels == model.unlabeled
            writer.writerows(
                (index, label, repr(score), int(rejected))
                for index, (label, score, rejected) in enumerate(
                    zip(labels.tolist(), confidence.tolist(), outlier.tolist())
                )
            )
            text.flush()
            text.detach()
        outputs.append((csv_path, write_csv))
    return outputs


def write_text(path, text):
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_atomically([(path, lambda stream: stream.write(text.encode("utf-8")))])
