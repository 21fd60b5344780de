"""Labels as users have them: class names, an explicit unlabeled marker, outputs in the same space."""

import warnings

import numpy as np
import pytest

from fastprop import FastProp
from fastprop._labels import check_labels, check_validation, decode_labels, encode_known


def test_names_are_encoded_in_sorted_order():
    classes, encoded = check_labels(["cat", "?", "ant", "cat"], 4, unlabeled="?")
    assert classes.tolist() == ["ant", "cat"] and encoded.tolist() == [1, -1, 0, 1]
    classes, encoded = check_labels(np.array(["b", None, "a"], dtype=object), 3, unlabeled=None)
    assert classes.tolist() == ["a", "b"] and encoded.tolist() == [1, -1, 0]


def test_the_default_marker_works_with_names():
    # numpy.asarray(["cat", -1]) holds the string "-1"; an object array keeps the int
    for y in (["cat", -1, "dog"], np.array(["cat", -1, "dog"], dtype=object)):
        classes, encoded = check_labels(y, 3)
        assert classes.tolist() == ["cat", "dog"] and encoded.tolist() == [0, -1, 1]


def test_bad_labels_say_what_to_do():
    with pytest.raises(ValueError, match="mixes labels of different kinds"):
        check_labels(np.array(["a", 3, -1], dtype=object), 3)
    with pytest.raises(ValueError, match="holds numbers but unlabeled='\\?'"):
        check_labels([1, 2, 3], 3, unlabeled="?")
    with pytest.raises(ValueError, match="all labels are '\\?'"):
        check_labels(["?", "?"], 2, unlabeled="?")
    with pytest.raises(ValueError, match="unlabeled must be an int"):
        check_labels([1, -1], 2, unlabeled=1.5)
    with pytest.raises(ValueError, match="Unknown label type"):
        check_labels([0.5, 1.0], 2)


def test_another_marker_with_minus_one_in_y_and_nothing_unlabeled_warns():
    """unlabeled=99 where y marks its unlabeled samples with -1: -1 becomes a class, every sample a seed."""
    with pytest.warns(UserWarning, match="no sample marked unlabeled=99 but holds -1"):
        classes, encoded = check_labels([0, -1, 1, -1], 4, unlabeled=99)
    assert classes.tolist() == [-1, 0, 1] and (encoded >= 0).all()
    with pytest.warns(UserWarning, match="no sample marked unlabeled=99"):  # labels as objects too
        check_labels(np.array([0, -1, 1], dtype=object), 3, unlabeled=99)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_labels([0, 99, 1, -1], 4, unlabeled=99)  # -1 a class beside unlabeled samples: as documented


def test_a_y_with_no_unlabeled_sample_warns():
    """Fuzzing round 15: a meta-estimator that encodes y (VotingClassifier, OneVsRestClassifier, ...) made -1 a
    class, and names with an "" marker given to a baseline (which reads -1) made "" one: every sample a seed,
    silently."""
    for y, marker in (([0, 2, 1, 1], 99), ([0, 2, 1, 1], -1), (["", "ant", "bee"], -1)):
        with pytest.warns(UserWarning, match="every sample is a seed and nothing is propagated") as caught:
            check_labels(y, len(y), unlabeled=marker)
        assert "holds -1" not in str(caught[0].message)
    X = np.random.default_rng(0).normal(size=(12, 3))
    with pytest.warns(UserWarning, match="no sample marked") as caught:  # pointing at the user's line
        FastProp(unlabeled=99, random_state=0).fit(X, np.r_[[0, 1], np.full(10, -1)])
    assert [warning.filename for warning in caught] == [__file__]


def test_decoding_round_trips_and_marks_outliers():
    classes = np.array(["ant", "cat"])
    assert decode_labels(classes, [1, -1, 0], "?").tolist() == ["cat", "?", "ant"]
    assert decode_labels(classes, [1, -1], -1).tolist() == ["cat", -1]  # object array
    assert decode_labels(np.array([3, 7]), [1, -1]).tolist() == [7, -1]
    assert decode_labels(np.array([3, 7]), [1, -1]).dtype == np.int64
    assert encode_known(["cat", "?", "ant"], classes, "?", name="y").tolist() == [1, -1, 0]
    with pytest.raises(ValueError, match="y 'dog' are not among the classes of the fit's y"):
        encode_known(["dog"], classes, "?", name="y")
    # score's way: a class no seed had is a point no prediction gets right, but a label of another kind is a mistake
    assert encode_known(["dog", "?", "cat"], classes, "?", name="y", unknown_is_wrong=True).tolist() == [-2, -1, 1]
    assert encode_known([9, 3], np.array([3, 7]), name="y", unknown_is_wrong=True).tolist() == [-2, 0]
    with pytest.raises(ValueError, match="not among the classes"):
        encode_known(np.array([5, "cat"], dtype=object), classes, "?", name="y", unknown_is_wrong=True)
    with pytest.raises(ValueError, match="dtype=object"):
        encode_known(["7"], np.array([3, 7]), name="y", unknown_is_wrong=True)


def test_validation_with_names():
    labeled = np.array([True, False, False, True])
    classes = np.array(["ant", "cat"])
    indices, truth = check_validation(([1, 2], ["cat", "?"]), 4, labeled, classes, "?")
    assert indices.tolist() == [1, 2] and truth.tolist() == [1, -1]


def test_fastprop_with_names_equals_fastprop_with_integers():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(60, 6)) + 4 * np.eye(6)[c] for c in range(3)])
    y = np.full(180, -1)
    y[[0, 60, 120]] = [0, 1, 2]
    names = np.array(["alpha", "beta", "gamma"])
    y_names = np.where(y >= 0, names[np.maximum(y, 0)], "")
    by_index = FastProp(n_neighbors=8, random_state=0).fit(X, y, validation=([5, 70], [0, 1]))
    by_name = FastProp(n_neighbors=8, random_state=0, unlabeled="").fit(
        X, y_names, validation=([5, 70], ["alpha", "beta"]))
    assert by_name.classes_.tolist() == names.tolist()
    expected = np.where(by_index.transduction_ >= 0, names[np.maximum(by_index.transduction_, 0)], "")
    assert by_name.transduction_.tolist() == expected.tolist()
    np.testing.assert_array_equal(by_name.confidence_, by_index.confidence_)
    index_predicted = by_index.predict(X[:20])
    np.testing.assert_array_equal(by_name.predict(X[:20]),
                                  np.where(index_predicted >= 0, names[np.maximum(index_predicted, 0)], ""))


class NAType:
    """Stands for pandas' ``NA`` (known by its type's name; pandas is no test dependency)."""

    def __bool__(self):
        raise TypeError("boolean value of NA is ambiguous")


def test_the_marker_none_is_a_missing_label():
    """Fuzzing round 15: pandas 3 stores a None of a column of names as NaN (and the "string" dtype as NA), so
    unlabeled=None matched nothing, and the error's hint, y.fillna(None), did nothing."""
    labels = np.array(["cat", float("nan"), "dog", None, NAType()], dtype=object)
    classes, encoded = check_labels(labels, 5, unlabeled=None)
    assert classes.tolist() == ["cat", "dog"] and encoded.tolist() == [0, -1, 1, -1, -1]
    with pytest.raises(ValueError, match="pass unlabeled=None, which marks missing labels"):
        check_labels(labels, 5, unlabeled="")
    assert encode_known(labels[:3], classes, None, name="validation labels").tolist() == [0, -1, 1]
    with pytest.raises(ValueError, match=r"NaN: fill missing labels with the marker first, with pandas y.fillna\(-1\)"):
        check_labels([1.0, float("nan"), 0.0], 3)
    with pytest.raises(ValueError, match="Its NaN are missing labels"):
        check_labels([1.0, float("nan"), 0.0], 3, unlabeled=None)


def test_a_nan_numpy_made_text_is_pointed_out():
    """A review: ["a", nan] becomes the text 'nan' in NumPy, a class, and every sample a seed."""
    with pytest.warns(UserWarning, match="Its class 'nan' may be a missing label.*dtype=object"):
        check_labels(["a", float("nan"), "b"], 3, unlabeled=None)
    with pytest.raises(ValueError, match="not among the classes"):  # not counted wrong: not a label of that kind
        encode_known(np.array([None, float("nan"), 2.5], dtype=object), np.array([0, 1]), name="y",
                     unknown_is_wrong=True)
