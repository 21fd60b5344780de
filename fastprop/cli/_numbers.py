"""Numbers typed on the command line or read from text files: plain ASCII only.

Python's ``int`` and ``float`` also read ``1_0`` as 10 and non-ASCII digits
(``'١'`` as 1); a label file or an option with such text is far more likely a
mistake than a number, so these parsers accept only ``-?[0-9]+`` and the usual
decimal forms of a real number.
"""

import re

_INTEGER = re.compile(r"-?[0-9]+")
_REAL = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")
_INT64 = (-(2**63), 2**63 - 1)


def parse_integer(text):
    """``int(text)`` for ASCII ``-?[0-9]+`` within int64; None otherwise.

    Examples
    --------
    >>> parse_integer("-12"), parse_integer("1_0"), parse_integer("\\u0661"), parse_integer("3.0")
    (-12, None, None, None)
    """
    if not _INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else None


def is_plain_integer(text):
    """Whether ``text`` is ASCII ``-?[0-9]+``, whatever its size (``parse_integer`` then says if it fits)."""
    return bool(_INTEGER.fullmatch(text))


def parse_real(text):
    """``float(text)`` for an ASCII decimal number (``0.5``, ``.5``, ``1e-3``); None otherwise (``nan``, ``1_0``)."""
    return float(text) if _REAL.fullmatch(text) else None


def looks_like_a_header(text):
    """A header line (``label``, ``index,label``) starts with a letter; data starts with a digit or '-'.

    numpy.savetxt writes its ``header=`` as a comment, ``# label``: that is a header too.
    """
    text = text.strip()
    if text.startswith("# "):
        text = text[2:].lstrip()
    return bool(text) and text[0].isalpha()
