"""Progress of a ``FastProp.fit``: to a user's callable, or as lines on stderr."""

import sys

_STAGE_TEXT = {
    "graph": "building the kNN graph",
    "training": "training the local predictor",
    "confnet": "training ConfNet",
    "provisional": "provisional classes and the outlier threshold",
    "done": "done",
}


class Reporter:
    """Tells ``progress(stage, done, total)``, or stderr when only ``verbose`` is set.

    Parameters
    ----------
    progress : callable or None
    verbose : bool
    """

    def __init__(self, progress, verbose):
        self.progress = progress
        self.verbose = verbose

    @property
    def active(self):
        """Whether anyone listens (the patch loop skips counting otherwise)."""
        return self.progress is not None or bool(self.verbose)

    def __call__(self, stage, done=None, total=None):
        if self.progress is not None:
            self.progress(stage, done, total)
        elif self.verbose:
            if stage == "propagation":
                sys.stderr.write(f"\rfastprop: propagating, {done}/{total} confident")
            else:
                prefix = "\n" if stage == "confnet" else ""
                sys.stderr.write(f"{prefix}fastprop: {_STAGE_TEXT[stage]}\n")

    def propagation(self, n_confident, n_vertices):
        """The patch loop's progress: ``n_confident`` of ``n_vertices`` are confident."""
        self("propagation", n_confident, n_vertices)
