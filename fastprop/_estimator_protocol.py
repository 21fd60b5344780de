"""What makes fastprop's estimators estimators to scikit-learn, without importing it.

:class:`TransductiveEstimator` adds to the parameter protocol of
:class:`fastprop._params.EstimatorParams` the estimator tags scikit-learn asks
for (built on demand: only scikit-learn calls ``__sklearn_tags__``, so it is
imported then and never by fastprop itself), the fitted-state check of
``predict`` and friends, and the check that new points have the fitted
number of features, each with the messages scikit-learn's own estimators give.
"""

import sys

from ._params import EstimatorParams


class NotFittedError(ValueError, AttributeError):
    """A method that needs a fitted estimator was called before ``fit``.

    When scikit-learn is loaded, the error raised is also an instance of
    ``sklearn.exceptions.NotFittedError``, so either ``except`` catches it.
    """


def _not_fitted_error_class():
    """:class:`NotFittedError`, made a scikit-learn ``NotFittedError`` too when scikit-learn is loaded."""
    if "sklearn.exceptions" not in sys.modules:
        return NotFittedError
    global _BOTH
    if _BOTH is None:
        _BOTH = type("NotFittedError", (NotFittedError, sys.modules["sklearn.exceptions"].NotFittedError), {
            "__module__": __name__, "__doc__": NotFittedError.__doc__,
        })
    return _BOTH


_BOTH = None


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

    def _check_fitted(self):
        if not hasattr(self, "n_features_in_"):
            raise _not_fitted_error_class()(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with appropriate "
                "arguments before using this estimator."
            )

    def _check_n_features(self, features):
        if features.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {features.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
