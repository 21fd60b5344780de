"""What makes fastprop's estimators estimators to scikit-learn, without importing it.

:class:`TransductiveEstimator` adds to the parameter protocol of
:class:`fastprop._params.EstimatorParams` the estimator tags scikit-learn asks
for (built on demand: only scikit-learn calls ``__sklearn_tags__``, so it is
imported then and never by fastprop itself), the fitted-state check of
``predict`` and friends, and the check that new points have the fitted
number of features, each with the messages scikit-learn's own estimators give.
"""

import inspect
import sys
import warnings

import numpy as np

from ._params import EstimatorParams


def with_scikit_learn_twin(cls):
    """``cls``, or when scikit-learn is loaded a subclass of it and of ``sklearn.exceptions``' class of its name.

    So that scikit-learn's ``except`` clauses and warning filters catch
    fastprop's errors and warnings of the same names, without fastprop
    importing scikit-learn. The subclass is made once a process.
    """
    exceptions = sys.modules.get("sklearn.exceptions")
    if exceptions is None:
        return cls
    twin = _TWINS.get(cls)
    if twin is None:
        twin = _TWINS[cls] = type(cls.__name__, (cls, getattr(exceptions, cls.__name__)), {
            "__module__": cls.__module__, "__doc__": cls.__doc__,
        })
    return twin


_TWINS = {}


def rebuilt_with_twin(cls, args):
    """``cls(*args)`` as this process raises it (:func:`with_scikit_learn_twin`): how the errors and warnings pickle."""
    return with_scikit_learn_twin(cls)(*args)


class NotFittedError(ValueError, AttributeError):
    """A method that needs a fitted estimator was called before ``fit``.

    When scikit-learn is loaded, the error raised is also an instance of
    ``sklearn.exceptions.NotFittedError``, so either ``except`` catches it;
    it is pickled as its message, and unpickled as the class the receiving
    process would raise (a worker's error reaches its parent whole).
    """

    def __reduce__(self):
        return rebuilt_with_twin, (NotFittedError, self.args)


def feature_names(X):
    """The column names of ``X`` (a pandas DataFrame's, or any ``columns``) when all are strings, else None.

    As scikit-learn records them, without importing pandas: names of other
    types (a default ``RangeIndex``) are no names.
    """
    columns = getattr(X, "columns", None)
    if columns is None:
        return None
    names = np.asarray(list(columns), dtype=object)
    if names.size == 0 or not all(isinstance(name, str) for name in names):
        return None
    return names


#: The methods whose parameters besides ``X`` and ``y`` scikit-learn's metadata routing may pass on.
_ROUTED_METHODS = ("fit", "score")


class _Requests(dict):
    """``{method: {param: request}}`` as ``set_*_request`` chose, copied whole by scikit-learn's ``clone``."""

    def __sklearn_clone__(self):
        return _Requests.copied(self)

    @staticmethod
    def copied(requests):
        """A copy of ``{method: {param: request}}`` (a plain dict too) whose inner dicts are new."""
        return _Requests({method: dict(chosen) for method, chosen in requests.items()})


class TransductiveEstimator(EstimatorParams):
    """Estimator tags, the fitted check and the feature-count check of fastprop's estimators.

    Subclasses set ``_ESTIMATOR_TYPE``: ``"classifier"`` for an estimator
    that labels new points (FastProp), None for the transductive baselines,
    which label only the samples they were fitted on.
    """

    _ESTIMATOR_TYPE = None

    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        classifier = self._ESTIMATOR_TYPE == "classifier"
        return Tags(
            estimator_type=self._ESTIMATOR_TYPE,
            target_tags=TargetTags(required=True),
            classifier_tags=ClassifierTags() if classifier else None,
            requires_fit=True,
            input_tags=InputTags(),
        )

    def get_metadata_routing(self):
        """What ``fit`` (and ``score``) take besides ``X`` and ``y``, for scikit-learn's metadata routing.

        Each parameter is requested as :meth:`set_fit_request` (or
        ``set_score_request``) set it, unrequested (None) otherwise, as
        scikit-learn's own estimators are; so that a ``Pipeline`` ending in
        this estimator scores under ``enable_metadata_routing=True``, and
        ``graph`` reaches its ``fit`` once requested. Builds a
        ``sklearn.utils.metadata_routing.MetadataRequest`` (only scikit-learn
        calls this, so it is imported then).
        """
        from sklearn.utils.metadata_routing import MetadataRequest

        request = MetadataRequest(owner=type(self).__name__)
        chosen = getattr(self, "_metadata_request", {})
        for method in _ROUTED_METHODS:
            for param in self._metadata_parameters(method):
                getattr(request, method).add_request(param=param, alias=chosen.get(method, {}).get(param))
        return request

    def set_fit_request(self, **requests):
        """Request metadata for ``fit`` under scikit-learn's routing: ``param=True`` (passed on), False, None or
        an alias (a string); e.g. ``set_fit_request(graph=True)``. Returns self. Only with routing enabled
        (``sklearn.set_config(enable_metadata_routing=True)``), as scikit-learn's own."""
        return self._set_metadata_request("fit", requests)

    def _metadata_parameters(self, method):
        if not hasattr(self, method):
            return ()
        names = list(inspect.signature(getattr(self, method)).parameters)
        return tuple(name for name in names if name not in ("X", "y"))

    def _set_metadata_request(self, method, requests):
        import sklearn

        if not sklearn.get_config().get("enable_metadata_routing", False):
            raise RuntimeError(f"set_{method}_request is only available when metadata routing is enabled, as "
                               "scikit-learn's own: sklearn.set_config(enable_metadata_routing=True).")
        known = self._metadata_parameters(method)
        unknown = sorted(set(requests) - set(known))
        if unknown:
            raise TypeError(f"Unexpected args: {unknown} in set_{method}_request of {type(self).__name__}; "
                            f"{method} takes {', '.join(known) or 'no metadata'}.")
        for param, alias in requests.items():
            if not (alias is None or isinstance(alias, bool) or (isinstance(alias, str) and alias.isidentifier())):
                raise ValueError(f"{param}={alias!r}: a request is True, False, None or an alias (a string that is "
                                 "a valid Python identifier).")
        chosen = _Requests.copied(getattr(self, "_metadata_request", {}))
        chosen.setdefault(method, {}).update(requests)
        self._metadata_request = chosen  # scikit-learn's clone copies this attribute
        return self

    def _check_fitted(self):
        if not hasattr(self, "n_features_in_"):
            raise with_scikit_learn_twin(NotFittedError)(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with appropriate "
                "arguments before using this estimator."
            )

    def _record_feature_names(self, X):
        """``feature_names_in_`` from ``X``'s columns, or none (a fit without names forgets earlier ones)."""
        names = feature_names(X)
        if names is None:
            self.__dict__.pop("feature_names_in_", None)
        else:
            self.feature_names_in_ = names

    def _check_feature_names(self, X):
        """New points' columns against the fit's, with scikit-learn's messages: other names or order is an error.

        The warnings point at the caller of a public method that calls this through a
        ``serialised`` private one (``predict`` -> ``_predict_new``).
        """
        fitted, given = getattr(self, "feature_names_in_", None), feature_names(X)
        name = type(self).__name__
        if fitted is None and given is not None:
            warnings.warn(f"X has feature names, but {name} was fitted without feature names", UserWarning,
                          stacklevel=5)
        elif fitted is not None and given is None:
            warnings.warn(f"X does not have valid feature names, but {name} was fitted with feature names",
                          UserWarning, stacklevel=5)
        elif fitted is not None and (fitted.size != given.size or (fitted != given).any()):
            fitted_set, given_set = set(fitted), set(given)
            unseen = [column for column in given if column not in fitted_set]
            missing = [column for column in fitted if column not in given_set]
            detail = "".join(f"\n- {what}: {', '.join(map(repr, columns[:5]))}{', ...' if len(columns) > 5 else ''}"
                             for what, columns in (("Feature names unseen at fit time", unseen),
                                                   ("Feature names seen at fit time, yet now missing", missing))
                             if columns)
            raise ValueError(
                "The feature names should match those that were passed during fit, in the same order."
                f"{detail or ' They are the same names in another order: reorder the columns as in fit.'}"
            )

    def _check_n_features(self, features):
        if features.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {features.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
