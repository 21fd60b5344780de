"""``python -m fastprop``: the command line (see :mod:`fastprop.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
