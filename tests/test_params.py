"""The estimator-parameter protocol: get_params / set_params / repr, clone, n_features_in_."""

import inspect

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
