"""The estimator-parameter protocol: get_params / set_params / repr, clone, n_features_in_."""

import inspect
import pickle
import warnings

import numpy as np
import pytest

from fastprop import FastProp
from fastprop.baselines import (
    GCN,
    SGC,
    CorrectAndSmooth,
    GAT,
    FastGCN,
    GraphSAGE,
    LabelPropagation,
    LabelSpreading,
    PoissonLearning,
)

ESTIMATORS = [FastProp, SGC, GCN, LabelPropagation, LabelSpreading, CorrectAndSmooth, GAT, GraphSAGE, FastGCN,
              PoissonLearning]


def init_defaults(cls):
    return {name: parameter.default for name, parameter in inspect.signature(cls.__init__).parameters.items()
            if name != "self"}


def two_blobs():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(3, 1, (40, 6)), rng.normal(-3, 1, (40, 6))]).astype(np.float32)
    y = np.full(80, -1)
    y[:3], y[40:43] = 0, 1
    return X, y


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_get_params_are_the_init_arguments(cls):
    defaults = init_defaults(cls)
    params = cls().get_params()
    assert list(params) == sorted(defaults)
    assert all(params[name] is defaults[name] for name in defaults)
    assert cls().get_params(deep=False) == params


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_set_params_sets_returns_self_and_refuses_unknown_names(cls):
    estimator = cls()
    assert estimator.set_params(n_neighbors=7) is estimator
    assert estimator.n_neighbors == 7 and estimator.get_params()["n_neighbors"] == 7
    assert estimator.set_params() is estimator
    with pytest.raises(ValueError, match=r"'n_neighbours' is not a parameter of .*n_neighbors"):
        estimator.set_params(n_neighbours=7)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_repr_shows_the_parameters_that_differ_from_their_defaults(cls):
    assert repr(cls()) == f"{cls.__name__}()"
    assert repr(cls(n_neighbors=12)) == f"{cls.__name__}(n_neighbors=12)"
    # equal but of another type than the default: shown, as it may not behave the same
    assert repr(cls(n_neighbors=30.0)) == f"{cls.__name__}(n_neighbors=30.0)"
    assert repr(cls(n_neighbors=np.int64(30))) == f"{cls.__name__}(n_neighbors={np.int64(30)!r})"


def test_repr_of_fastprop_with_several_changes_is_sorted_and_evaluable():
    model = FastProp(random_state=3, min_gain=250.0, labels="views")
    assert repr(model) == "FastProp(labels='views', min_gain=250.0, random_state=3)"
    assert eval(repr(model)).get_params() == model.get_params()


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_fit_records_n_features_in(cls):
    X, y = two_blobs()
    assert cls(n_neighbors=5).fit(X, y).n_features_in_ == 6


class Frame:
    """What fastprop reads of a pandas DataFrame: ``columns`` and the array (pandas is no test dependency)."""

    def __init__(self, values, columns):
        self.values, self.columns = np.asarray(values), list(columns)

    def __array__(self, dtype=None, copy=None):
        return self.values if dtype is None else self.values.astype(dtype)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_fit_records_the_feature_names_of_a_frame(cls):
    X, y = two_blobs()
    names = [f"f{j}" for j in range(6)]
    model = cls(n_neighbors=5).fit(Frame(X, names), y)
    assert model.feature_names_in_.tolist() == names and model.feature_names_in_.dtype == object
    assert not hasattr(cls(n_neighbors=5).fit(Frame(X, range(6)), y), "feature_names_in_")  # not strings: no names
    assert not hasattr(model.fit(X, y), "feature_names_in_")  # a fit without names forgets the last one's


def test_new_points_need_the_fitted_columns_in_their_order():
    """Fuzzing round 15: columns in another order were read by position, 196 of 200 labels changed, silently."""
    X, y = two_blobs()
    names = [f"f{j}" for j in range(6)]
    model = FastProp(n_neighbors=5, random_state=0).fit(Frame(X, names), y)
    plain = FastProp(n_neighbors=5, random_state=0).fit(X, y)
    assert np.array_equal(model.predict_confidence(Frame(X[:5], names)), plain.predict_confidence(X[:5]))
    with pytest.raises(ValueError, match="same names in another order"):
        model.predict(Frame(X[:5, ::-1], names[::-1]))
    with pytest.raises(ValueError, match="unseen at fit time: 'g0'.*\n.*missing: 'f0'"):
        model.predict_proba(Frame(X[:5], ["g0"] + names[1:]))
    with pytest.warns(UserWarning, match="does not have valid feature names, but FastProp was fitted with"):
        model.predict(X[:5])
    with pytest.warns(UserWarning, match="X has feature names, but FastProp was fitted without"):
        FastProp(n_neighbors=5, random_state=0).fit(X, y).score(Frame(X[:5], names), y[:5])


def test_a_pandas_frame_gives_its_column_names():
    pandas = pytest.importorskip("pandas")
    X, y = two_blobs()
    frame = pandas.DataFrame(X, columns=[f"f{j}" for j in range(6)])
    model = FastProp(n_neighbors=5, random_state=0).fit(frame, y)
    assert model.feature_names_in_.tolist() == list(frame.columns)
    plain = FastProp(n_neighbors=5, random_state=0).fit(X, y)
    assert np.array_equal(model.predict_confidence(frame.iloc[:5]), plain.predict_confidence(X[:5]))
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(frame.iloc[:5, ::-1])


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_scikit_learn_clone_copies_the_parameters_and_not_the_fit(cls):
    base = pytest.importorskip("sklearn.base")
    X, y = two_blobs()
    fitted = cls(n_neighbors=5).fit(X, y)
    copy = base.clone(fitted)
    assert type(copy) is cls and copy.get_params() == fitted.get_params()
    assert not hasattr(copy, "classes_")


def test_a_scikit_learn_pipeline_sets_nested_parameters_and_fits_fastprop_last():
    pipeline_module = pytest.importorskip("sklearn.pipeline")
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    X, y = two_blobs()
    pipeline = pipeline_module.Pipeline([("scale", preprocessing.StandardScaler()), ("prop", FastProp())])
    pipeline.set_params(prop__n_neighbors=5, prop__random_state=0)
    pipeline.fit(X, y)
    fitted = pipeline.named_steps["prop"]
    alone = FastProp(n_neighbors=5, random_state=0).fit(preprocessing.StandardScaler().fit_transform(X), y)
    assert np.array_equal(fitted.transduction_, alone.transduction_)
    assert np.array_equal(fitted.confidence_, alone.confidence_)


@pytest.mark.parametrize("scoring", [None, "accuracy"])
def test_grid_search_scores_each_candidate_as_a_manual_loop_does(scoring):
    model_selection = pytest.importorskip("sklearn.model_selection")
    metrics = pytest.importorskip("sklearn.metrics")
    X, y = two_blobs()
    truth = np.repeat([0, 1], 40)
    y = np.where(np.arange(80) % 4 == 0, truth, -1)  # a quarter labelled, in every fold
    folds = list(model_selection.KFold(2, shuffle=True, random_state=0).split(X))
    search = model_selection.GridSearchCV(FastProp(random_state=0), {"n_neighbors": [3, 8]}, cv=folds,
                                          scoring=scoring).fit(X, y)
    for position, n_neighbors in enumerate([3, 8]):
        scores = []
        for train, test in folds:
            model = FastProp(random_state=0, n_neighbors=n_neighbors).fit(X[train], y[train])
            scores.append(model.score(X[test], y[test]) if scoring is None
                          else metrics.accuracy_score(y[test], model.predict(X[test])))
        assert search.cv_results_["mean_test_score"][position] == pytest.approx(np.mean(scores))
    assert search.best_estimator_.n_neighbors in (3, 8)


def test_fastprops_errors_and_warnings_are_scikit_learns_too():
    """Fuzzing round 15: scikit-learn's warning filters missed fastprop's warnings of the same names, and the
    not-fitted error could not be pickled (a worker's error reached its parent as a PicklingError)."""
    exceptions = pytest.importorskip("sklearn.exceptions")
    from fastprop._estimator_protocol import NotFittedError
    from fastprop.baselines import LabelPropagation

    X, y = two_blobs()
    with pytest.raises(exceptions.NotFittedError) as raised:
        FastProp().predict(X)
    assert isinstance(raised.value, NotFittedError)
    restored = pickle.loads(pickle.dumps(raised.value))
    assert isinstance(restored, exceptions.NotFittedError) and isinstance(restored, NotFittedError)
    assert str(restored) == str(raised.value)
    # raised where scikit-learn was not loaded: the plain class, which becomes scikit-learn's too where it is
    assert isinstance(pickle.loads(pickle.dumps(NotFittedError("not fitted yet"))), exceptions.NotFittedError)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=exceptions.DataConversionWarning)
        warnings.filterwarnings("ignore", category=exceptions.ConvergenceWarning)
        FastProp(n_neighbors=5, random_state=0).fit(X, y[:, None])  # a column vector y
        LabelPropagation(n_neighbors=5, max_iter=1).fit(X, y)  # stops on max_iter
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FastProp(n_neighbors=5, random_state=0).fit(X, y[:, None])
        LabelPropagation(n_neighbors=5, max_iter=1).fit(X, y)
    assert [w.filename for w in caught] == [__file__, __file__]  # the user's line (ConvergenceWarning's was not)
    for w in caught:  # raised as errors in a worker, they reach the parent whole (a review)
        restored = pickle.loads(pickle.dumps(w.message))
        assert type(restored).__mro__[1] is type(w.message).__mro__[1] and restored.args == w.message.args
        assert isinstance(restored, (exceptions.DataConversionWarning, exceptions.ConvergenceWarning))


def test_index_fit_parameters_through_a_splitter_are_explained():
    """Fuzzing round 15: graph=, validation= and outliers= index the X given to fit, and a scikit-learn splitter
    passes them to every fold as they are: the errors said what was wrong, not why."""
    model_selection = pytest.importorskip("sklearn.model_selection")
    from fastprop import build_knn_graph

    X, y = two_blobs()
    folds = model_selection.KFold(2, shuffle=True, random_state=0)
    with pytest.raises(ValueError, match="rows look sliced to X's, as a scikit-learn splitter"):
        model_selection.cross_validate(FastProp(n_neighbors=5), X, y, cv=folds, error_score="raise",
                                       params={"graph": build_knn_graph(X, 5)})
    with pytest.raises(ValueError, match="a scikit-learn splitter or search passes them to every fold"):
        model_selection.cross_validate(FastProp(n_neighbors=5), X, y, cv=folds, error_score="raise",
                                       params={"validation": (np.arange(70, 80), np.ones(10, dtype=int))})


def test_scikit_learn_metadata_routing_reaches_fit_and_score():
    """Fuzzing round 15: with enable_metadata_routing=True a Pipeline ending in FastProp could not score (it routes
    sample_weight=None, which FastProp did not declare), and no fit parameter could reach FastProp."""
    sklearn = pytest.importorskip("sklearn")
    pipeline_module = pytest.importorskip("sklearn.pipeline")
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    base = pytest.importorskip("sklearn.base")
    from fastprop import build_knn_graph

    X, y = two_blobs()
    truth = np.repeat([0, 1], 40)
    graph = build_knn_graph(X, 7)
    scaled = preprocessing.StandardScaler().fit_transform(X)
    direct = FastProp(n_neighbors=5, random_state=0).fit(scaled, y, graph=graph)
    with sklearn.config_context(enable_metadata_routing=True):
        plain = pipeline_module.make_pipeline(preprocessing.StandardScaler(), FastProp(n_neighbors=5, random_state=0))
        assert plain.fit(X, y).score(X, truth) == FastProp(n_neighbors=5, random_state=0).fit(scaled, y).score(
            scaled, truth)
        requested = FastProp(n_neighbors=5, random_state=0).set_fit_request(graph=True)
        assert base.clone(requested).get_metadata_routing().fit.requests["graph"] is True  # clone keeps it
        routed = pipeline_module.make_pipeline(preprocessing.StandardScaler(), requested).fit(X, y, graph=graph)
        assert np.array_equal(routed[-1].confidence_, direct.confidence_)  # the given graph, not one built
        weights = np.linspace(1, 2, 80)
        weighted = pipeline_module.make_pipeline(preprocessing.StandardScaler(),
                                                 FastProp(n_neighbors=5, random_state=0).set_score_request(
                                                     sample_weight=True)).fit(X, y)
        assert weighted.score(X, truth, sample_weight=weights) == weighted[-1].score(scaled, truth, weights)
    with sklearn.config_context(enable_metadata_routing=True):
        with pytest.raises(TypeError, match="Unexpected args: \\['weights'\\].*graph, validation, outliers"):
            FastProp().set_fit_request(weights=True)
        for bad in (1.5, "not an alias"):
            with pytest.raises(ValueError, match="True, False, None or an alias"):
                FastProp().set_fit_request(graph=bad)
    with pytest.raises(RuntimeError, match="only available when metadata routing is enabled"):
        FastProp().set_fit_request(graph=True)
    assert "_metadata_request" not in FastProp().get_params()
