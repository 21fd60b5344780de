"""Features in a CSV table: one sample per line, a column per feature, optionally a labels column.

The first line is a header when it starts with ``# `` (numpy.savetxt's
``header=``), names the labels column among names, starts with an unnamed
index column (pandas', R's: then refused, saying how to save without it),
numbers four or more columns ``0,1,2,...`` (pandas' header of an unnamed
frame), or holds no number and a name above a number of the second line (any
name when no second line of its width follows); a missing value (``nan``,
``NA``) or a malformed number (``1_0``) is no name. Fewer numbered columns, or
columns numbered from 1, or increasing integers above fractions, are refused
as ambiguous, as are blank lines between rows (a missing sample of a
one-column table). A labels
column (``--label-column NAME``) is found by its name, so it needs a header;
every other column must hold numbers. A feature column that is a row index
(the first feature column holding ``0..n-1`` or ``1..n`` in any order, or one
named ``index`` / ``level_0`` holding integers) is refused from 10 rows up.
Messages name the line and the column; the caller prefixes the option and the
file.
"""

import csv
import re
from typing import NamedTuple

import numpy as np

from ._numbers import parse_real

_SHOWN_COLUMNS = 8
#: pandas' name for an unnamed column it read back (a saved index, saved again).
_PANDAS_UNNAMED = re.compile(r"Unnamed: [0-9]+")
#: Values separated by tabs or spaces in what was read as one comma-separated field.
_OTHER_SEPARATOR = re.compile(r"\S\s+\S")
_SEPARATOR_HINT = ("the fields seem separated by something other than commas: save the table with commas, "
                   "e.g. numpy.savetxt(path, X, delimiter=',') or pandas' to_csv(path)")
#: From this many rows up, a first feature column numbering the rows is refused as an index
#: (:func:`_refuse_a_row_index`): below, a short column of small counts could number them by chance.
MIN_INDEX_ROWS = 10
#: The names pandas' ``reset_index()`` gives a frame's index column (:func:`_refuse_a_row_index`).
INDEX_NAMES = ("index", "level_0")


class LabelColumn(NamedTuple):
    """The labels column of a table: its name, the stripped text of each row and its line number."""

    name: str
    texts: list
    lines: list


def _rows(lines):
    """``(line number, stripped fields)`` of every line; blank lines at the start and the end are left out.

    A blank line between two others is refused: in a table of one column it
    is a sample whose value is missing, and skipping it would shift every
    later row (a labels file then pairs its labels with the wrong samples).
    """
    rows = [(number, [field.strip() for field in row]) for number, row in enumerate(csv.reader(lines), start=1)]
    filled = [position for position, (_, fields) in enumerate(rows) if fields]
    if not filled:
        return []
    rows = rows[filled[0]:filled[-1] + 1]
    blank = next((number for number, fields in rows if not fields), None)
    if blank is not None:
        raise ValueError(
            f"line {blank} is blank between lines of data; remove it, or write its values (nan for a missing "
            "one) if it is a sample."
        )
    return rows


#: Texts that stand for a missing or non-finite value, not for a column's name (pandas' ``na_values`` among them).
_MISSING_VALUES = frozenset({
    "na", "n/a", "#n/a", "<na>", "nan", "-nan", "+nan", "null", "none",
    "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity",
})
#: A first line numbering at least this many columns 0, 1, 2, ... is pandas' header of an unnamed frame, not a
#: sample; fewer, or numbered from 1, it is ambiguous and refused.
_NUMBERED_COLUMNS = 4


def _is_name(field):
    """Whether ``field`` reads as a column's name: no number, no missing-value marker, no malformed number.

    ``1e-05`` is a number, ``nan`` / ``NA`` a missing value, and ``1_0``,
    ``'\u0661'`` or ``'\u22121'`` (a Unicode minus) a malformed one: none of
    them names a column, so a first row of them is a sample (and its value
    gets the error any row's would). An empty field counts as a name.
    """
    if parse_real(field) is not None or field.lower() in _MISSING_VALUES:
        return False
    try:
        float(field.replace("\u2212", "-"))
    except ValueError:
        return True
    return False


def _pandas_index_header(first):
    """Whether ``first`` begins with an unnamed index column (pandas' or R's ``""``; ``Unnamed: 0`` saved again)."""
    return len(first) > 1 and (first[0] == "" or bool(_PANDAS_UNNAMED.fullmatch(first[0])))


def _numbered_columns(first):
    """``0`` or ``1`` when ``first`` numbers its columns from there (``0,1,2,...``; ``0`` alone too), else None."""
    for start in (0, 1):
        if first and first == [str(start + position) for position in range(len(first))]:
            return start if (start == 0 or len(first) > 1) else None
    return None


def _increasing_integers(fields):
    """Whether ``fields`` are two or more plain integers, each larger than the one before."""
    values = [int(field) if field.lstrip("-").isdigit() and field.isascii() else None for field in fields]
    return len(values) > 1 and None not in values and all(a < b for a, b in zip(values, values[1:]))


def _has_header(rows, label_column):
    """Whether the first row names the columns (numpy.savetxt's ``# `` before them dropped in place).

    It does when it holds ``label_column`` (its other fields names, or
    numbers counting the columns), starts with pandas' or R's unnamed index
    column, or numbers :data:`_NUMBERED_COLUMNS` or more columns ``0,1,2,...``
    (pandas' header of an unnamed frame). Fewer numbered columns, or columns
    numbered from 1, are ambiguous (a header, or a sample of small
    integers?) and refused, as is ``label_column`` among values, and so are
    increasing integers above a line of fractions (wavelengths or years
    naming the columns, or a sample?). Otherwise a
    row holding a number is a sample (its other cells get the errors any
    row's would), and a row of no number is a header when it has a name
    (:func:`_is_name`) above a number of the next row (a labels column
    holds text on every row, header or not), or any name when there is no
    next row of its width.
    """
    first = rows[0][1]
    if first and first[0].startswith("# "):  # numpy.savetxt(..., header="x1,x2,label")
        first[0] = first[0][2:].strip()
        return True
    second = rows[1][1] if len(rows) > 1 and len(rows[1][1]) == len(first) else None
    if _pandas_index_header(first):
        return True
    if label_column in first:
        others = [field for field in first if field != label_column]
        if all(map(_is_name, others)) or _numbered_columns(others) is not None:
            return True
        raise ValueError(
            f"line {rows[0][0]} holds --label-column {label_column!r} among values, so it is a sample, not a "
            f"header; add a header line that names the columns (e.g. x1,x2,{label_column})."
        )
    start = _numbered_columns(first)
    if start == 0 and len(first) >= _NUMBERED_COLUMNS and second is not None:
        return True
    if start is not None and second is not None:
        raise ValueError(
            f"line {rows[0][0]} reads {','.join(first)!r}: column numbers (a header) or a sample? Name the "
            "columns with letters (x1,x2,...), or save the table without a header (pandas: "
            "to_csv(header=False))."
        )
    if second is not None and _increasing_integers(first) and any(
            value is not None and not value.is_integer() for value in map(parse_real, second)):
        raise ValueError(
            f"line {rows[0][0]} holds increasing integers ({','.join(first)[:40]}) above a line of fractions: "
            "numbers naming the columns (wavelengths, years) or a sample? Name the columns with letters (x400,...), "
            "or save the table without a header."
        )
    if any(parse_real(field) is not None for field in first):
        return False
    if second is None:
        return any(map(_is_name, first))
    return any(_is_name(name) and parse_real(value) is not None for name, value in zip(first, second))


def _shown(names):
    shown = ", ".join(repr(name) for name in names[:_SHOWN_COLUMNS])
    return shown + (", ..." if len(names) > _SHOWN_COLUMNS else "")


def _check_header(header):
    if _pandas_index_header(header):
        shown = f"is named {header[0]!r}" if header[0] else "has no name"
        raise ValueError(
            f"column 1 {shown} in the header line: an index column (pandas' or R's row names); save the table "
            "without it (pandas: to_csv(index=False); R: write.csv(row.names=FALSE)), or, if line 1 is a "
            "sample with a missing first value, write nan there."
        )
    for position, name in enumerate(header, start=1):
        if not name:
            raise ValueError(f"column {position} has no name in the header line; name every column.")


def _label_position(header, label_column):
    """Index of the labels column in ``header``, or None without ``label_column``."""
    if label_column is None:
        return None
    if header is None:
        raise ValueError(
            f"has no header line, so --label-column {label_column!r} names no column; add a first "
            f"line with the column names, e.g. 'x1,x2,{label_column}'."
        )
    found = [position for position, name in enumerate(header) if name == label_column]
    if not found:
        raise ValueError(
            f"has no column {label_column!r} (its columns: {_shown(header)}); give --label-column "
            "the name of the column that holds the labels."
        )
    if len(found) > 1:
        raise ValueError(f"has {len(found)} columns named {label_column!r}; rename all but the labels column.")
    return found[0]


def _reads_as_float(text):
    """Whether a feature cell is a number: ``float`` reads it (``nan`` and ``inf`` too, refused later as
    values), and it is ASCII without ``_`` (``float`` would read ``1_0`` as 10 and ``'\u0661'`` as 1)."""
    if not text.isascii() or "_" in text:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def _other_separator(fields):
    """Whether a line read as ``fields`` holds a semicolon, or is one field with tabs or spaces between values."""
    return any(";" in field for field in fields) or (len(fields) == 1 and bool(_OTHER_SEPARATOR.search(fields[0])))


def _not_a_number(number, fields, columns, names, label_column, next_fields):
    """The error about the first feature cell of a line that is not a number, with a hint where one is likely.

    ``next_fields``: the next line's fields (None for the last line); a
    cell that is text on both lines may be a labels column.
    """
    position = next(position for position in columns if not _reads_as_float(fields[position]))
    cell = fields[position]
    hint = ""
    text_below = next_fields is not None and not _reads_as_float(next_fields[position])
    if _other_separator(fields):
        hint = f" ({_SEPARATOR_HINT})"
    elif label_column is None and text_below and _is_name(cell):
        if any(map(_is_name, names)):
            hint = f" (if column {names[position]!r} holds the labels, pass --label-column {names[position]!r})"
        else:
            hint = (f" (if column {position + 1} holds the labels, add a header line that names the columns, e.g. "
                    f"{','.join(f'x{column}' for column in range(1, len(fields)))},label, and pass "
                    "--label-column label)")
    return ValueError(
        f"line {number}, column {names[position]!r}: {cell[:40]!r} is not a number; "
        f"every column but the labels must hold numbers{hint}."
    )


def _features(data, columns, names, label_column):
    """The feature columns of ``data`` as float64, line by line."""
    X = np.empty((len(data), len(columns)), dtype=np.float64)
    for row, (number, fields) in enumerate(data):
        cells = [fields[position] for position in columns]
        next_fields = data[row + 1][1] if row + 1 < len(data) else None
        try:
            X[row] = [float(cell) for cell in cells]
        except ValueError:
            raise _not_a_number(number, fields, columns, names, label_column, next_fields) from None
        joined = "".join(cells)
        if not joined.isascii() or "_" in joined:
            raise _not_a_number(number, fields, columns, names, label_column, next_fields)
    return X


def _refuse_a_row_index(X, names):
    """Refuse a feature column that numbers the rows (from :data:`MIN_INDEX_ROWS` rows up).

    An unnamed index column is refused from the header (:func:`_has_header`);
    a named one (pandas' ``reset_index()`` names it ``index`` or
    ``level_0``) was read as a feature, and on the unit sphere it outweighs
    every other: every unlabeled sample was rejected. Refused: a first
    feature column holding ``0..n-1`` or ``1..n`` in any order (a shuffled
    or filtered frame's index), and a column named as ``reset_index()``
    names it that holds integers only.
    """
    n_rows = X.shape[0]
    if n_rows < MIN_INDEX_ROWS or X.shape[1] < 2:
        return
    ordered = np.sort(X[:, 0])
    numbered = any(np.array_equal(ordered, np.arange(first, first + n_rows)) for first in (0, 1))
    named = [column for column, name in enumerate(names) if name in INDEX_NAMES
             and np.array_equal(X[:, column], np.round(X[:, column]))]
    if not numbered and not named:
        return
    column = 0 if numbered else named[0]
    what = "numbers the rows" if numbered else "is named as pandas' reset_index() names an index, with integers"
    raise ValueError(
        f"its feature column {names[column]!r} {what}: a row index, not a feature (on the unit sphere it would "
        "outweigh every other column). Drop it: pandas' to_csv(path, index=False), after "
        "reset_index(drop=True) or df.drop(columns=...); numpy.savetxt without that column."
    )


def read_feature_table(lines, label_column=None):
    """Features and the texts of the labels column of a CSV table.

    Parameters
    ----------
    lines : list of str
        The lines of the file.
    label_column : str or None
        The name (in the header) of the column that holds the labels.

    Returns
    -------
    X : ndarray of shape (n_rows, n_features), float64
    labels : LabelColumn or None
        The stripped text of ``label_column`` on each row (empty when unlabeled).

    Examples
    --------
    >>> X, labels = read_feature_table(["x,y,label", "0.5,1,cat", "2,-1,"], "label")
    >>> X.tolist(), labels.texts, labels.lines
    ([[0.5, 1.0], [2.0, -1.0]], ['cat', ''], [2, 3])
    """
    rows = list(_rows(lines))
    if not rows:
        raise ValueError("holds no data; write one sample per line, its features separated by commas.")
    header = rows[0][1] if _has_header(rows, label_column) else None
    data = rows[1:] if header is not None else rows
    if header is not None:
        _check_header(header)
    if not data:
        raise ValueError("holds a header line but no sample; write one sample per line below it.")
    width = len(rows[0][1])
    for number, fields in data:
        if len(fields) != width:
            hint = f" ({_SEPARATOR_HINT})" if _other_separator(rows[0][1]) or _other_separator(fields) else ""
            raise ValueError(
                f"line {number} has {len(fields)} field(s) but line {rows[0][0]} has {width}; every "
                f"line needs one field per column{hint}."
            )
    names = header if header is not None else [str(position) for position in range(1, width + 1)]
    label_at = _label_position(header, label_column)
    columns = [position for position in range(width) if position != label_at]
    if not columns:
        raise ValueError(f"has no feature column besides the labels column {label_column!r}.")
    X = _features(data, columns, names, label_column)
    _refuse_a_row_index(X, [names[position] for position in columns])
    labels = None
    if label_at is not None:
        labels = LabelColumn(label_column, [fields[label_at] for _, fields in data], [number for number, _ in data])
    return X, labels
