"""Shared helpers for the benchmark scripts in ``bench/``.

Nothing here is fastprop-specific beyond the version report: synthetic data,
wall-clock timing, and writing a result as Markdown (for people) and JSON (for
scripts) under ``bench/results/``.
"""

import datetime
import gc
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"

# When the bench started (this module is imported first thing), for the report.
_START_DATE = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
_START_LOAD = os.getloadavg() if hasattr(os, "getloadavg") else None


# --------------------------------------------------------------------- data


def clustered_sphere(
    n_samples,
    n_features,
    *,
    n_clusters=1000,
    spread=(0.3, 1.5),
    seed=0,
    return_labels=False,
):
    """Gaussian clusters of varied size and spread, projected onto the unit sphere.

    Cluster centres are uniform on the sphere. Cluster ``c`` draws its points
    as ``centre_c + sigma_c * z / sqrt(n_features)`` with ``z`` standard
    normal, so ``sigma_c`` is the typical distance of a point from its centre
    (before renormalisation); ``sigma_c`` is log-uniform in ``spread``. Sizes
    follow a Dirichlet(2) draw, so some clusters are several times larger than
    others. Rows are returned L2-normalised, float32, in random order.

    Returns ``X`` or ``(X, labels)``.
    """
    rng = np.random.default_rng(seed)
    n_clusters = min(n_clusters, n_samples)
    centres = rng.standard_normal((n_clusters, n_features), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    low, high = spread
    sigmas = np.exp(rng.uniform(math.log(low), math.log(high), size=n_clusters)).astype(np.float32)
    weights = rng.dirichlet(np.full(n_clusters, 2.0))
    labels = rng.choice(n_clusters, size=n_samples, p=weights)
    X = np.empty((n_samples, n_features), dtype=np.float32)
    chunk = 65_536
    scale = np.float32(1.0 / math.sqrt(n_features))
    for start in range(0, n_samples, chunk):
        stop = min(start + chunk, n_samples)
        lab = labels[start:stop]
        noise = rng.standard_normal((stop - start, n_features), dtype=np.float32)
        block = centres[lab] + (sigmas[lab] * scale)[:, None] * noise
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        X[start:stop] = block
    return (X, labels) if return_labels else X


def load_npz(name):
    """Load ``shared/data/<name>`` as a dict of arrays, or None when it is absent."""
    path = SHARED_DATA_DIR / name
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}


# ------------------------------------------------------------------ timing


def timed(fn, repeat=1):
    """Run ``fn()`` ``repeat`` times; return ``(best_seconds, result_of_last_run)``.

    Wall-clock seconds. The best of several runs is the least disturbed by
    other processes on a shared machine. Garbage is collected before each run
    and not timed.
    """
    wall, _, result = timed_cpu(fn, repeat)
    return wall, result


def timed_cpu(fn, repeat=1):
    """Like :func:`timed` but return ``(best_wall, best_cpu, result_of_last_run)``.

    ``cpu`` is this process's CPU time summed over all its threads
    (:func:`time.process_time`). On a loaded machine it is far steadier than
    wall time, but it counts a 2-thread second twice: compare CPU times between
    runs with the same parallelism, or read them next to the wall times.
    """
    best_wall = best_cpu = math.inf
    result = None
    for _ in range(max(1, repeat)):
        result = None
        gc.collect()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = fn()
        best_wall = min(best_wall, time.perf_counter() - wall0)
        best_cpu = min(best_cpu, time.process_time() - cpu0)
    return best_wall, best_cpu, result


def log(message):
    """Print a progress line with the wall-clock time, flushed immediately."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ------------------------------------------------------------------ report


def _version(distribution, *alternatives):
    for name in (distribution, *alternatives):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _measured_root():
    """The checkout whose fastprop this process imported (not always the bench's own: an editable
    install elsewhere wins over a worktree unless ``PYTHONPATH`` names it)."""
    module = sys.modules.get("fastprop")
    if module is None or not getattr(module, "__file__", None):
        return REPO_ROOT
    return Path(module.__file__).resolve().parents[1]


def _git_commit():
    """The short commit (``+dirty`` when changed) of the fastprop being measured."""
    root = _measured_root()
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root, capture_output=True, text=True, timeout=10, check=True,
        )
        dirty = subprocess.run(
            ["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"],
            cwd=root, capture_output=True, text=True, timeout=10, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def environment():
    """Command line, machine, date and library versions, for the head of a result file."""
    load = _START_LOAD
    return {
        "command": " ".join(shlex.quote(arg) for arg in [Path(sys.executable).name, *sys.argv]),
        "date": _START_DATE,
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "load_average_at_start": [round(x, 2) for x in load] if load else None,
        },
        "versions": {
            "python": platform.python_version(),
            "fastprop": _version("fastprop-graph", "fastprop"),
            "numpy": np.__version__,
            "scipy": _version("scipy"),
            "numba": _version("numba"),
            "hnswlib": _version("hnswlib", "chroma-hnswlib"),
        },
        "git_commit": _git_commit(),
    }


def _format(value, spec):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if spec and isinstance(value, (int, float, np.integer, np.floating)):
        return format(value, spec)
    return str(value)


def _normalise_columns(columns):
    """Columns are ``key`` or ``(key, header)`` or ``(key, header, format_spec)``."""
    out = []
    for column in columns:
        if isinstance(column, str):
            column = (column,)
        key, header, spec = (tuple(column) + (None, None))[:3]
        out.append((key, header or key, spec or ""))
    return out


def markdown_table(rows, columns):
    """A GitHub Markdown table of ``rows`` (dicts); missing values print empty."""
    cols = _normalise_columns(columns)
    lines = [
        "| " + " | ".join(header for _, header, _ in cols) + " |",
        "| " + " | ".join("---:" if spec else "---" for _, _, spec in cols) + " |",
    ]
    for row in rows:
        lines.append("| " + " | ".join(_format(row.get(key), spec) for key, _, spec in cols) + " |")
    return "\n".join(lines)


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    return value


def write_tables(name, tables, meta=None, *, title=None, notes=None):
    """Write ``bench/results/<name>.md`` and ``<name>.json``; return the Markdown.

    ``tables`` is a list of ``(heading, rows, columns)``; ``meta`` is merged
    into :func:`environment` and shown at the top of both files; ``notes`` is
    free Markdown appended after the tables.
    """
    info = {**environment(), **(meta or {})}
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    info["machine"]["load_average_at_end"] = [round(x, 2) for x in load] if load else None
    parts = [f"# {title or name}", ""]
    parts.append(f"- command: `{info['command']}`")
    parts.append(f"- date: {info['date']}; git: {info.get('git_commit')}")
    machine = info["machine"]
    parts.append(
        f"- machine: {machine['platform']}, {machine['cpu_count']} CPUs "
        f"({machine['processor']}); load average start {machine['load_average_at_start']}, "
        f"end {machine['load_average_at_end']}"
    )
    parts.append("- versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    for key, value in (meta or {}).items():
        parts.append(f"- {key}: {value}")
    for heading, rows, columns in tables:
        parts += ["", f"## {heading}", "", markdown_table(rows, columns)]
    if notes:
        parts += ["", notes.rstrip()]
    text = "\n".join(parts) + "\n"
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.md").write_text(text)
    payload = {"meta": info, "tables": [{"heading": h, "rows": r} for h, r, _ in tables]}
    if notes:
        payload["notes"] = notes
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(_jsonable(payload), indent=2) + "\n")
    return text


def write_table(name, rows, columns, meta=None, **kwargs):
    """One-table form of :func:`write_tables`."""
    return write_tables(name, [(name, rows, columns)], meta, **kwargs)
