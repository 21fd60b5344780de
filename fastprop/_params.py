"""The estimator-parameter protocol of scikit-learn, without importing scikit-learn.

Every estimator's parameters are the keyword arguments of its ``__init__``,
stored unchanged under the same names (validated in ``fit``, never in
``__init__``). :class:`EstimatorParams` reads them back from the signature:
``get_params`` and ``set_params`` are what ``sklearn.base.clone``,
``Pipeline`` and ``GridSearchCV`` call, and ``repr`` shows the parameters
that differ from their defaults, as scikit-learn prints its own estimators.
"""

import inspect


class EstimatorParams:
    """``get_params``, ``set_params`` and ``__repr__`` from the signature of ``__init__``."""

    @classmethod
    def _param_names(cls):
        """The names of the ``__init__`` parameters, sorted (``self`` and ``*args`` excluded)."""
        signature = inspect.signature(cls.__init__)
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        return sorted(name for name, parameter in signature.parameters.items()
                      if name != "self" and parameter.kind in kinds)

    def get_params(self, deep=True):
        """The estimator's parameters, by name.

        Parameters
        ----------
        deep : bool, default=True
            Accepted for scikit-learn's sake; no parameter is itself an estimator.

        Returns
        -------
        dict
        """
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set parameters by name; they are validated by the next ``fit``.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            For a name that is not a parameter of the estimator.
        """
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(
                    f"{name!r} is not a parameter of {type(self).__name__}; its parameters are: "
                    f"{', '.join(valid)}."
                )
            setattr(self, name, value)
        return self

    def __repr__(self):
        defaults = {name: parameter.default
                    for name, parameter in inspect.signature(type(self).__init__).parameters.items()}
        changed = []
        for name in self._param_names():
            value = getattr(self, name)
            default = defaults[name]
            if value is not default and not (type(value) is type(default) and _equal(value, default)):
                changed.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(changed)})"


def _equal(value, default):
    """``value == default`` as a plain bool, False where the comparison is not one (arrays, errors)."""
    try:
        return bool(value == default)
    except (TypeError, ValueError):
        return False
