"""Files of the command line: reading features, labels and validation pairs, writing results.

Every reader raises ``ValueError`` with a message that names the option and
the file; arrays are read by :mod:`fastprop._files` (nothing unpickled, sizes
checked before anything is allocated). Every writer goes through
:func:`fastprop._files.write_atomically`: a hidden temporary file in the
target's directory, renamed over the target only once it is complete.
"""

import csv
import io
import os
from pathlib import Path

import numpy as np

from .._files import NpzArchive, read_npy, write_atomically
from .._labels import check_labels, check_validation
from ._numbers import looks_like_a_header, parse_integer
from ..evaluation.datasets import load_embeddings

_NUMPY_SUFFIXES = (".npy", ".npz")


def _describe(option, path):
    return f"{option} {os.fspath(path)}"


def require_file(path, option):
    """Fail with a clear message unless ``path`` is an existing regular file."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{_describe(option, path)}: no such file.")
    if not path.is_file():
        raise ValueError(f"{_describe(option, path)}: not a regular file.")
    return path


def check_output(path, option, inputs=()):
    """Check, before any work, that ``path`` can be written and is none of ``inputs``."""
    path = Path(path)
    directory = path.parent
    if path.is_dir():
        raise ValueError(f"{_describe(option, path)}: is a directory; give a file name.")
    if not directory.is_dir():
        raise ValueError(f"{_describe(option, path)}: directory {str(directory)!r} does not exist.")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"{_describe(option, path)}: directory {str(directory)!r} is not writable.")
    for other_option, other in inputs:
        if other is not None and path.exists() and Path(other).exists() and path.samefile(other):
            raise ValueError(
                f"{_describe(option, path)}: is the {other_option} input; write the result elsewhere."
            )
    return path


def load_features(path, option="--features"):
    """``(X, y or None)`` from an ``.npy`` (X) or ``.npz`` (X and optional y) file."""
    require_file(path, option)
    try:
        return load_embeddings(path)
    except ValueError as error:
        raise _about_file(option, path, error) from None


def _load_array(path, name, option):
    """Array ``name`` of an ``.npz``, or the array of an ``.npy``, read defensively (:mod:`fastprop._files`)."""
    try:
        if path.suffix.lower() == ".npy":
            return read_npy(path)
        with NpzArchive(path) as archive:
            return archive.read(name)
    except ValueError as error:
        raise _about_file(option, path, error) from None


def _about_file(option, path, error):
    """``error`` (about the file at ``path``) prefixed by the option, the path named once."""
    text = str(error)
    if text.startswith(os.fspath(path)):  # the file readers' messages begin with the path
        return ValueError(f"{option} {text}")
    return ValueError(f"{_describe(option, path)}: {text}")


def _read_lines(path, option):
    try:
        with open(path, encoding="utf-8-sig") as stream:
            return stream.read().splitlines()
    except UnicodeDecodeError:
        raise ValueError(
            f"{_describe(option, path)}: not a text file (it is not UTF-8); give .npy/.npz labels "
            "or a text file with one label per line."
        ) from None


def _read_label_text(path, option):
    lines = _read_lines(path, option)
    # An optional header: a first line that starts with a letter ("label").
    first = 1
    if lines and looks_like_a_header(lines[0]) and "," not in lines[0]:
        lines, first = lines[1:], 2
    labels = np.empty(len(lines), dtype=np.int64)
    for number, line in enumerate(lines, start=first):
        text = line.strip()
        value = -1 if text == "" else parse_integer(text)
        if value is None:
            raise ValueError(
                f"{_describe(option, path)}, line {number}: {text[:40]!r} is not an integer label; "
                "write one integer label per line in plain digits (-?[0-9]+, no underscores), -1 or an "
                "empty line for an unlabeled sample."
            )
        labels[number - first] = value
    return labels


def load_labels(path, n_samples, option="--labels"):
    """Labels (-1 = unlabeled) from ``.npy``/``.npz`` (array ``y``) or a text file, one per line.

    Returns the labels as int64, checked against ``n_samples``.
    """
    path = require_file(path, option)
    if path.suffix.lower() in _NUMPY_SUFFIXES:
        labels = _load_array(path, "y", option)
    else:
        labels = _read_label_text(path, option)
    return check_label_array(labels, n_samples, f"{_describe(option, path)}: ")


def check_label_array(labels, n_samples, context=""):
    """Validate labels against ``n_samples`` (one clear message, prefixed by ``context``)."""
    try:
        check_labels(labels, n_samples)
    except ValueError as error:
        raise ValueError(f"{context}{error}") from None
    return np.asarray(labels).astype(np.int64)


def load_validation(path, labels, option="--validation"):
    """``(indices, labels)`` from a CSV of ``index,label`` lines (optional header).

    ``labels`` are the seed labels given to ``fit``; the pairs are checked
    against them (indices in range and unlabeled, labels among the classes or -1).
    """
    path = require_file(path, option)
    lines = _read_lines(path, option)
    pairs = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(",")]
        values = [parse_integer(field) for field in fields]
        if len(fields) == 2 and None not in values:
            pairs.append(values)
        elif number == 1 and len(fields) == 2 and all(map(looks_like_a_header, fields)):
            continue  # header, e.g. "index,label"
        else:
            raise ValueError(
                f"{_describe(option, path)}, line {number}: expected 'index,label' with two "
                f"integers in plain digits (-?[0-9]+), got {line.strip()[:40]!r}."
            )
    if not pairs:
        raise ValueError(f"{_describe(option, path)}: holds no 'index,label' line.")
    indices, truth = np.array(pairs, dtype=np.int64).T
    classes, encoded = check_labels(labels, labels.size)
    try:
        check_validation((indices, truth), labels.size, encoded >= 0, classes)
    except ValueError as error:
        raise ValueError(f"{_describe(option, path)}: {error}") from None
    return indices, truth


def result_writers(model, out=None, csv_path=None):
    """``(path, write)`` pairs of a FastProp result: ``.npz`` arrays and a CSV table."""
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
            writer.writerows(
                (index, int(label), repr(float(score)), int(label == -1))
                for index, (label, score) in enumerate(zip(labels.tolist(), confidence.tolist()))
            )
            text.flush()
            text.detach()
        outputs.append((csv_path, write_csv))
    return outputs


def write_text(path, text):
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_atomically([(path, lambda stream: stream.write(text.encode("utf-8")))])
