"""The ``fastprop`` command line: ``demo``, ``graph``, ``propagate`` and ``bench``.

Run ``fastprop COMMAND --help`` (or ``python -m fastprop COMMAND --help``)
for every option and its default. :func:`main` returns the exit status: 0 on
success, 2 on bad input (one ``fastprop: error: ...`` line on stderr, no
traceback), 130 when interrupted (Ctrl-C, at any moment, start-up included),
143 when terminated (SIGTERM). Interrupted or terminated, it removes its
temporary files and prints one line.

This module imports only the standard library; NumPy, SciPy, Numba and the
commands are imported inside :func:`main`, where a Ctrl-C is handled.
"""

import argparse
import io
import os
import signal
import sys
import textwrap
import threading
import warnings
from importlib import metadata

from ._numbers import is_plain_integer, parse_integer, parse_real
from ._progress import Progress

__all__ = ["main", "build_parser"]

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports it

_PLOT_NOTE = 'needs matplotlib: pip install "fastprop-graph[plot]"'


class _UsageError(Exception):
    """A command-line syntax error, reported as one line instead of argparse's usage block."""

    def __init__(self, message, prog):
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _UsageError(message, self.prog)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults in the help of every option, except where there is none to show (None, False)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False:
            return action.help
        if isinstance(action.default, (list, tuple)):
            return f"{action.help} (default: {' '.join(map(str, action.default))})"
        return super()._get_help_string(action)

    def _split_lines(self, text, width):
        # Keep 'fastprop-graph[plot]' and option names whole.
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


# ------------------------------------------------------------ value types


def _integer(low):
    def parse(text):
        value = parse_integer(text.strip())
        if value is None and is_plain_integer(text.strip()):
            raise argparse.ArgumentTypeError(f"{text.strip()} is outside int64 ([-2**63, 2**63 - 1])")
        if value is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer in plain digits (-?[0-9]+)")
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is too small; the smallest allowed is {low}")
        return value

    parse.__name__ = "integer"
    return parse


def _fraction(low_inclusive, high_inclusive):
    def parse(text):
        value = parse_real(text.strip())
        if value is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a decimal number")
        above = value >= 0 if low_inclusive else value > 0
        below = value <= 1 if high_inclusive else value < 1
        if not (above and below):
            interval = f"{'[' if low_inclusive else '('}0, 1{']' if high_inclusive else ')'}"
            raise argparse.ArgumentTypeError(f"{text} is outside {interval}")
        return value

    parse.__name__ = "fraction"
    return parse


def outlier_threshold(text):
    """``auto``, ``none`` or a float in [0, 1], as FastProp's ``outlier_threshold``."""
    lowered = text.strip().lower()
    if lowered == "auto":
        return "auto"
    if lowered == "none":
        return None
    value = parse_real(lowered)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'auto', 'none' or a number in [0, 1]")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is outside [0, 1]; use 'auto', 'none' or a number in [0, 1]")
    return value


# ----------------------------------------------------------------- parser


def _paragraphs(text, width=79):
    """Fill each paragraph of ``text`` (the help formatter keeps descriptions as they are)."""
    return "\n\n".join(textwrap.fill(paragraph, width) for paragraph in text.split("\n\n"))


def _command(subparsers, name, function, summary, description, common):
    parser = subparsers.add_parser(
        name, help=summary, description=_paragraphs(description), parents=[common],
        formatter_class=_HelpFormatter, allow_abbrev=False,
    )
    parser.set_defaults(run=function)
    return parser


def _add_graph_options(parser, what):
    parser.add_argument("--neighbors", type=_integer(1), default=30, metavar="K",
                        help=f"neighbours per sample of the cosine kNN graph{what} "
                             "(lowered to n_samples - 1 on tiny inputs)")
    parser.add_argument("--method", choices=("auto", "exact", "hnsw"), default="auto",
                        help="kNN search: exact brute force, hnswlib (approximate), or auto: "
                             "exact up to 30,000 samples, hnsw above")
    parser.add_argument("--parallel-insert", action="store_true",
                        help="build the hnsw index on all cores, not one: faster (at 1M samples on 2 "
                             "cores, 146 s instead of 216 s for the whole graph), but hnswlib's parallel "
                             "insertion gives a slightly different graph on every run, whatever --seed; "
                             "no effect on the exact search")


def build_parser():
    """The ``argparse`` parser of the ``fastprop`` command."""
    from ..evaluation import benchmark
    from ._commands import run_bench, run_graph, run_propagate
    from ._demo import run_demo

    try:
        version = metadata.version("fastprop-graph")
    except metadata.PackageNotFoundError:
        version = "unknown"
    parser = _Parser(
        prog="fastprop", formatter_class=_HelpFormatter, allow_abbrev=False,
        description=_paragraphs(
            "Label embeddings from a few labels by reliable propagation on a cosine kNN graph "
            "(Yang et al., ECCV 2020); samples of no class are labeled -1."
        ),
        epilog="Run 'fastprop COMMAND --help' for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"fastprop {version}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = _Parser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true",
                        help="no progress on stderr (progress is shown only when stderr is a terminal)")

    demo = _command(
        subparsers, "demo", run_demo, "FastProp vs SGC and LabelSpreading on a synthetic noisy set",
        "Draw a synthetic pool (fastprop.evaluation.datasets.make_noisy_mixture, 50% outliers), draw a task "
        "with 1% seeds and 50% outliers among the unlabeled samples (fastprop.evaluation.protocol), run "
        "FastProp, SGC and LabelSpreading on one shared kNN graph, and print their accuracy, "
        "outlier AUROC and time, what the numbers mean and which method wins each, and a "
        "histogram of FastProp's confidence for in-class samples vs outliers. The one-time "
        "compilation of the kernels is a step of its own, outside every timing.", common,
    )
    demo.add_argument("--samples", type=_integer(100), default=10_000, metavar="N",
                      help="samples in the synthetic pool (in-class and outliers)")
    demo.add_argument("--classes", type=_integer(1), default=20, metavar="M", help="number of classes")
    demo.add_argument("--seed", type=_integer(0), default=0, help="seed of the data, the task and FastProp")
    demo.add_argument("--neighbors", type=_integer(1), default=30, metavar="K",
                      help="neighbours per sample of the kNN graph")
    demo.add_argument("--plot", metavar="PATH",
                      help="also draw the confidence of in-class samples vs outliers per method "
                           f"(the paper's Fig. 6) to this image (.png, .pdf, .svg); {_PLOT_NOTE}")

    graph = _command(
        subparsers, "graph", run_graph, "build and save the cosine kNN graph of embeddings",
        "Build the symmetric cosine kNN affinity graph of the embeddings and save it as .npz "
        "(scipy CSR arrays, no pickle) for 'fastprop propagate --graph'.", common,
    )
    graph.add_argument("--features", required=True, metavar="PATH",
                       help="embeddings: .npy (n_samples x n_features), .npz with array X, or .csv "
                            "(one sample per line, a number per column, an optional header line)")
    graph.add_argument("--label-column", metavar="NAME",
                       help="a column of the --features .csv that holds labels, not features: left out")
    graph.add_argument("--out", required=True, metavar="PATH", help="where to write the graph (.npz)")
    _add_graph_options(graph, "")
    graph.add_argument("--seed", type=_integer(0), default=0,
                       help="seed of hnswlib's level generator; unless --parallel-insert, the hnsw "
                            "index is built on one thread (queried on all cores), so the same seed "
                            "gives the same graph")

    propagate = _command(
        subparsers, "propagate", run_propagate, "label embeddings from a few labels, flag outliers",
        "Propagate the seed labels over the kNN graph with FastProp. Every sample gets a label "
        "(the --unlabeled marker, -1 by default, for an outlier) and a confidence in [0, 1]. "
        "Labels may be integers or class names; the outputs carry them as given.\n\n"
        "outputs: --out .npz with arrays labels, confidence, label_distributions (one column per "
        "class), classes (the class of each column) and outlier_threshold; --csv with the columns "
        "index,label,confidence,is_outlier; --plot an image of the result.", common,
    )
    propagate.add_argument("--features", required=True, metavar="PATH",
                           help="embeddings: .npy (n_samples x n_features), .npz with array X (and "
                                "optionally y, used when --labels is not given), or .csv (one sample "
                                "per line, a number per column, an optional header line; see "
                                "--label-column)")
    propagate.add_argument("--labels", metavar="PATH",
                           help="one label per sample, integers or class names: .npy, .npz with "
                                "array y, or a text/CSV file with one label per line (an optional "
                                "header line). Default: array y of the --features .npz")
    propagate.add_argument("--label-column", metavar="NAME",
                           help="take the labels from this column of the --features .csv (found "
                                "by its name in the header line) instead of --labels; the other "
                                "columns are the features")
    propagate.add_argument("--unlabeled", type=str.strip, default="-1", metavar="MARKER",
                           help="the label of an unlabeled sample (an empty line or field always is "
                                "one), and of an outlier in the outputs; with a marker that is not "
                                "an integer (e.g. '' or 'unknown') the labels are read as class names")
    propagate.add_argument("--out", required=True, metavar="PATH", help="where to write the result (.npz)")
    propagate.add_argument("--csv", metavar="PATH", help="also write the result as CSV")
    propagate.add_argument("--plot", metavar="PATH",
                           help="also draw the confidence of the unlabeled samples against the "
                                "outlier threshold and the samples per class to this image (.png, "
                                f".pdf, .svg); {_PLOT_NOTE}")
    propagate.add_argument("--graph", metavar="PATH",
                           help="a graph from 'fastprop graph' on the same features (give --neighbors "
                                "the K it was built with); default: build one with --neighbors and --method")
    propagate.add_argument("--validation", metavar="PATH",
                           help="CSV of index,label lines (an optional header may name the columns "
                                "index and label in either order) for unlabeled samples "
                                "whose truth is known, labels like the seeds' (the --unlabeled "
                                "marker or an empty label = a known outlier); the confidence is "
                                "calibrated on them (the probability that a sample's class is right) "
                                "and, with --outlier-threshold auto, the threshold is the one that "
                                "maximises accuracy on them (smoothed over nearby thresholds)")
    propagate.add_argument("--outlier-threshold", type=outlier_threshold, default="auto",
                           metavar="{auto,none,FLOAT}",
                           help="samples whose confidence is below it are outliers: 'auto' "
                                "(chosen on --validation, else an unsupervised rule on the confidence "
                                "distribution), 'none' (no outliers) or a number in [0, 1], kept "
                                "with --validation too")
    propagate.add_argument("--outlier-share", type=_fraction(True, False), default=None, metavar="FRACTION",
                           help="the share of the unlabeled samples you expect to be outliers, in "
                                "[0, 1): with --outlier-threshold auto and no --validation, that share "
                                "of them, the least confident, are the outliers (0: none); when "
                                "unsure, err low")
    _add_graph_options(propagate, " built when --graph is not given, and FastProp's n_neighbors (the "
                                  "calibration's local density, new points' neighbours): with --graph, "
                                  "give the K it was built with")
    propagate.add_argument("--seed", type=_integer(0), default=0,
                           help="seed of FastProp's tie-breaking (and of hnswlib)")

    bench = _command(
        subparsers, "bench", run_bench, "the paper's Table 1 on a labelled pool of embeddings",
        "For every noise ratio and seed, draw a task from the pool (M classes, label ratio of "
        "seeds, outliers from the other classes and from samples labeled -1), build one kNN graph "
        "for it, run every method on it and score it with the paper's metric; print the table "
        "of mean ± std over the seeds as Markdown (fastprop.evaluation.benchmark).", common,
    )
    bench.add_argument("--data", required=True, metavar="PATH",
                       help=".npz with X (embeddings; rows are L2-normalised) and y (class ids, "
                            "-1 for samples of no class)")
    bench.add_argument("--classes", type=_integer(1), required=True, metavar="M", help="classes per task")
    bench.add_argument("--seeds", type=_integer(1), default=5, metavar="N", help="tasks per noise ratio")
    bench.add_argument("--noise", type=_fraction(True, False), nargs="+", default=[0.0, 0.1, 0.3, 0.5],
                       metavar="RATIO", help="noise ratios: share of outliers among the unlabeled samples")
    refined = tuple(name + benchmark.CONFNET_SUFFIX for name in benchmark.METHOD_NAMES if name != "FastProp")
    bench.add_argument("--methods", nargs="+", default=list(benchmark.METHOD_NAMES), metavar="NAME",
                       choices=(*benchmark.METHOD_NAMES, *refined, benchmark.SKLEARN_REFERENCE),
                       help="methods to compare, among "
                            f"{', '.join((*benchmark.METHOD_NAMES, benchmark.SKLEARN_REFERENCE))}; a "
                            f"baseline's name followed by '{benchmark.CONFNET_SUFFIX}' (one argument, "
                            "quoted) adds that baseline with its confidence refined by ConfNet, the "
                            "paper's Fig. 6 (listed after the baseline, it reuses its fit)")
    bench.add_argument("--label-ratio", type=_fraction(False, True), default=0.01, metavar="RATIO",
                       help="share of each task's in-class samples given as seeds")
    bench.add_argument("--neighbors", type=_integer(1), default=30, metavar="K",
                       help="neighbours per sample of each task's kNN graph (at most the task's "
                            "samples - 1)")
    bench.add_argument("--mnist-split", action="store_true",
                       help="fixed split: the M smallest class ids are every task's classes and "
                            "all other classes become outliers (for a pool without samples of no "
                            "class, e.g. MNIST: --classes 5 gives digits 0-4 vs outliers 5-9); "
                            "by default each task draws M classes at random")
    bench.add_argument("--metric", choices=("accuracy", "in_class_accuracy", "outlier_auroc", "calibration_error"),
                       default="accuracy",
                       help="what the table and --plot show (calibration_error: of the confidence as the "
                            "probability that the argmax is right; lower is better)")
    bench.add_argument("--out", metavar="PATH", help="also write the table to this Markdown file")
    bench.add_argument("--plot", metavar="PATH",
                       help=f"draw the metric against the noise ratio, one line per method; {_PLOT_NOTE}")
    bench.add_argument("--confidence-plot", metavar="PATH",
                       help="draw the confidence of in-class samples vs outliers per method (the "
                            "paper's Fig. 6), from one more run: seed 0 at the largest noise "
                            f"ratio; {_PLOT_NOTE}")
    bench.add_argument("--no-warmup", action="store_true",
                       help="skip the untimed warm-up (the first run's seconds then include "
                            "Numba compilation)")
    return parser


# ------------------------------------------------------------------- main


def _silence_stdout():
    """Point stdout at /dev/null so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def _one_line(error):
    return " ".join(str(error).split()) or type(error).__name__


class _Terminated(BaseException):
    """Raised in the main thread by SIGTERM, so that every ``finally`` block runs (temporary files go)."""


#: Set by a Ctrl-C. Python drops a KeyboardInterrupt raised inside a finaliser ("Exception ignored
#: in ..."), which happens while NumPy, SciPy and Numba are imported, so the run looks at it too.
_INTERRUPTED = threading.Event()


def _on_sigint(signum, frame):
    _INTERRUPTED.set()
    raise KeyboardInterrupt


def _raise_if_interrupted():
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


def _on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the clean-up
    raise _Terminated


def main(argv=None):
    """Run the ``fastprop`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if in_main_thread else None
    previous_sigint = signal.signal(signal.SIGINT, _on_sigint) if in_main_thread else None
    _INTERRUPTED.clear()
    try:
        status = _run(argv)
        _raise_if_interrupted()
        return status
    except KeyboardInterrupt:
        sys.stderr.write("fastprop: interrupted; no partial file was written.\n")
        return EXIT_INTERRUPTED
    except Exception:
        # A Ctrl-C inside an extension module's initialisation reaches us as the error it made the
        # import fail with (an ImportError or SystemError), not as a KeyboardInterrupt.
        if not _INTERRUPTED.is_set():
            raise
        sys.stderr.write("fastprop: interrupted; no partial file was written.\n")
        return EXIT_INTERRUPTED
    except _Terminated:
        sys.stderr.write("fastprop: terminated; no partial file was written.\n")
        return EXIT_TERMINATED
    finally:
        if in_main_thread:  # a handler installed outside Python reads back as None
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
            signal.signal(signal.SIGINT, signal.default_int_handler if previous_sigint is None else previous_sigint)


def _run(argv):
    parser = build_parser()
    _raise_if_interrupted()  # a Ctrl-C during the imports above may have been dropped
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            raise _UsageError(f"unrecognized arguments: {' '.join(unknown)}", f"fastprop {args.command}")
    except _UsageError as error:
        hint = f" (see '{error.prog} --help')"
        sys.stderr.write(f"fastprop: error: {_one_line(error)}{hint}\n")
        return EXIT_BAD_INPUT
    except SystemExit as exit:  # --help, --version
        return exit.code if isinstance(exit.code, int) else EXIT_OK

    progress = Progress.for_stream(sys.stderr, quiet=args.quiet)
    shown = set()

    def show_warning(message, category, filename, lineno, file=None, line=None):
        text = _one_line(message)
        if text not in shown:
            shown.add(text)
            progress.message(f"warning: {text}")

    with warnings.catch_warnings():
        warnings.simplefilter("always", UserWarning)
        warnings.simplefilter("always", RuntimeWarning)
        warnings.showwarning = show_warning
        try:
            with progress:
                return args.run(args, progress)
        except BrokenPipeError:  # stdout closed early, e.g. piped into head
            _silence_stdout()
            return EXIT_BROKEN_PIPE
        except (ValueError, OSError) as error:
            sys.stderr.write(f"fastprop: error: {_one_line(error)}\n")
            return EXIT_BAD_INPUT
