import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
import scipy.sparse as sp

from fastprop import build_knn_graph, knn_search
from fastprop._labels import check_labels, check_validation
from fastprop._validation import check_features, check_graph


@pytest.mark.parametrize(
    "X, message",
    [
        (np.zeros(5), "must be 2-D"),
        (np.zeros((2, 3, 4)), "must be 2-D"),
        (np.array([["a", "b"], ["c", "d"]]), "must hold real numbers"),
        (np.zeros((0, 4)), "is empty"),
        (np.zeros((4, 0)), "is empty"),
        (np.array([[1 + 1j, 2], [3, 4]]), "Complex data not supported"),
        (np.array([[1.0, {"a": 1}], [3, 4]], dtype=object), "holds entries that are not numbers"),
        (sp.eye(5, format="csr"), "sparse matrix"),
    ],
)
def test_bad_features(X, message):
    with pytest.raises(ValueError, match=message):
        build_knn_graph(X, 1)


def test_object_arrays_of_numbers_are_numbers():
    X = np.random.default_rng(0).normal(size=(6, 3))
    assert_array_equal(check_features(X.astype(object)), check_features(X))


@pytest.mark.parametrize("rows_per_block", [65536, 3])
def test_non_finite_rows_are_counted_and_located(monkeypatch, rows_per_block):
    import fastprop._validation.features as features

    monkeypatch.setattr(features, "_ROWS_PER_BLOCK", rows_per_block)  # checked block by block
    X = np.ones((10, 3))
    X[4, 1] = np.nan
    X[7, 0] = np.inf
    with pytest.raises(ValueError, match=r"2 row\(s\) with NaN or infinite values, the first is row 4"):
        knn_search(X, 2)


def test_float64_overflow_is_explained():
    X = np.ones((5, 2))
    X[3, 0] = 1e300
    with pytest.raises(ValueError, match=r"1 row\(s\) with a value that overflows float32, the first is row 3"):
        check_features(X)
    indices, _ = knn_search(X, 2)  # cosine needs only directions: such rows are rescaled instead
    assert indices.shape == (5, 2)


def test_zero_rows_are_named():
    X = np.ones((10, 3))
    X[[2, 6]] = 0
    with pytest.raises(ValueError, match=r"2 all-zero row\(s\) \(rows 2, 6\)"):
        knn_search(X, 2)


@pytest.mark.parametrize("k, message", [(0, r"out of range"), (10, "largest allowed value is 9"),
                                        (2.5, "must be an integer"), (True, "must be an integer")])
def test_bad_n_neighbors(k, message):
    with pytest.raises(ValueError, match=message):
        knn_search(np.random.default_rng(0).normal(size=(10, 3)), k)


def test_bad_method_and_hnsw_parameters():
    X = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(ValueError, match="method='kd' is not supported"):
        knn_search(X, 2, method="kd")
    with pytest.raises(ValueError, match=r"M=1 is out of range"):
        knn_search(X, 2, method="hnsw", M=1)
    with pytest.raises(ValueError, match="random_state must be"):
        knn_search(X, 2, method="hnsw", random_state="seed")


def test_graph_checks():
    with pytest.raises(ValueError, match="must be square"):
        check_graph(sp.csr_matrix((3, 4)))
    with pytest.raises(ValueError, match="X has 5 samples"):
        check_graph(sp.eye(4, format="csr"), 5)
    with pytest.raises(ValueError, match="negative edge weight"):
        check_graph(sp.csr_matrix(np.array([[0, -1.0], [-1.0, 0]])))
    with pytest.raises(ValueError, match="NaN or infinite"):
        check_graph(sp.csr_matrix(np.array([[0, np.nan], [1.0, 0]])))
    cleaned = check_graph(np.array([[2.0, 1.0], [1.0, 0.0]]))
    assert cleaned.dtype == np.float32 and cleaned[0, 0] == 0 and cleaned.nnz == 2


def test_label_checks():
    with pytest.raises(ValueError, match="y has 3 labels but X has 4 samples"):
        check_labels([0, 1, -1], 4)
    with pytest.raises(ValueError, match="no labeled sample"):
        check_labels([-1, -1], 2)
    with pytest.raises(ValueError, match="Unknown label type"):
        check_labels([0.5, -1], 2)
    with pytest.raises(ValueError, match="negative labels other than -1"):
        check_labels([-2, 1], 2)
    classes, encoded = check_labels(np.array([7.0, -1, 3, 7]), 4)
    assert classes.tolist() == [3, 7] and encoded.tolist() == [1, -1, 0, 1]


def test_validation_checks():
    labeled = np.array([True, False, False, False])
    classes = np.array([3, 7])
    with pytest.raises(ValueError, match="must be in \\[0, 3\\]"):
        check_validation(([1, 9], [3, 7]), 4, labeled, classes)
    with pytest.raises(ValueError, match="are labeled seeds"):
        check_validation(([0, 1], [3, 7]), 4, labeled, classes)
    with pytest.raises(ValueError, match="not among the classes of the fit.s y"):
        check_validation(([1, 2], [3, 5]), 4, labeled, classes)
    with pytest.raises(ValueError, match="must be distinct"):
        check_validation(([1, 1], [3, 3]), 4, labeled, classes)
    with pytest.raises(ValueError, match="pair"):
        check_validation(None, 4, labeled, classes)
    indices, encoded = check_validation(([1, 2, 3], [7, -1, 3]), 4, labeled, classes)
    assert indices.tolist() == [1, 2, 3] and encoded.tolist() == [1, -1, 0]


def test_check_graph_reuses_a_canonical_graph_and_never_modifies_input():
    canonical = sp.csr_matrix(np.array([[0, 1.0], [1.0, 0]], dtype=np.float32))
    assert check_graph(canonical) is canonical
    with_loop = sp.csr_matrix(np.array([[2.0, 1.0], [1.0, 0]], dtype=np.float32))
    cleaned = check_graph(with_loop)
    assert cleaned is not with_loop and cleaned[0, 0] == 0 and with_loop[0, 0] == 2.0
    with pytest.raises(ValueError, match="must hold real weights"):
        check_graph(sp.csr_matrix(np.array([[0, 1j], [1j, 0]])))


@pytest.mark.parametrize("index", [-1e30, -2.0**64, "just below -2**63"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_knn_indices_below_int64_are_refused_not_read_as_no_neighbour(index, dtype):
    """-1e30 leaked NumPy's "invalid value encountered in cast" and became int64's minimum: "no neighbour"."""
    from fastprop._validation import check_knn_lists

    if index == "just below -2**63":
        index = np.nextafter(dtype(-2.0**63), dtype(-np.inf))
    indices = np.array([[1.0], [index]], dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"indices must be at least -2\*\*63 .*got -\d"):
            check_knn_lists(indices, np.full((2, 1), 0.5))


def test_float_knn_indices_at_int64s_minimum_still_mean_no_neighbour():
    from fastprop._validation import check_knn_lists

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        indices, _, _ = check_knn_lists(np.array([[1.0], [-2.0**63]]), np.full((2, 1), 0.5))
    assert indices.tolist() == [[1], [np.iinfo(np.int64).min]]


TEXT_FEATURES = {
    "str": np.array([["a", "b"], ["c", "d"]]),
    "bytes": np.array([[b"a", b"b"], [b"c", b"d"]]),
    "object": np.array([["a", "b"], ["c", "d"]], dtype=object),
}


@pytest.mark.parametrize("kind", TEXT_FEATURES)
def test_text_features_are_one_error_whatever_their_dtype(kind):
    """A str or bytes array raised a plain ValueError where an object array of strings raised
    NonNumericInputError: a user catching TypeError (as NumPy's conversion raises) missed it."""
    from fastprop._validation import NonNumericInputError

    with pytest.raises(NonNumericInputError, match=r"^X holds entries that are not numbers.*'a'.*Pass a numeric array "
                                                   r"such as float32 embeddings") as error:
        check_features(TEXT_FEATURES[kind])
    assert isinstance(error.value, TypeError) and isinstance(error.value, ValueError)


def test_text_is_non_numeric_input_wherever_numbers_are_checked():
    from fastprop._validation import (NonNumericInputError, as_integer_labels, check_confidence,
                                      check_distributions, check_knn_lists, check_sample_weight)
    from fastprop._validation.graphs import check_graph_arrays
    from fastprop.evaluation.protocol import calibration_error

    text = np.array(["a", "b"])
    refusals = [
        (lambda: check_confidence(text), "confidence must hold real numbers, got dtype <U1"),
        (lambda: calibration_error(["0.5", "1"], [True, True]), "confidence must hold real numbers"),
        (lambda: check_sample_weight(text, 2), "sample_weight must hold real numbers"),
        (lambda: check_distributions(text[:, None], 2), "label_distributions must hold real numbers"),
        (lambda: as_integer_labels(text, "truth"), "truth must hold integer labels"),
        (lambda: check_graph(np.array([["a", "b"], ["c", "d"]])), "2-D numeric array of edge weights"),
        (lambda: check_graph_arrays((2, 2), [0, 1, 2], [1, 0], text, name="g.npz"), "g.npz must hold real weights"),
        (lambda: check_graph_arrays((2, 2), [0, 1, 2], text, [1.0, 1.0], name="g.npz"),
         "g.npz: array 'indices' must be a 1-D integer array"),
        (lambda: check_knn_lists(text[:, None], np.ones((2, 1))), "indices must hold integer row numbers"),
        (lambda: check_knn_lists(np.array([[1], [0]]), text[:, None]), "similarities must hold real numbers"),
    ]
    for refuse, message in refusals:
        with pytest.raises(NonNumericInputError, match=message):
            refuse()
    # numbers of the wrong kind stay a plain ValueError, as scikit-learn's
    for refuse in (lambda: check_features(np.array([[1j, 1]])), lambda: check_confidence(np.array([1j]))):
        with pytest.raises(ValueError) as error:
            refuse()
        assert not isinstance(error.value, NonNumericInputError)


def test_cli_shows_text_features_as_not_numbers(tmp_path, capsys):
    from fastprop.cli import main

    np.save(tmp_path / "X.npy", TEXT_FEATURES["str"])
    assert main(["graph", "--features", str(tmp_path / "X.npy"), "--out", str(tmp_path / "g.npz"),
                 "--neighbors", "1"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"fastprop: error: --features {tmp_path / 'X.npy'}: X holds entries that are not numbers: "
                            "text of dtype <U1 (e.g. 'a')") and error.count("\n") == 1
    assert not (tmp_path / "g.npz").exists()


def test_indices_and_data_of_different_lengths_are_named_first():
    """The message began with how indptr ends, though its end was not what was wrong."""
    from fastprop._validation.graphs import check_graph_arrays

    with pytest.raises(ValueError, match=r"^g.npz: arrays 'indices' \(2 entries\) and 'data' \(1\) differ in length; "
                                         r"they must have one weight per index"):
        check_graph_arrays((2, 2), np.array([0, 1, 2]), np.array([1, 0]), np.array([1.0]), name="g.npz")
    graph = sp.csr_matrix(np.array([[0, 1.0], [1.0, 0]]))
    graph.data = graph.data[:1]
    with pytest.raises(ValueError, match=r"^graph.indices \(2 entries\) and graph.data \(1\) differ in length"):
        check_graph(graph)
    # indptr past equal-length arrays keeps its message
    with pytest.raises(ValueError, match=r"^g.npz: array 'indptr' ends at 3 stored entries, but indices has 2 and "
                                         r"data 2"):
        check_graph_arrays((2, 2), np.array([0, 1, 3]), np.array([1, 0]), np.array([1.0, 1.0]), name="g.npz")


def test_check_scores_ranking_only_refuses_a_predicted():
    """Its docstring said predicted "must be None" with ranking_only, but a predicted was checked and returned."""
    from fastprop._validation import check_scores

    with pytest.raises(ValueError, match=r"predicted must be None with ranking_only=True .*got a list"):
        check_scores([0.1, 0.2], [0, 1], [1, 1], ranking_only=True)
    scores, predicted, truth = check_scores([0.1, 0.2], None, [1, -1], ranking_only=True)
    assert predicted is None and scores.tolist() == [0.1, 0.2] and truth.tolist() == [1, -1]


@pytest.mark.parametrize("values", [[1.0, 2.0, -1.0], [1, 2.0, np.float32(-1)], [np.int64(1), np.float64(2), -1]])
def test_object_arrays_of_whole_numbers_are_labels_as_float_arrays_are(values):
    """np.array([1.0, 2.0], dtype=object) was refused while np.array([1.0, 2.0]) was read as [1, 2]."""
    from fastprop._validation import as_integer_labels, check_scores

    labels = as_integer_labels(np.array(values, dtype=object), "truth")
    assert labels.dtype == np.int64 and labels.tolist() == [1, 2, -1]
    assert check_scores([0.1, 0.2, 0.3], np.array(values, dtype=object), np.array(values, dtype=object))[2].tolist() \
        == [1, 2, -1]


@pytest.mark.parametrize("value, error, message", [
    (1.5, ValueError, r"y must hold integer labels \(-1 = unlabeled\), got dtype object with non-integral values "
                      r"\(e.g. 1.5\)"),
    (float("nan"), ValueError, r"got dtype object with non-integral values \(e.g. nan\)"),
    (np.float32(np.inf), ValueError, r"got dtype object with non-integral values \(e.g. inf\)"),
    (True, ValueError, r"got dtype object \(e.g. True\)"),
    ("a", "NonNumericInputError", r"got dtype object \(e.g. 'a'\)\. Encode class names as integers first"),
    (None, "NonNumericInputError", r"got dtype object \(e.g. None\)"),
    (2.0**63, ValueError, r"y has label 9.223372036854776e\+18, outside int64"),
    (-1e30, ValueError, r"y has label -1e\+30, outside int64"),
    (2**63, ValueError, r"y has label 9223372036854775808, outside int64"),
])
def test_object_labels_are_checked_as_float_and_integer_arrays_are(value, error, message):
    from fastprop._validation import NonNumericInputError, as_integer_labels

    error = NonNumericInputError if error == "NonNumericInputError" else error
    with pytest.raises(error, match=message):
        as_integer_labels(np.array([1.0, value], dtype=object), "y")
    assert as_integer_labels(np.array([1.0, -2.0**63], dtype=object), "y").tolist() == [1, -2**63]


@pytest.fixture
def cgroup_files(tmp_path, monkeypatch):
    """Point the cgroup v2 and v1 limit files at ``tmp_path`` (absent until written) on a 16 GiB machine."""
    import fastprop._validation.memory as memory

    paths = {"v2": tmp_path / "memory.max", "v1": tmp_path / "memory.limit_in_bytes"}
    monkeypatch.setattr(memory, "_CGROUP_V2_MEMORY_MAX", str(paths["v2"]), raising=False)
    monkeypatch.setattr(memory, "_CGROUP_V1_MEMORY_LIMIT", str(paths["v1"]), raising=False)
    monkeypatch.setattr(memory, "physical_memory", lambda: 16 * 2**30)
    return paths


@pytest.mark.parametrize("version", ["v2", "v1"])
@pytest.mark.parametrize("text, limit", [
    ("4294967296\n", 4 * 2**30),
    ("max\n", None),  # cgroup v2's "no limit"
    ("9223372036854771712\n", None),  # cgroup v1's "no limit": above the physical memory
    (str(32 * 2**30), None),  # a limit above the physical memory does not bind
    ("garbage\n", None),
    ("", None),
    ("0\n", None),
    ("-5\n", None),
    pytest.param("1" * 1000, None, id="1000 digits"),
    (None, None),  # no such file
])
def test_memory_limit_is_a_containers_below_the_physical_memory(cgroup_files, version, text, limit):
    """The limit was the physical memory only: a request above a container's limit ended in the OOM killer."""
    from fastprop._validation import check_memory
    from fastprop._validation.memory import memory_limit

    if text is not None:
        cgroup_files[version].write_text(text)
    expected = (limit, True) if limit is not None else (16 * 2**30, False)
    assert memory_limit() == expected
    check_memory(expected[0], "a request", "make it smaller.")
    request, where = (8, "this container's memory limit of 4.0 GiB") if limit else (32, "this machine's 16.0 GiB")
    with pytest.raises(ValueError, match=rf"^a request needs about {request}.0 GiB of memory, more than {where}; "
                                         r"make it smaller\.$"):
        check_memory(request * 2**30, "a request", "make it smaller.")


def test_memory_limit_takes_the_smaller_container_limit_and_never_raises(cgroup_files, monkeypatch):
    import fastprop._validation.memory as memory

    cgroup_files["v2"].write_text("max\n")
    cgroup_files["v1"].write_text(f"{2 * 2**30}\n")
    assert memory.memory_limit() == (2 * 2**30, True)
    cgroup_files["v2"].write_text(f"{2**30}\n")
    assert memory.memory_limit() == (2**30, True)  # read at every call
    for unreadable in (str(cgroup_files["v1"].parent), "/nonexistent/memory.max", "bad\0name"):
        monkeypatch.setattr(memory, "_CGROUP_V2_MEMORY_MAX", unreadable)
        monkeypatch.setattr(memory, "_CGROUP_V1_MEMORY_LIMIT", unreadable)
        assert memory.container_memory_limit() is None and memory.memory_limit() == (16 * 2**30, False)
    monkeypatch.setattr(memory, "physical_memory", lambda: None)  # unknown (e.g. Windows): no check
    assert memory.memory_limit() is None
    memory.check_memory(2**70, "a request", "make it smaller.")


def test_an_estimator_names_the_container_limit_it_would_exceed(cgroup_files):
    cgroup_files["v2"].write_text("100000\n")
    X = np.random.default_rng(0).normal(size=(200, 8))
    with pytest.raises(ValueError, match=r"a kNN graph with n_neighbors=150 on 200 samples needs about .* more than "
                                         r"this container's memory limit of 0.0 GiB"):
        knn_search(X, 150)
