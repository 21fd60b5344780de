"""Hostile input (issue #13): every defect is a clear ValueError or correct behaviour.

Cases that used to kill the interpreter (SIGSEGV, SIGABRT) run in a
subprocess, so that a regression fails one test instead of the whole suite;
the subprocesses load the kernels from Numba's on-disk cache.
"""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import fastprop
from fastprop import FastProp, baselines, build_knn_graph, load_graph, save_graph
from fastprop.evaluation.datasets import load_embeddings
from fastprop._validation import check_graph

ROOT = Path(__file__).resolve().parents[1]
BASELINES = [baselines.LabelPropagation, baselines.LabelSpreading, baselines.SGC, baselines.GCN,
             baselines.CorrectAndSmooth, baselines.GAT, baselines.GraphSAGE, baselines.FastGCN,
             baselines.PoissonLearning]
#: The issue's prefix, for the scripts run in a subprocess.
PREFIX = """
import numpy as np, fastprop, fastprop.baselines
X = np.random.default_rng(0).normal(size=(200, 8)).astype(np.float32)
y = np.full(200, -1); y[:2] = [0, 1]
G = fastprop.build_knn_graph(X, 10, random_state=0)
"""


def run_python(script, *, env=None, timeout=120):
    """Run the issue's prefix and ``script`` in a fresh interpreter that imports this checkout's fastprop."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-c", PREFIX + textwrap.dedent(script)], capture_output=True,
                          text=True, env=environment, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def issue():
    """The issue's X, y and graph."""
    X = np.random.default_rng(0).normal(size=(200, 8)).astype(np.float32)
    y = np.full(200, -1)
    y[:2] = [0, 1]
    return X, y, build_knn_graph(X, 10, random_state=0)


# ------------------------------------------------ 1. CSR structure of graphs


def test_out_of_range_column_is_a_value_error_not_a_crash(tmp_path):
    """Was SIGSEGV (exit 139) in FastProp.fit, SGC and ``fastprop propagate --graph``."""
    script = f"""
    import fastprop.cli
    G.indices[5] = 10**6
    for fit in (lambda: fastprop.FastProp(random_state=0).fit(X, y, graph=G),
                lambda: fastprop.baselines.SGC().fit(X, y, graph=G)):
        try:
            fit()
        except ValueError as error:
            print("ValueError:", error)
    np.save({str(tmp_path / "X.npy")!r}, X)
    np.save({str(tmp_path / "y.npy")!r}, y)
    np.savez({str(tmp_path / "bad.npz")!r}, format=np.array("csr"), shape=np.array(G.shape), indptr=G.indptr,
             indices=G.indices, data=G.data)
    status = fastprop.cli.main(["propagate", "--features", {str(tmp_path / "X.npy")!r}, "--labels",
                                {str(tmp_path / "y.npy")!r}, "--graph", {str(tmp_path / "bad.npz")!r},
                                "--out", {str(tmp_path / "r.npz")!r}])
    print("status", status)
    """
    result = run_python(script)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[:2] == [lines[0]] * 2 and "holds 1000000 at position 5, outside [0, 199]" in lines[0]
    assert lines[2] == "status 2"
    assert result.stderr.count("\n") == 1 and "outside [0, 199]" in result.stderr
    assert not (tmp_path / "r.npz").exists()


def _corrupt(graph, how):
    graph = graph.copy()
    if how == "index too large":
        graph.indices[5] = 250
    elif how == "negative index":
        graph.indices[5] = -3
    elif how == "decreasing indptr":
        graph.indptr[3] = graph.indptr[4] + 5
    elif how == "indptr not from 0":
        graph.indptr[0] = 1
    elif how == "indptr past the data":
        graph.indptr[-1] += 1
    elif how == "indptr too short":
        graph.indptr = graph.indptr[:-1]
    return graph


CORRUPTIONS = {
    "index too large": r"graph.indices holds 250 at position 5, outside \[0, 199\]",
    "negative index": r"graph.indices holds -3 at position 5, outside \[0, 199\]",
    "decreasing indptr": r"graph.indptr decreases from \d+ to \d+ at row 3",
    "indptr not from 0": "graph.indptr must start at 0, got 1",
    "indptr past the data": r"graph.indptr ends at \d+ stored entries, but indices has",
    "indptr too short": "graph.indptr has 200 entries, but a graph of 200 rows needs 201",
}


OUTCOME = """
def outcome(call):
    try:
        call()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "no error"
"""


def _outcomes(script):
    """Run ``script`` beside this module, in a subprocess; it prints a JSON dict of case -> ``outcome(call)``."""
    import json

    result = run_python("import json, sys\nsys.path.insert(0, 'tests')\n" + OUTCOME + textwrap.dedent(script))
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_corrupt_csr_structure_is_refused_by_fastprop_and_every_baseline():
    """Negative indices were accepted silently, a decreasing indptr failed in scipy's C++, and
    indptr past the data read out of bounds (SIGSEGV): in a subprocess."""
    outcomes = _outcomes("""
    from test_hostile import BASELINES, CORRUPTIONS, _corrupt
    estimators = [lambda: fastprop.FastProp(random_state=0)] + BASELINES
    print(json.dumps({f"{how} / {make().__class__.__name__}": outcome(lambda: make().fit(X, y, graph=_corrupt(G, how)))
                      for how in CORRUPTIONS for make in estimators}))
    """)
    assert len(outcomes) == len(CORRUPTIONS) * (1 + len(BASELINES))
    for case, text in outcomes.items():
        assert re.match("ValueError: " + CORRUPTIONS[case.split(" / ")[0]], text), (case, text)


@pytest.mark.parametrize("how", ["index too large", "negative index", "decreasing indptr"])
def test_load_graph_checks_the_structure(issue, tmp_path, how):
    graph = _corrupt(issue[2], how)
    path = tmp_path / "bad.npz"
    np.savez(path, format=np.array("csr"), shape=np.array(graph.shape), indptr=graph.indptr,
             indices=graph.indices, data=graph.data)
    message = CORRUPTIONS[how].replace(r"graph.ind", r"bad.npz: array 'ind", 1).replace(" holds", "' holds")
    with pytest.raises(ValueError, match=message.replace(" decreases", "' decreases")):
        load_graph(path)


FORMAT_CORRUPTIONS = {
    "coo": ("graph.row[3] = 500", r"graph: its COO row array holds 500 at position 3"),
    "csc": ("graph.indices[3] = 500", r"graph.indices holds 500 at position 3"),
    "bsr": ("graph.indices[3] = 500", r"graph.indices holds 500 at position 3"),
    "lil": ("graph.rows[0], graph.data[0] = [900], [1.0]", r"graph is not a valid lil matrix"),
}


def test_other_sparse_formats_are_checked_before_conversion():
    """scipy's conversions of such matrices read out of bounds (SIGSEGV): in a subprocess."""
    outcomes = _outcomes("""
    from test_hostile import FORMAT_CORRUPTIONS
    from fastprop._validation import check_graph

    def corrupted(fmt):
        graph = G.asformat(fmt)
        exec(FORMAT_CORRUPTIONS[fmt][0])
        return graph

    print(json.dumps({fmt: outcome(lambda: check_graph(corrupted(fmt), 200)) for fmt in FORMAT_CORRUPTIONS}))
    """)
    for fmt, (_, message) in FORMAT_CORRUPTIONS.items():
        assert re.match("ValueError: " + message, outcomes[fmt]), (fmt, outcomes[fmt])


def test_a_stale_canonical_flag_is_not_trusted(issue):
    graph = issue[2].copy()
    assert graph.has_canonical_format  # scipy caches the answer
    row = slice(graph.indptr[0], graph.indptr[1])
    graph.indices[row] = graph.indices[row][::-1].copy()
    graph.data[row] = graph.data[row][::-1].copy()
    checked = check_graph(graph)
    assert checked is not graph and checked.has_sorted_indices
    assert np.all(np.diff(checked.indices[checked.indptr[0] : checked.indptr[1]]) > 0)
    assert (checked != issue[2]).nnz == 0


def test_index_arrays_of_another_dtype_are_converted_not_passed_on(issue):
    graph = issue[2].copy()
    graph.indices, graph.indptr = graph.indices.astype(np.uint16), graph.indptr.astype(np.uint16)
    checked = check_graph(graph)
    assert checked is not graph and checked.indices.dtype == checked.indptr.dtype == np.int32
    assert (checked != issue[2]).nnz == 0


def test_weights_that_float32_cannot_hold_are_refused(issue):
    """float64 weights below float32's range used to become 0: every edge dropped, no warning."""
    graph = issue[2].astype(np.float64)
    tiny = graph.copy()
    tiny.data *= 1e-300
    with pytest.raises(ValueError, match=r"positive edge weight\(s\) below float32's smallest positive value"):
        FastProp().fit(issue[0], issue[1], graph=tiny)
    huge = graph.copy()
    huge.data[0] = 1e39
    with pytest.raises(ValueError, match=r"1 edge weight\(s\) above float32's largest value"):
        check_graph(huge)
    with pytest.raises(ValueError, match=r"1 NaN or infinite edge weight\(s\), e.g. nan"):
        check_graph(sp.csr_matrix(np.array([[0, np.nan], [1.0, 0]])))


def test_checked_graph_keeps_the_weights(issue):
    graph = issue[2].astype(np.float64)
    graph.data *= 1e-40  # float32 subnormals: kept, not dropped
    checked = check_graph(graph)
    assert checked.nnz == graph.nnz and checked.data.min() > 0


# ------------------------------------------------ 3. corrupt or hostile files


def _save_graph_file(path, graph, *, compressed=False):
    save = np.savez_compressed if compressed else np.savez
    save(path, format=np.array("csr"), shape=np.array(graph.shape), indptr=graph.indptr, indices=graph.indices,
         data=graph.data)


def _flip_byte(path, offset_from_end):
    content = bytearray(path.read_bytes())
    content[-offset_from_end] ^= 0xFF
    path.write_bytes(bytes(content))


def _member_offset(path, member):
    """Where the stored bytes of ``member`` begin in the zip file."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    content = path.read_bytes()
    name_length, extra_length = np.frombuffer(content[info.header_offset + 26 : info.header_offset + 30], "<u2")
    return info.header_offset + 30 + int(name_length) + int(extra_length), info.compress_size


def test_corrupt_members_are_one_value_error_naming_the_file(issue, tmp_path):
    """A bad CRC raised zipfile.BadZipFile, a bad deflate stream zlib.error."""
    stored, deflated = tmp_path / "stored.npz", tmp_path / "deflated.npz"
    _save_graph_file(stored, issue[2])
    _save_graph_file(deflated, issue[2], compressed=True)
    content = bytearray(stored.read_bytes())
    start, size = _member_offset(stored, "data.npy")
    content[start + size - 7] ^= 0xFF  # a weight's byte: only the CRC notices
    stored.write_bytes(bytes(content))
    with pytest.raises(ValueError, match=r"stored.npz: array 'data' cannot be read \(zipfile.BadZipFile: Bad CRC-32"):
        load_graph(stored)
    content = bytearray(deflated.read_bytes())
    start, size = _member_offset(deflated, "indices.npy")
    content[start : start + size] = bytes(size)  # zeros: not a deflate stream
    deflated.write_bytes(bytes(content))
    with pytest.raises(ValueError, match=r"deflated.npz: array 'indices' cannot be read \((zlib.error|zipfile.Bad)"):
        load_graph(deflated)


def _npy_bytes(shape, dtype, body):
    import io

    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(stream, {"descr": np.dtype(dtype).str, "fortran_order": False,
                                                  "shape": shape})
    return stream.getvalue() + body


def _write_zip(path, members, compression=0):
    import zipfile

    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name, content in members.items():
            archive.writestr(f"{name}.npy", content)


def _declare_size(path, member, size):
    """Make the zip directory claim ``size`` uncompressed bytes for ``member``."""
    content = bytearray(path.read_bytes())
    entry = content.index(b"PK\x01\x02" + bytes(0), 0)
    while not content[entry + 46 : entry + 46 + len(member)] == member.encode():
        entry = content.index(b"PK\x01\x02", entry + 4)
    content[entry + 24 : entry + 28] = np.uint32(size).tobytes()
    path.write_bytes(bytes(content))


def test_decompression_bombs_are_refused_before_anything_is_allocated(tmp_path):
    """A 1 MB file declaring a 500M-float member drove memory to 2 GB before it failed."""
    import tracemalloc
    import zipfile

    small = {"format": _npy_bytes((), "<U3", "csr".encode("utf-32-le")),
             "shape": _npy_bytes((2,), "<i8", np.array([10, 10], "<i8").tobytes())}
    lying_header = tmp_path / "header.npz"
    _write_zip(lying_header, {**small, "indptr": _npy_bytes((11,), "<i8", bytes(88)),
                              "indices": _npy_bytes((0,), "<i4", b""),
                              "data": _npy_bytes((500_000_000,), "<f4", bytes(2**20))})
    lying_directory = tmp_path / "directory.npz"
    _write_zip(lying_directory, {"X": _npy_bytes((500_000_000,), "<f4", bytes(2**20))}, zipfile.ZIP_DEFLATED)
    _declare_size(lying_directory, "X.npy", 2_000_000_128)
    lying_shape = tmp_path / "shape.npz"  # consistent members, but indptr says 10 edges and indices has 10M
    _write_zip(lying_shape, {**small, "indptr": _npy_bytes((11,), "<i8", np.arange(11, dtype="<i8").tobytes()),
                             "indices": _npy_bytes((10_000_000,), "<i4", bytes(40_000_000)),
                             "data": _npy_bytes((10,), "<f4", bytes(40))}, zipfile.ZIP_DEFLATED)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"header.npz: array 'data' declares shape \(500000000,\) of float32 "
                                             r"\(1.9 GB\) but the archive gives it 1.0 MB"):
            load_graph(lying_header)
        with pytest.raises(ValueError, match=r"directory.npz: array 'X' claims 1.9 GB from .* more than its "
                                             "compression can hold"):
            load_embeddings(lying_directory)
        with pytest.raises(ValueError, match=r"shape.npz: array 'indices' has shape \(10000000,\) .* say \(10,\)"):
            load_graph(lying_shape)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20


def test_object_arrays_and_text_files_are_refused_without_a_pickle_hint(tmp_path, issue):
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    text = tmp_path / "labels.npy"
    text.write_text("0\n1\n-1\n")
    archive = tmp_path / "objects.npz"
    np.savez(archive, X=np.array([None, 1], dtype=object), shape=np.array([2, 2]))
    cases = [(lambda: load_embeddings(objects), r"objects.npy holds Python objects"),
             (lambda: load_embeddings(text), r"labels.npy: is not a NumPy .npy or .npz file"),
             (lambda: load_embeddings(archive), r"objects.npz: array 'X' holds Python objects")]
    for load, message in cases:
        with pytest.raises(ValueError, match=message) as raised:
            load()
        assert "allow_pickle" not in str(raised.value) and "pickle.load" not in str(raised.value)


def test_truncated_npy_is_refused(tmp_path):
    path = tmp_path / "X.npy"
    np.save(path, np.ones((100, 4), dtype=np.float32))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match=r"X.npy declares an array of shape \(100, 4\) of float32 .* but holds"):
        load_embeddings(path)


def test_cli_reports_a_corrupt_graph_in_one_line(issue, tmp_path, capsys):
    from fastprop.cli import main

    X, y, graph = issue
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    path = tmp_path / "g.npz"
    _save_graph_file(path, graph)
    content = bytearray(path.read_bytes())
    start, size = _member_offset(path, "indices.npy")
    content[start + size - 3] ^= 0xFF
    path.write_bytes(bytes(content))
    status = main(["propagate", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
                   "--graph", str(path), "--out", str(tmp_path / "r.npz")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert err.startswith(f"fastprop: error: --graph {path}: array 'indices' cannot be read (zipfile.BadZipFile")
    assert not (tmp_path / "r.npz").exists()


# ------------------------------------------------ 2. finite input, finite output


def _outputs(model):
    """The fit's outputs; ``confnet_confidence_`` only where ConfNet ran (else it is NaN throughout, by design)."""
    names = ["confidence_", "label_distributions_", "multiview_confidence_", "view_count_", "transduction_"]
    if model.n_iter_ > 0:
        names.append("confnet_confidence_")
    else:
        assert np.isnan(model.confnet_confidence_).all()
    return {name: getattr(model, name) for name in names}


@pytest.mark.parametrize("confidence", ["auto", "both"])
def test_huge_finite_embeddings_give_finite_output(issue, confidence):
    """X * 1e37 gave NaN in 198 of 200 confidences, with only a RuntimeWarning."""
    X, y, _ = issue
    reference = FastProp(random_state=0, confidence=confidence).fit(X, y)
    for huge in ((X * 1e37).astype(np.float32), X.astype(np.float64) * 1e300):
        model = FastProp(random_state=0, confidence=confidence).fit(huge, y)
        for name, values in _outputs(model).items():
            assert np.isfinite(values).all(), name
        assert np.array_equal(model.transduction_, reference.transduction_)
        np.testing.assert_allclose(model.confidence_, reference.confidence_, atol=1e-4)


@pytest.mark.parametrize("confidence", ["auto", "both"])
@pytest.mark.parametrize("unit_rows", [False, True])
@pytest.mark.parametrize("exponent", [2, 100, -100])
def test_rows_are_rescaled_exactly(issue, exponent, unit_rows, confidence):
    """The rescaling is by powers of two: a fit on X * 2**k is the fit on X, bit for bit.

    Unit rows (as embeddings usually come) too: they are used as they are, and their multiples were
    scaled back by 1 / norm, not by 2**-k (4 labels of 3,000 differed; found by fuzzing).
    """
    X, y, _ = issue
    if unit_rows:
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
    reference = FastProp(random_state=0, confidence=confidence).fit(X, y)
    model = FastProp(random_state=0, confidence=confidence).fit(X * np.float32(2.0**exponent), y)
    for name, values in _outputs(model).items():
        assert np.array_equal(values, _outputs(reference)[name]), name


def test_cli_never_writes_nan(issue, tmp_path, capsys):
    from fastprop.cli import main

    X, y, _ = issue
    np.save(tmp_path / "X.npy", (X * 1e37).astype(np.float32))
    np.save(tmp_path / "y.npy", y)
    status = main(["propagate", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
                   "--out", str(tmp_path / "r.npz"), "--csv", str(tmp_path / "r.csv")])
    assert status == 0, capsys.readouterr().err
    assert "nan" not in (tmp_path / "r.csv").read_text().lower()
    with np.load(tmp_path / "r.npz") as result:
        assert np.isfinite(result["confidence"]).all() and np.isfinite(result["label_distributions"]).all()


# ------------------------------------------------ 4. fits from several threads

THREADS_SCRIPT = """
import threading, numba
from fastprop.baselines import SGC

def fits():
    model = fastprop.FastProp(random_state=0).fit(X, y, graph=G)
    built = fastprop.build_knn_graph(X, 10, random_state=0)
    sgc = SGC(n_neighbors=10).fit(X, y)
    return [model.confidence_, model.label_distributions_, built.data, sgc.label_distributions_]

alone = fits()
results, errors = [], []

def work():
    try:
        for _ in range(2):
            results.append(fits())
    except BaseException as error:
        errors.append(error)

threads = [threading.Thread(target=work) for _ in range(2)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
same = all(np.array_equal(a, b) for result in results for a, b in zip(result, alone))
print(numba.threading_layer(), len(results), same, errors)
"""


@pytest.mark.parametrize("layer", ["workqueue", "default"])
def test_fits_from_two_threads(layer):
    """Under the workqueue layer, two threads' fits aborted the process (SIGABRT)."""
    env = {"NUMBA_NUM_THREADS": "2"}
    if layer != "default":
        env["NUMBA_THREADING_LAYER"] = layer
    result = run_python(THREADS_SCRIPT, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    chosen, count, same, errors = result.stdout.split(maxsplit=3)
    assert (count, same, errors.strip()) == ("4", "True", "[]")
    if layer != "default":
        assert chosen == layer


# ------------------------------------------------ 5. signals and temporary files

#: Runs the CLI with np.savez (every result and graph writer) or the array reader stalled halfway.
STALLED_CLI = """
import sys, time, zipfile
import numpy as np
import fastprop._files
from fastprop.cli import main

def stall_writing(stream, **arrays):
    stream.write(b"half a file")
    stream.flush()
    print("stalled", flush=True)
    time.sleep(60)

read_data = fastprop._files._read_data

def stall_reading_a_zip_member(stream, *args):
    if isinstance(stream, zipfile.ZipExtFile):
        print("stalled", flush=True)
        time.sleep(60)
    return read_data(stream, *args)

if sys.argv[1] == "write":
    np.savez = stall_writing
else:
    fastprop._files._read_data = stall_reading_a_zip_member
sys.exit(main(sys.argv[2:]))
"""


def _start(script, *args):
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)


@pytest.fixture
def cli_inputs(issue, tmp_path):
    X, y, graph = issue
    inputs = tmp_path / "in"
    inputs.mkdir()
    np.save(inputs / "X.npy", X)
    np.save(inputs / "y.npy", y)
    save_graph(inputs / "g.npz", graph)
    (tmp_path / "out").mkdir()
    return inputs, tmp_path / "out"


COMMANDS = {
    "graph": ["graph", "--features", "{in}/X.npy", "--out", "{out}/g.npz", "--neighbors", "10"],
    "propagate": ["propagate", "--features", "{in}/X.npy", "--labels", "{in}/y.npy", "--graph", "{in}/g.npz",
                  "--out", "{out}/r.npz", "--csv", "{out}/r.csv"],
}


def _command(name, inputs, out):
    return [arg.format(**{"in": inputs, "out": out}) for arg in COMMANDS[name]]


@pytest.mark.parametrize("signal_name, status, word", [("SIGTERM", 143, "terminated"),
                                                       ("SIGINT", 130, "interrupted")])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_signal_mid_write_leaves_no_file(cli_inputs, command, signal_name, status, word):
    """SIGTERM during save_graph left <path>.tmp-<pid>.npz (matched by *.npz), propagate .r.npz.*.tmp."""
    import glob
    import signal

    inputs, out = cli_inputs
    process = _start(STALLED_CLI, "write", *_command(command, inputs, out))
    try:
        assert process.stdout.readline() == "stalled\n", process.stderr.read()
        temporaries = os.listdir(out)
        assert len(temporaries) == 1 and temporaries[0].startswith(".") and temporaries[0].endswith(".tmp")
        assert glob.glob(str(out / "*.npz")) + glob.glob(str(out / "*.csv")) == []
        process.send_signal(getattr(signal, signal_name))
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == status
    assert err == f"fastprop: {word}; no partial file was written.\n"
    assert os.listdir(out) == []


def test_ctrl_c_while_a_zip_member_is_open_is_one_line(cli_inputs):
    import signal

    inputs, out = cli_inputs
    process = _start(STALLED_CLI, "read", *_command("propagate", inputs, out))
    try:
        assert process.stdout.readline() == "stalled\n", process.stderr.read()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert (process.returncode, err) == (130, "fastprop: interrupted; no partial file was written.\n")


@pytest.mark.parametrize("delay", [0.1, 0.5])
def test_ctrl_c_at_start_up_is_one_line(cli_inputs, delay):
    """A Ctrl-C while NumPy, SciPy and Numba were being imported printed a traceback.

    ``fastprop.cli`` itself imports only the standard library (20 ms); main() imports the rest
    (0.8 s on this machine), which is when the signal comes.
    """
    import signal
    import time

    inputs, out = cli_inputs
    process = _start("import sys; from fastprop.cli import main; "
                     "print('ready', *(name in sys.modules for name in ('numpy', 'scipy', 'numba')), flush=True); "
                     "sys.exit(main(sys.argv[1:]))", *_command("propagate", inputs, out))
    try:
        # nothing heavy imported yet: a Ctrl-C from here on reaches main()'s handler
        assert process.stdout.readline() == "ready False False False\n", process.stderr.read()
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert (process.returncode, err) == (130, "fastprop: interrupted; no partial file was written.\n"), err
    assert os.listdir(out) == []


def test_save_graph_names_the_target_and_leaves_nothing(issue, tmp_path, monkeypatch):
    """An unwritable directory raised an OSError naming the temporary file."""
    graph = issue[2]
    with pytest.raises(ValueError, match=r"cannot write '.*missing/g.npz': directory '.*missing' does not exist"):
        save_graph(tmp_path / "missing" / "g.npz", graph)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)  # a read-only target (root may write anywhere)
    with pytest.raises(PermissionError, match=r"cannot write '.*/g.npz': Permission denied"):
        save_graph(tmp_path / "g.npz", graph)
    assert os.listdir(tmp_path) == []


# ------------------------------------------------ 6. thresholds and labels


def test_validation_of_only_known_outliers_gives_a_finite_threshold(issue, tmp_path, capsys):
    """The threshold was inf, and the CLI printed 'confidence below inf'."""
    from fastprop.cli import main
    from fastprop.threshold import REJECT_ALL, OutlierThresholdWarning

    X, y, _ = issue
    indices = np.arange(10, 20)
    with pytest.warns(OutlierThresholdWarning, match="only known outliers"):
        model = FastProp(random_state=0).fit(X, y, validation=(indices, np.full(10, -1)))
    assert model.outlier_threshold_ == REJECT_ALL and 1.0 < REJECT_ALL < 1.0 + 1e-15
    assert np.all(model.transduction_[y == -1] == -1) and np.all(model.transduction_[:2] == [0, 1])
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "val.csv").write_text("index,label\n" + "".join(f"{i},-1\n" for i in indices))
    status = main(["propagate", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
                   "--validation", str(tmp_path / "val.csv"), "--out", str(tmp_path / "r.npz")])
    out = capsys.readouterr().out
    assert status == 0 and "inf" not in out
    assert "198 outliers (every unlabeled sample rejected: on the validation samples, rejecting all of them" in out
    # an outlier share that rounds to every unlabeled sample is said to be the cause, not a validation set
    status = main(["propagate", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
                   "--outlier-share", "0.999", "--out", str(tmp_path / "s.npz")])
    out = capsys.readouterr().out
    assert status == 0 and "every unlabeled sample rejected: --outlier-share 0.999 rounds to all of them" in out
    status = main(["propagate", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
                   "--outlier-share", "0.99999999999", "--out", str(tmp_path / "s.npz")])
    out = capsys.readouterr().out  # every digit: ":g" printed "1", out of the option's range
    assert status == 0 and "--outlier-share 0.99999999999 rounds to all of them" in out


@pytest.mark.parametrize("labels, message", [
    # 2**64 - 1 is -1 stored in uint64 (it became -1 and dropped a seed): named as the marker it was
    (np.array([2**64 - 1, 3], dtype=np.uint64), "y is uint64 and holds 18446744073709551615, which is what -1"),
    (np.array([2**63, 3], dtype=np.uint64), "y has label 9223372036854775808, outside int64"),
    (np.array([1e19, 3.0]), "y has label 1e+19, outside int64"),
])
def test_labels_outside_int64_are_refused(issue, labels, message):
    """A uint64 2**64 - 1 became -1 (a seed dropped); labels >= 2**63 read -9223372036854775808."""
    X, _, _ = issue
    y = (np.arange(200) % 2).astype(labels.dtype)  # every sample labeled: uint64 cannot hold -1
    y[:2] = labels
    with pytest.raises(ValueError, match=re.escape(message)):
        FastProp().fit(X, y)


@pytest.mark.parametrize("text", ["1_0", "\u0661", "3.0", "+3", "0x1"])
def test_cli_labels_are_plain_ascii_integers(issue, tmp_path, capsys, text):
    """The CLI read '1_0' as 10 and '١' (an Arabic-Indic one) as 1."""
    from fastprop.cli import main

    np.save(tmp_path / "X.npy", issue[0])
    (tmp_path / "y.txt").write_text("label\n0\n1\n" + text + "\n" + "-1\n" * 197, encoding="utf-8")
    status = main(["propagate", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.txt"),
                   "--out", str(tmp_path / "r.npz")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert f"line 4: {text!r} is not an integer label" in err


def test_cli_first_line_of_non_ascii_digits_is_no_header(issue, tmp_path, capsys):
    from fastprop.cli import main

    np.save(tmp_path / "X.npy", issue[0])
    np.save(tmp_path / "y.npy", issue[1])
    (tmp_path / "val.csv").write_text("\u0661\u0660,\u0660\n11,0\n", encoding="utf-8")
    status = main(["propagate", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
                   "--validation", str(tmp_path / "val.csv"), "--out", str(tmp_path / "r.npz")])
    assert status == 2 and "val.csv, line 1: expected 'index,label'" in capsys.readouterr().err


@pytest.mark.parametrize("option, value", [("--neighbors", "1_0"), ("--neighbors", "\u0661\u0660"),
                                           ("--outlier-threshold", "0_5"), ("--outlier-threshold", "nan")])
def test_cli_options_are_plain_ascii_numbers(tmp_path, capsys, option, value):
    from fastprop.cli import main

    status = main(["propagate", "--features", "X.npy", "--out", "r.npz", option, value])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and f"argument {option}: {value!r} is not" in err


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_verbose_must_be_a_bool(issue, value):
    with pytest.raises(ValueError, match=rf"verbose must be True or False, got {re.escape(repr(value))}"):
        FastProp(verbose=value).fit(issue[0], issue[1])


# ------------------------------------------------ 7. quiet data loss


@pytest.mark.parametrize("indices, similarities, n_samples, message", [
    ([[1], [0]], [[np.inf], [1.0]], None, r"similarities has 1 NaN or infinite value\(s\), e.g. inf"),
    ([[1], [0]], [[1e39], [1.0]], None, r"similarities has 1 value\(s\) above float32's largest value"),
    ([[1], [0]], [[1e-50], [1.0]], None, r"similarities has 1 positive value\(s\) below float32's smallest"),
    ([[1.7], [0.0]], [[0.5], [0.5]], None, r"indices must hold integer row numbers, got float64 with 1.7"),
    (np.array([[2**64 - 1], [0]], dtype=np.uint64), [[0.5], [0.5]], None, "indices must be smaller than"),
    ([[1], [0]], [[0.5], [0.5]], 5, r"n_samples=5 must equal the number of neighbour lists, len\(indices\) = 2"),
])
def test_knn_graph_from_lists_refuses_what_it_would_mangle(indices, similarities, n_samples, message):
    """It kept inf similarities, truncated float indices, and wrote past its arrays for n_samples > len."""
    with pytest.raises(ValueError, match=message):
        fastprop.knn_graph_from_lists(np.asarray(indices), np.asarray(similarities), n_samples)


def test_knn_graph_from_lists_accepts_integral_floats():
    graph = fastprop.knn_graph_from_lists(np.array([[1.0], [0.0]]), np.array([[0.5], [0.25]]))
    assert graph.toarray().tolist() == [[0.0, 0.5], [0.5, 0.0]]


# ------------------------------------------------ 8. baselines: bounded work, memory checked up front


@pytest.mark.parametrize("estimator, parameter, limit", [
    (baselines.LabelPropagation, "max_iter", 100_000),
    (baselines.LabelSpreading, "max_iter", 100_000),
    (baselines.SGC, "max_iter", 100_000),
    (baselines.SGC, "depth", 100),
    (baselines.CorrectAndSmooth, "max_iter", 100_000),
    (baselines.CorrectAndSmooth, "depth", 100),
    (baselines.CorrectAndSmooth, "n_propagation", 100_000),
    (baselines.GCN, "max_epochs", 100_000),
    (baselines.GAT, "max_epochs", 100_000),
    (baselines.GraphSAGE, "max_epochs", 100_000),
    (baselines.FastGCN, "max_epochs", 100_000),
    (baselines.PoissonLearning, "max_iter", 100_000),
], ids=lambda value: getattr(value, "__name__", str(value)))
def test_iteration_counts_and_depths_are_capped(issue, estimator, parameter, limit):
    """A huge max_iter or depth ran until killed."""
    X, y, graph = issue
    low = 0 if parameter == "depth" else 1
    with pytest.raises(ValueError, match=rf"{parameter}={10**9} is out of range; allowed: \[{low}, {limit}\]"):
        estimator(**{parameter: 10**9}).fit(X, y, graph=graph)


def test_an_impossible_hidden_layer_is_a_value_error_up_front(issue):
    """GCN(hidden=10**12) raised MemoryError from deep inside its initialisation."""
    X, y, graph = issue
    with pytest.raises(ValueError, match=r"GCN\(hidden=1000000000000\) on 200 samples x 8 features needs about "
                                         r"[\d,.]+ GiB of memory, more than this (machine's|container's memory limit)"):
        baselines.GCN(hidden=10**12).fit(X, y, graph=graph)


def test_an_impossible_knn_graph_is_a_value_error_up_front(issue, monkeypatch):
    import fastprop._validation.memory

    monkeypatch.setattr(fastprop._validation.memory, "physical_memory", lambda: 100_000)
    with pytest.raises(ValueError, match=r"a kNN graph with n_neighbors=150 on 200 samples needs about"):
        FastProp(n_neighbors=150).fit(issue[0], issue[1])
    monkeypatch.setattr(fastprop._validation.memory, "physical_memory", lambda: None)  # unknown: not checked
    assert fastprop.knn_search(issue[0], 150)[0].shape == (200, 150)


def test_a_ctrl_c_dropped_in_a_finaliser_during_start_up_still_interrupts(monkeypatch, capsys, tmp_path):
    """Python drops a KeyboardInterrupt raised in a finaliser ("Exception ignored in ..."): a Ctrl-C
    landing in one while NumPy/SciPy/Numba were imported let the command run to its end, exit 0."""
    import fastprop.cli as cli

    class Finaliser:
        def __del__(self):
            cli._on_sigint(2, None)  # what a Ctrl-C does, here where Python ignores the exception

    real_parser = cli.build_parser

    def parser_after_a_dropped_interrupt():
        Finaliser()
        return real_parser()

    monkeypatch.setattr(cli, "build_parser", parser_after_a_dropped_interrupt)
    out = tmp_path / "g.npz"
    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(20, 3)))
    status = cli.main(["graph", "--features", str(tmp_path / "X.npy"), "--out", str(out), "--neighbors", "3"])
    assert status == 130 and not out.exists()
    assert capsys.readouterr().err.endswith("fastprop: interrupted; no partial file was written.\n")


@pytest.mark.parametrize("error", [ImportError("numpy._core.multiarray failed to import"),
                                   SystemError("initialization of _lbfgsb raised unreported exception")])
def test_a_ctrl_c_that_fails_an_import_still_interrupts(monkeypatch, capsys, error):
    """A Ctrl-C inside a C extension's initialisation reaches main() as the import error it caused:
    the command printed that traceback and exited 1 (seen twice in ~55 runs of the start-up test)."""
    import fastprop.cli as cli

    def parser_whose_import_a_ctrl_c_broke():
        try:
            cli._on_sigint(2, None)
        except KeyboardInterrupt:
            raise error from None

    monkeypatch.setattr(cli, "build_parser", parser_whose_import_a_ctrl_c_broke)
    assert cli.main(["graph"]) == 130
    assert capsys.readouterr().err == "fastprop: interrupted; no partial file was written.\n"


def test_an_error_with_no_ctrl_c_is_not_taken_for_one(monkeypatch):
    import fastprop.cli as cli

    def broken_parser():
        raise ImportError("a missing dependency")

    monkeypatch.setattr(cli, "build_parser", broken_parser)
    with pytest.raises(ImportError, match="a missing dependency"):
        cli.main(["graph"])
