"""Inputs a fifth fuzzing round found mishandled: files, the command line, labels and settings.

Each used to crash (a zero-width dtype allocating terabytes), or to give a
silently wrong result (a row, a label or a link lost), or an unclear error;
each is now the right answer or a ValueError that says what was wrong.
"""

import io
import os
import pickle
import re
import stat
import struct
import zipfile

import numpy as np
import pytest
from cli_support import run, seeded_pool

from fastprop import FastProp, build_knn_graph, load_graph, refine_confidence
from fastprop._files import read_npy, write_atomically
from fastprop.baselines import SGC
from fastprop.cli._label_files import load_labels
from fastprop.cli._tables import MIN_INDEX_ROWS, read_feature_table
from fastprop.evaluation.benchmark import GRAPH_ROW, format_markdown, run_method, run_table
from fastprop.evaluation.datasets import make_noisy_mixture
from fastprop.evaluation.protocol import make_noisy_task


def _npy_header(descr, shape):
    """A version 1.0 ``.npy`` header declaring ``descr`` (a Python literal) and ``shape``, without data."""
    text = f"{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}".encode("latin1")
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def _npy_bytes(array):
    stream = io.BytesIO()
    np.save(stream, array)
    return stream.getvalue()


# ------------------------------------------------ array files


@pytest.mark.parametrize("descr, shape, data, message", [
    ("'<U0'", "(1000000000000,)", b"", "items of dtype <U0"),  # declared size 0 bytes: it allocated 3.6 TiB
    ("'|S0'", "(5,)", b"", "items of dtype |S0"),
    ("('<f8', (4,))", "(3,)", b"\0" * 96, "items of dtype ('<f8', (4,))"),
    ("'<f8'", "(-2, 3)", b"", "negative dimension"),
], ids=["zero-width text", "zero-width bytes", "sub-array", "negative shape"])
def test_npy_files_of_zero_width_sub_array_or_negative_shapes_are_refused(tmp_path, descr, shape, data, message):
    path = tmp_path / "a.npy"
    path.write_bytes(_npy_header(descr, shape) + data)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_npy(path)


def test_a_graph_file_with_a_zero_width_member_is_refused_before_any_allocation(tmp_path):
    path = tmp_path / "g.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("shape.npy", _npy_bytes(np.array([10**12 - 1] * 2)))
        archive.writestr("indptr.npy", _npy_header("'<U0'", f"({10**12},)"))
        archive.writestr("indices.npy", _npy_bytes(np.array([], np.int32)))
        archive.writestr("data.npy", _npy_bytes(np.array([], np.float32)))
    with pytest.raises(ValueError, match="'indptr' has items of dtype <U0"):
        load_graph(path)


# ------------------------------------------------ outputs


def test_an_output_that_is_a_link_writes_the_linked_file_and_keeps_the_link(tmp_path):
    target, link = tmp_path / "target.npz", tmp_path / "link.npz"
    target.write_bytes(b"old")
    link.symlink_to(target.name)
    write_atomically([(link, lambda stream: stream.write(b"new"))])
    assert link.is_symlink() and target.read_bytes() == b"new"


# Never a real device or stream here (/dev/null, /dev/stdout): a regression would replace it for the whole
# machine. A FIFO of our own, and streams of this process that resolve to a file of our own, test the same.


def test_a_fifo_output_is_refused_not_replaced(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    with pytest.raises(ValueError, match="is not a regular file"):
        write_atomically([(path, lambda stream: stream.write(b"x"))])
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


@pytest.mark.parametrize("prefix", ["/proc/self/fd/", "/dev/fd/"])
def test_a_stream_of_the_process_is_refused_even_when_it_is_a_file(tmp_path, prefix):
    with open(tmp_path / "redirected.txt", "wb") as stream:  # what /dev/stdout is under `> file`
        with pytest.raises(ValueError, match="is a stream of this process"):
            write_atomically([(f"{prefix}{stream.fileno()}", lambda out: out.write(b"x"))])
    assert (tmp_path / "redirected.txt").read_bytes() == b""


def test_a_link_loop_is_refused_not_replaced(tmp_path):
    loop = tmp_path / "loop.npz"
    loop.symlink_to(loop.name)
    with pytest.raises(ValueError, match="symbolic links"):
        write_atomically([(loop, lambda stream: stream.write(b"x"))])
    assert loop.is_symlink()


def test_an_output_in_a_directory_under_dev_is_an_ordinary_file(tmp_path):
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    path = f"/dev/shm/fastprop-test-{os.getpid()}.npz"
    try:
        write_atomically([(path, lambda stream: stream.write(b"x"))])
        assert open(path, "rb").read() == b"x"
    finally:
        if os.path.exists(path):
            os.remove(path)


def test_the_command_line_refuses_a_fifo_output_before_any_work(tmp_path, capsys):
    X, _, seeds = seeded_pool(120, 6, 3, 0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", seeds)
    os.mkfifo(tmp_path / "out.npz")
    status, out, err = run(["propagate", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.npy",
                            "--out", tmp_path / "out.npz"], capsys)
    assert status == 2 and out == "" and "--out" in err and "is not a regular file" in err


def test_a_path_too_long_for_the_file_system_names_its_option(tmp_path, capsys):
    status, out, err = run(["graph", "--features", tmp_path / ("a" * 5000), "--out", tmp_path / "g.npz"], capsys)
    assert status == 2 and err.startswith("fastprop: error: --features ") and "too long" in err


# ------------------------------------------------ text files


@pytest.mark.parametrize("first, message", [
    ("nan,1,2,3", None),  # a missing value, not a name: the row stays, and its NaN is refused later
    ("NA,1,2,3", "line 1, column '1': 'NA' is not a number"),
    ("1_0,1,2,3", "line 1, column '1': '1_0' is not a number"),
    ("\u22121,1,2,3", "is not a number"),  # a Unicode minus
])
def test_a_first_row_with_a_missing_or_malformed_value_is_a_sample_not_a_header(first, message):
    lines = [first, "1,2,3,4", "5,6,7,8"]
    if message is None:
        X, _ = read_feature_table(lines)
        assert X.shape == (3, 4) and np.isnan(X[0, 0])
    else:
        with pytest.raises(ValueError, match=message):
            read_feature_table(lines)


@pytest.mark.parametrize("cell", ["1_0", "\u0661"])
def test_feature_cells_python_would_read_as_numbers_are_refused(cell):
    with pytest.raises(ValueError, match=f"line 2, column '2': '{cell}' is not a number"):
        read_feature_table(["1.5,2", f"3,{cell}"])


def test_pandas_header_of_an_unnamed_frame_is_a_header():
    X, _ = read_feature_table(["0,1,2,3", "0.5,0.25,1,2", "3,4,5,6"])
    assert X.tolist() == [[0.5, 0.25, 1, 2], [3, 4, 5, 6]]
    with pytest.raises(ValueError, match="column 1 has no name.*to_csv"):  # with its unnamed index column
        read_feature_table([",0,1,2,3", "0,0.5,0.25,1,2"])


@pytest.mark.parametrize("fmt", ["%.18e", "%.6g", "%.3e"])
def test_every_row_numpy_savetxt_writes_is_a_sample(fmt):
    X = np.random.default_rng(0).normal(scale=1e-4, size=(6, 3))
    stream = io.StringIO()
    np.savetxt(stream, X, delimiter=",", fmt=fmt)
    read, _ = read_feature_table(stream.getvalue().splitlines())
    assert read.shape == (6, 3)
    np.testing.assert_allclose(read, X, rtol=1e-3)


def test_header_names_without_letters_are_names():
    X, _ = read_feature_table(["#1,#2", "1e-05,2"])
    assert X.tolist() == [[1e-05, 2.0]]


def test_a_csv_with_nan_in_its_first_row_says_so_on_the_command_line(tmp_path, capsys):
    X = np.random.default_rng(0).normal(size=(60, 4))
    X[0, 0] = np.nan
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", fmt="%.6g")
    status, out, err = run(["graph", "--features", tmp_path / "x.csv", "--out", tmp_path / "g.npz",
                            "--neighbors", 5], capsys)
    assert status == 2 and "NaN" in err and "row 0" in err, err


def test_a_label_holding_a_form_feed_shifts_no_line(tmp_path, capsys):
    X, _, seeds = seeded_pool(120, 6, 3, 0)
    np.save(tmp_path / "X.npy", X)
    names = np.array(["ant", "bee", "cat", "dog\x0cfox"])
    lines = ["" if seed < 0 else names[seed] for seed in seeds]
    (tmp_path / "y.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    status, _, err = run(["propagate", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.txt",
                          "--unlabeled", "", "--out", tmp_path / "r.npz", "--neighbors", 10], capsys)
    assert status == 0, err
    with np.load(tmp_path / "r.npz") as result:
        assert sorted(result["classes"].tolist()) == sorted(names.tolist())
        labeled = seeds >= 0
        assert result["labels"][labeled].tolist() == names[seeds[labeled]].tolist()


def test_an_unlabeled_marker_no_label_carries_is_an_error(tmp_path, capsys):
    X, _, seeds = seeded_pool(120, 6, 3, 0)
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "y.txt").write_text("".join(f"{seed}\n" for seed in seeds))
    status, out, err = run(["propagate", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.txt",
                            "--unlabeled", "unknown", "--out", tmp_path / "r.npz"], capsys)
    assert status == 2 and out == "" and "no sample has the label 'unknown'" in err
    assert "meta-estimator" not in err  # the library's warning for the same thing is not printed first
    assert not (tmp_path / "r.npz").exists()


def test_a_validation_header_after_blank_lines_is_read_as_the_header(tmp_path, capsys):
    X, truth, seeds = seeded_pool(120, 6, 3, 0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", seeds)
    unlabeled = np.flatnonzero(seeds < 0)[:12]
    (tmp_path / "v.csv").write_text("\n\nlabel,index\n" + "".join(f"{truth[i]},{i}\n" for i in unlabeled))
    status, out, err = run(["propagate", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.npy",
                            "--validation", tmp_path / "v.csv", "--out", tmp_path / "r.npz", "--neighbors", 10],
                           capsys)
    assert status == 0 and "threshold rule: validation" in out, err
    # read as label,index: the same threshold as the pairs given in the default order
    (tmp_path / "w.csv").write_text("".join(f"{i},{truth[i]}\n" for i in unlabeled))
    status, _, err = run(["propagate", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.npy",
                          "--validation", tmp_path / "w.csv", "--out", tmp_path / "s.npz", "--neighbors", 10],
                         capsys)
    assert status == 0, err
    with np.load(tmp_path / "r.npz") as first, np.load(tmp_path / "s.npz") as second:
        assert first["outlier_threshold"] == second["outlier_threshold"]
        np.testing.assert_array_equal(first["labels"], second["labels"])


# ------------------------------------------------ the Python interface


def test_refine_confidence_refuses_a_zero_one_mask_of_integers(two_clusters):
    X, y, graph = two_clusters
    distributions = SGC(n_neighbors=10).fit(X, y, graph=graph).label_distributions_
    as_booleans = refine_confidence(graph, distributions, labeled=y >= 0, random_state=0)
    as_indices = refine_confidence(graph, distributions, labeled=np.flatnonzero(y >= 0), random_state=0)
    np.testing.assert_array_equal(as_booleans, as_indices)
    with pytest.raises(ValueError, match="0/1 mask of integers"):
        refine_confidence(graph, distributions, labeled=(y >= 0).astype(int), random_state=0)


@pytest.mark.parametrize("setting", ["min_gain", "eta", "predictor_l2", "outlier_share", "feature_energy"])
@pytest.mark.parametrize("value", [10**20, 10**400, -(10**400)], ids=["1e20", "1e400", "-1e400"])
def test_real_settings_given_python_integers_past_uint64_are_checked_as_numbers(two_clusters, setting, value):
    X, y, graph = two_clusters
    finite = abs(value) < 1e300
    # eta <= 0.5, outlier_share and feature_energy <= 1: out of range; min_gain and predictor_l2 have no upper end
    if finite and setting in ("min_gain", "predictor_l2"):
        FastProp(n_neighbors=10, random_state=0, **{setting: value}).fit(X, y, graph=graph)
        return
    # an infinite one is named by its size: a 40-character prefix of its digits read as a finite number
    refused = "out of range" if finite else "must be finite, got (an|a negative) integer of about 401 digits"
    with pytest.raises(ValueError, match=refused):
        FastProp(n_neighbors=10, random_state=0, **{setting: value}).fit(X, y, graph=graph)


def test_an_integer_setting_past_python_s_printing_limit_is_named_by_its_size(two_clusters):
    """repr() refuses integers past 4,300 digits (a review): the message must not depend on it."""
    X, y, graph = two_clusters
    with pytest.raises(ValueError, match="min_gain must be finite, got an integer of about 5001 digits"):
        FastProp(min_gain=10**5000).fit(X, y, graph=graph)


def test_predict_keeps_the_unlabeled_marker_of_the_fit(two_clusters):
    X, y, graph = two_clusters
    model = FastProp(n_neighbors=10, random_state=0, outlier_threshold=1.0).fit(X, y, graph=graph)
    model.set_params(unlabeled="x")
    assert set(model.predict(X[3:8]).tolist()) == {-1}
    assert model.score(X[3:8], np.full(5, -1)) == 1.0
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict(X[3:8]), model.predict(X[3:8]))


def test_validation_labels_turned_into_text_by_numpy_are_explained(two_clusters):
    X, y, graph = two_clusters
    named = np.array(["" if value < 0 else value for value in y], dtype=object)
    with pytest.raises(ValueError, match="dtype=object"):
        FastProp(unlabeled="", n_neighbors=10).fit(X, named, graph=graph, validation=([50, 150], ["", 1]))
    with pytest.raises(ValueError, match=r"'cat' are not among the classes of the fit's y \(0, 1\); use -1 for "
                                         r"samples of no known class\.$"):  # text that is no number: no NumPy hint
        FastProp(n_neighbors=10).fit(X, y, graph=graph, validation=([50, 150], ["cat", "cat"]))
    model = FastProp(unlabeled="", n_neighbors=10, random_state=0).fit(
        X, named, graph=graph, validation=([50, 150], np.array(["", 1], dtype=object)))
    assert model.classes_.tolist() == [0, 1]


def test_nan_for_a_missing_label_is_explained(two_clusters):
    X, y, graph = two_clusters
    names = np.array([np.nan if value < 0 else "ab"[value] for value in y], dtype=object)
    with pytest.raises(ValueError, match=r"A NaN or NA is a label here.*unlabeled=None.*fillna\(''\)"):
        FastProp(unlabeled="").fit(X, names, graph=graph)
    # None marks missing labels, NaN among them (pandas 3 stores a None of a column of names so)
    model = FastProp(unlabeled=None, n_neighbors=10, random_state=0).fit(X, names, graph=graph)
    assert model.classes_.tolist() == ["a", "b"] and model.labeled_.sum() == (y >= 0).sum()


def test_a_masked_array_with_masked_values_is_refused(two_clusters):
    X, y, graph = two_clusters
    masked = np.ma.masked_array(X, mask=np.zeros(X.shape, dtype=bool))
    reference = FastProp(n_neighbors=10, random_state=0).fit(X, y, graph=graph)
    np.testing.assert_array_equal(
        FastProp(n_neighbors=10, random_state=0).fit(masked, y, graph=graph).confidence_, reference.confidence_)
    masked[4, 2] = np.ma.masked
    with pytest.raises(ValueError, match="masked array with 1 masked value"):
        FastProp(n_neighbors=10).fit(masked, y, graph=graph)
    with pytest.raises(ValueError, match="masked array"):
        reference.predict(masked)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_minus_one_wrapped_by_an_unsigned_dtype_is_named(two_clusters, dtype):
    X, y, graph = two_clusters
    wrapped = y.astype(dtype)  # -1 becomes 255 / 65535: most samples would be seeds of that class
    with pytest.raises(ValueError, match=f"holds {np.iinfo(dtype).max}, which is what -1 becomes"):
        FastProp(n_neighbors=10).fit(X, wrapped, graph=graph)
    wrapped[:190] = 0  # a few wrapped markers are as wrong as many
    with pytest.raises(ValueError, match=f"holds {np.iinfo(dtype).max}"):
        FastProp(n_neighbors=10).fit(X, wrapped, graph=graph)
    top = np.iinfo(dtype).max  # a class of that value, with a marker of the dtype's own, is fine
    model = FastProp(n_neighbors=10, unlabeled=7, random_state=0).fit(
        X, np.where(y < 0, 7, np.where(y == 1, top, y)).astype(dtype), graph=graph)
    assert model.classes_.tolist() == [0, top]


def test_class_names_ending_in_nul_are_refused_not_merged(two_clusters):
    X, y, graph = two_clusters
    names = np.array(["" if value < 0 else ("a" if value == 0 else "a\0") for value in y], dtype=object)
    with pytest.raises(ValueError, match="class names in y end in a NUL"):
        FastProp(unlabeled="", n_neighbors=10).fit(X, names, graph=graph)
    plain = np.array(["" if value < 0 else "ab"[value] for value in y], dtype=object)
    with pytest.raises(ValueError, match="class names in validation labels end in a NUL"):
        FastProp(unlabeled="", n_neighbors=10).fit(X, plain, graph=graph,
                                                   validation=([50, 150], np.array(["a\0", "b"], dtype=object)))


# ------------------------------------------------ a sixth round: paths, tables, label files, the bench helpers


@pytest.mark.parametrize("name, message", [
    ("nodir/../X.npy", "directory 'nodir/..' does not exist"),  # the system refuses it; realpath's text did not
    ("", "names no file"),
    ("new.npz/", "names no file"),
])
def test_output_paths_the_system_would_refuse_are_refused_and_the_inputs_kept(tmp_path, monkeypatch, name, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "X.npy").write_bytes(b"features")
    with pytest.raises(ValueError, match=message):
        write_atomically([(name, lambda stream: stream.write(b"result"))])
    assert (tmp_path / "X.npy").read_bytes() == b"features"


def test_the_command_line_never_writes_over_its_input_through_a_missing_directory(tmp_path, capsys):
    X, _, seeds = seeded_pool(120, 6, 3, 0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", seeds)
    status, out, err = run(["propagate", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.npy",
                            "--out", tmp_path / "nodir" / ".." / "X.npy"], capsys)
    assert status == 2 and "does not exist" in err
    np.testing.assert_array_equal(np.load(tmp_path / "X.npy"), X)


def test_graph_files_named_by_bytes_round_trip(tmp_path, two_clusters):
    from fastprop import save_graph

    _, _, graph = two_clusters
    path = os.fsencode(tmp_path / "g.npz")
    save_graph(path, graph)
    assert (load_graph(path) != graph).nnz == 0


@pytest.mark.parametrize("first, second", [
    ("0,1,2", "0.5,0.25,1"), ("1,2", "0.5,0.25"), ("1,2,3,4", "0.5,0.25,1,2"),  # fractions below
    ("1,2,3", "3,4,5"), ("0,1", "0,1"), ("0", "0.5"),  # integers below: small integer features, or a header?
])
def test_few_or_one_based_column_numbers_are_refused_as_ambiguous(first, second):
    with pytest.raises(ValueError, match=f"line 1 reads '{first}': column numbers \\(a header\\) or a sample"):
        read_feature_table([first, second, second])


def test_numbers_naming_the_columns_above_fractions_are_refused_as_ambiguous():
    with pytest.raises(ValueError, match="holds increasing integers \\(400,410,420\\) above a line of fractions"):
        read_feature_table(["400,410,420", "0.5,0.25,0.125", "0.1,0.2,0.3"])
    X, _ = read_feature_table(["400,410,420", "3,2,1"])  # above integers: two samples
    assert X.tolist() == [[400, 410, 420], [3, 2, 1]]


def test_a_labels_column_name_among_values_is_no_header():
    lines = ["0.34,0.12,cat", "0.5,0.25,dog"]  # no header: following the old hint dropped the first sample
    with pytest.raises(ValueError, match="add a header line that names the columns, e.g. x1,x2,label"):
        read_feature_table(lines)
    with pytest.raises(ValueError, match="line 1 holds --label-column 'cat' among values, so it is a sample"):
        read_feature_table(lines, "cat")


def test_a_blank_line_between_rows_is_refused_not_skipped():
    X, _ = read_feature_table(["", "0.1", "0.2", ""])  # at the ends: nothing
    assert X.tolist() == [[0.1], [0.2]]
    with pytest.raises(ValueError, match="line 3 is blank between lines of data"):
        read_feature_table(["0.1", "0.2", "", "0.3"])  # one column: a sample whose value is missing


def test_numpy_savetxt_header_names_the_columns_for_the_label_column():
    X, labels = read_feature_table(["# y,x1,x2", "cat,0.5,0.25", "dog,1,2"], "y")
    assert X.tolist() == [[0.5, 0.25], [1, 2]] and labels.texts == ["cat", "dog"]


@pytest.mark.parametrize("first, message", [
    ("1.5,#DIV/0!,2", "line 1, column '2': '#DIV/0!' is not a number"),  # a first row with a number is a sample
    ("0..5,1,2", "line 1, column '1': '0..5' is not a number"),
])
def test_a_first_row_with_a_number_is_a_sample_whatever_else_it_holds(first, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        read_feature_table([first, "1,2,3", "4,5,6"])


@pytest.mark.parametrize("lines, message", [
    (["Unnamed: 0,0,1,2", "0,0.5,0.25,1", "1,3,4,5"], "column 1 is named 'Unnamed: 0'"),  # read back, saved again
    ([",0,1,2", "0,3,4,5", "1,6,7,8"], "column 1 has no name"),  # to_csv()'s own index, integer features
    ([",Unnamed: 0,0,1", "0,0,3,4", "1,1,6,7"], "column 1 has no name"),
])
def test_pandas_index_columns_are_named_whatever_the_features_hold(lines, message):
    expected = f"{message} in the header line: an index column.*to_csv\\(index=False\\).*row.names=FALSE"
    with pytest.raises(ValueError, match=expected):
        read_feature_table(lines)


@pytest.mark.parametrize("header, first, shuffled", [
    ("index,f0,f1", 0, False), ("id,f0,f1", 1, True), (None, 0, False), ("label,index,f0,f1", 0, True),
])
def test_a_named_index_column_is_refused_as_a_row_index(header, first, shuffled):
    # pandas' reset_index().to_csv(index=False) names it "index": it was read as a feature, and on the unit sphere it
    # outweighed the others (every unlabeled sample rejected; found by a README audit); shuffled or filtered frames
    # keep it out of order
    rng = np.random.default_rng(0)
    numbers = first + (rng.permutation(MIN_INDEX_ROWS) if shuffled else np.arange(MIN_INDEX_ROWS))
    labelled = header is not None and header.startswith("label")
    rows = [("a," if labelled else "") + f"{number},{rng.normal():.4f},{rng.normal():.4f}" for number in numbers]
    name = header.split(",")[1 if labelled else 0] if header else "1"  # without a header, columns are numbered
    with pytest.raises(ValueError, match=rf"feature column '{name}' numbers the rows: a row index.*index=False"):
        read_feature_table(([header] if header else []) + rows, "label" if labelled else None)
    X, _ = read_feature_table(([header] if header else []) + rows[: MIN_INDEX_ROWS - 1],
                              "label" if labelled else None)  # too few rows to tell
    assert X.shape == (MIN_INDEX_ROWS - 1, 3)
    counts = ["f0,f1"] + [f"{row % 3},{row}" for row in range(MIN_INDEX_ROWS)]  # the second column is not first
    assert read_feature_table(counts)[0].shape == (MIN_INDEX_ROWS, 2)
    # named as reset_index() names it, anywhere, with integers that do not number the rows (a filtered frame)
    filtered = ["f0,level_0,f1"] + [f"{rng.normal():.4f},{3 * row + 7},{rng.normal():.4f}" for row in range(10)]
    with pytest.raises(ValueError, match=r"feature column 'level_0' is named as pandas' reset_index\(\) names"):
        read_feature_table(filtered)


@pytest.mark.parametrize("lines", [
    ["0.5;0.25;1", "3;4;5"], ["3.45e-01 8.21e-01", "1 2"], ["1\t2", "3\t4"],
    ["x0;x1;x2", "0.5;0.25;1"], ["x0\tx1", "1\t2"], ["# x0 x1", "1 2"],  # with a header line
    ["x0;x1", "0,5;0,3"],  # decimal commas: the field counts differ
    ["1,5;2,5", "3,5;4,5"],
])
def test_another_separator_than_commas_is_named(lines):
    with pytest.raises(ValueError, match="separated by something other than commas"):
        read_feature_table(lines)


def test_a_labels_column_in_a_numbered_header_gets_the_label_column_hint():
    lines = ["0,1,2,label", "0.5,0.25,1,cat", "0.5,0.5,1,dog"]
    with pytest.raises(ValueError, match=r"'label' is not a number; .* \(if column 4 holds the labels, add a header "
                                         r"line .* and pass --label-column label\)\.$"):
        read_feature_table(lines)
    X, labels = read_feature_table(lines, "label")
    assert X.tolist() == [[0.5, 0.25, 1], [0.5, 0.5, 1]] and labels.texts == ["cat", "dog"]
    with pytest.raises(ValueError, match=r"'#DIV/0!' is not a number; every column but the labels must hold "
                                         r"numbers\.$"):  # a value, not a labels column: no hint
        read_feature_table(["1.5,#DIV/0!,2", "1,2,3"])


def test_numpy_savetxt_headers_of_label_and_validation_files_are_headers(tmp_path, capsys):
    X, truth, seeds = seeded_pool(120, 6, 3, 0)
    np.save(tmp_path / "X.npy", X)
    np.savetxt(tmp_path / "y.txt", seeds, fmt="%d", header="label")  # "# label" on line 1
    unlabeled = np.flatnonzero(seeds < 0)[:12]
    np.savetxt(tmp_path / "v.csv", np.c_[unlabeled, truth[unlabeled]], fmt="%d", delimiter=",", header="index,label")
    status, out, err = run(["propagate", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.txt",
                            "--validation", tmp_path / "v.csv", "--out", tmp_path / "r.npz", "--neighbors", 10],
                           capsys)
    assert status == 0 and f"propagated {np.count_nonzero(seeds >= 0)} seed labels" in out, err


@pytest.mark.parametrize("unlabeled_tail, extra, names", [(0, 2, False), (3, 1, False), (0, 1, True)])
def test_blank_lines_at_the_end_of_a_labels_file_are_named(tmp_path, capsys, unlabeled_tail, extra, names):
    X, _, seeds = seeded_pool(120, 6, 3, 0)
    np.save(tmp_path / "X.npy", X)
    texts = [("" if seed < 0 else "abcd"[seed]) if names else str(seed) for seed in seeds]
    texts[-unlabeled_tail:] = [""] * unlabeled_tail if unlabeled_tail else texts[-0:]
    assert texts[0] == ("a" if names else "0")  # a first label a header could be mistaken for
    (tmp_path / "y.txt").write_text("".join(f"{text}\n" for text in texts) + "\n" * extra)
    status, out, err = run(["propagate", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.txt",
                            "--unlabeled", "" if names else "-1", "--out", tmp_path / "r.npz"], capsys)
    assert status == 2 and f"holds {120 + extra} lines for 120 samples" in err and f"remove {extra} of" in err, err


@pytest.mark.parametrize("header, names", [("label", True), ("# label", True), ("species", False)])
def test_a_sure_header_line_and_an_unlabeled_last_sample_are_read_as_such(tmp_path, capsys, header, names):
    X, _, seeds = seeded_pool(120, 6, 3, 0)
    np.save(tmp_path / "X.npy", X)
    texts = ["" if seed < 0 else ("abcd"[seed] if names else str(seed)) for seed in seeds]
    assert texts[-1] == ""  # a header name we know, or any name above integer labels: surely a header
    (tmp_path / "y.txt").write_text(f"{header}\n" + "".join(f"{text}\n" for text in texts))
    status, out, err = run(["propagate", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.txt",
                            "--unlabeled", "", "--out", tmp_path / "r.npz", "--neighbors", 10], capsys)
    assert status == 0 and f"propagated {np.count_nonzero(seeds >= 0)} seed labels" in out, err


def test_run_method_refines_only_a_fit_of_its_own_method_and_task():
    X, pool = make_noisy_mixture(300, 4, n_features=8, random_state=0)
    task, other = (make_noisy_task(pool, 3, label_ratio=0.05, noise_ratio=0.1, random_state=seed) for seed in (0, 1))
    graph = build_knn_graph(task.subset(X), 10, random_state=0)
    poisson = run_method("PoissonLearning", X, task, graph, 0, return_model=True)
    with pytest.raises(ValueError, match="for 'SGC \\+ ConfNet' to refine; got 'PoissonLearning'"):
        run_method("SGC + ConfNet", X, task, graph, 0, fitted=poisson)
    elsewhere = run_method("SGC", X, other, build_knn_graph(other.subset(X), 10, random_state=1), 1,
                           return_model=True)
    with pytest.raises(ValueError, match="a SGC fit of another task"):
        run_method("SGC + ConfNet", X, task, graph, 0, fitted=elsewhere)
    own = run_method("SGC", X, task, graph, 0, return_model=True)
    refined = run_method("SGC + ConfNet", X, task, graph, 0, fitted=own)
    assert refined["accuracy"] == run_table(X, pool, 3, methods=["SGC", "SGC + ConfNet"], noise_ratios=[0.1],
                                            n_seeds=1, label_ratio=0.05, n_neighbors=10,
                                            warm_up=False)[1]["accuracy_mean"]
    with pytest.raises(ValueError, match="must not hold 'random_state'"):
        run_method("SGC", X, task, graph, 0, params={"random_state": 1})


def test_run_table_and_format_markdown_refuse_what_they_cannot_lay_out():
    X, pool = make_noisy_mixture(300, 4, n_features=8, random_state=0)
    with pytest.raises(ValueError, match="at least one value"):
        run_table(X, pool, 3, methods=(), warm_up=False)
    rows = run_table(X, pool, 3, methods=(name for name in ["SGC"]), noise_ratios=[0.1], n_seeds=1,
                     warm_up=False)
    assert [row["method"] for row in rows] == ["SGC", GRAPH_ROW]
    with pytest.raises(ValueError, match="a list of dicts"):
        format_markdown([1, 2])
    assert format_markdown(row for row in rows) == format_markdown(rows)  # a generator of rows, read once
    with pytest.raises(ValueError, match="no number"):
        format_markdown([{**rows[0], "seconds_mean": None}])
    with pytest.raises(ValueError, match="no number"):
        format_markdown([{**rows[0], "noise_ratio": "10%"}])


def test_an_output_name_ending_in_a_slash_is_refused_before_any_work(tmp_path, capsys):
    X, _, seeds = seeded_pool(120, 6, 3, 0)
    np.save(tmp_path / "X.npy", X)
    status, out, err = run(["graph", "--features", tmp_path / "X.npy", "--out", f"{tmp_path / 'g.npz'}/"], capsys)
    assert status == 2 and out == "" and err.startswith("fastprop: error: --out ") and "names no file" in err


# ------------------------------------------------ random tables and label files: read right, or refused


def _random_table(rng):
    """The lines of a random table as a writer would save it, and the values it holds."""
    n_rows, n_columns = int(rng.integers(1, 6)), int(rng.integers(1, 7))
    kind = rng.choice(["float", "int", "small", "onehot"])
    if kind == "float":
        X = np.round(rng.normal(size=(n_rows, n_columns)), 3)
    elif kind == "onehot":
        X = np.eye(max(n_rows, n_columns))[:n_rows, :n_columns]
    else:
        X = rng.integers(0, 4 if kind == "small" else 50, size=(n_rows, n_columns)).astype(float)
    style = rng.choice(["%g", "%d", "%.3e"])
    cells = [[f"{int(value)}" if style == "%d" and value.is_integer() else ("%g" if style == "%d" else style) % value
              for value in row] for row in X]
    header = rng.choice(["none", "names", "pandas", "savetxt", "index"])
    lines = {"none": [], "names": [",".join(f"x{j}" for j in range(n_columns))],
             "pandas": [",".join(str(j) for j in range(n_columns))],
             "savetxt": ["# " + ",".join(f"x{j}" for j in range(n_columns))],
             "index": ["," + ",".join(f"x{j}" for j in range(n_columns))]}[header]
    lines += [(f"{k}," if header == "index" else "") + ",".join(row) for k, row in enumerate(cells)]
    return (["", *lines, ""] if rng.random() < 0.2 else lines), X, header


def test_random_tables_are_read_right_or_refused():
    rng = np.random.default_rng(0)
    read = {}
    for _ in range(2000):
        lines, X, header = _random_table(rng)
        try:
            got, _ = read_feature_table(lines)
        except ValueError:
            assert header not in ("names", "savetxt"), lines  # a header of names is never refused
            continue
        np.testing.assert_allclose(got, X, atol=1e-2, err_msg=str(lines))
        read[str(header)] = read.get(str(header), 0) + 1
    # most files of each writer are read (pandas' 1-3 numbered columns are refused as ambiguous; index columns always)
    assert min(read["names"], read["savetxt"], read["none"]) > 300 and read["pandas"] > 150 and "index" not in read


def test_random_label_files_are_read_right_or_refused(tmp_path):
    rng = np.random.default_rng(1)
    read = 0
    for _ in range(400):
        n_samples, names = int(rng.integers(2, 9)), bool(rng.random() < 0.5)
        seeds = rng.integers(-1, 3, size=n_samples)
        seeds[0], seeds[-1] = max(seeds[0], 0), -1
        texts = [("" if seed < 0 else "abc"[seed]) if names else ("" if seed < 0 else str(seed)) for seed in seeds]
        header = rng.choice(["", "label", "species", "# label"])
        extra = int(rng.choice([0, 0, 1, 2]))
        path = tmp_path / "y.txt"
        path.write_text("".join(f"{text}\n" for text in ([header] if header else []) + texts) + "\n" * extra)
        marker = "" if names else "-1"
        try:
            labels = load_labels(path, n_samples, marker)
        except ValueError:
            continue
        assert extra == 0  # a blank line too many is never read as a sample
        expected = [text if text else marker for text in texts]
        assert [str(value) for value in labels.y.tolist()] == expected, path.read_text()
        read += 1
    assert read > 150
