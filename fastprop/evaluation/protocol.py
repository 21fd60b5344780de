"""The noisy transductive protocol of Yang et al. (ECCV 2020, Sec. 4.1).

From a labelled pool ``D_all`` (``y_all == -1`` marks samples of no class,
such as real out-of-scope queries), :func:`make_noisy_task` draws

1. ``D``: all samples of ``n_classes`` classes drawn uniformly;
2. ``D_l``: the labelled seeds, a ``label_ratio`` share of ``D``;
3. ``D_o``: outliers drawn from ``D_all \\ D``, so that they make up a
   ``noise_ratio`` share of the unlabelled set ``D_u = (D \\ D_l) ∪ D_o``;
4. ``D_v``: a validation set of ``|D_l|`` samples of ``D_u`` with known truth,
   used only to choose the outlier threshold ``o_tau``.

The remaining ``D_u \\ D_v`` is the evaluation set. :func:`evaluate` scores a
method's output on it with the paper's metric: top-1 accuracy where outliers
have truth -1 and samples whose confidence is below ``o_tau`` are predicted
-1, with ``o_tau`` chosen on ``D_v`` by the same rule
(:func:`fastprop.threshold.choose_threshold`) for every method.
"""

import functools
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.stats import rankdata

from .._validation import (check_confidence, check_integer, check_pool_labels, check_random_state, check_real,
                           check_scores)
from .._validation._common import _refusal
from ..threshold import accuracy_with_rejection, choose_threshold

__all__ = ["NoisyTask", "make_noisy_task", "evaluate", "outlier_auroc", "calibration_error"]

#: :func:`calibration_error`'s bins at most: ``confidence * n_bins`` stays exact in float64.
MAX_BINS = 2**40


def _frozen(array, dtype):
    """A read-only copy of ``array``, so that a task cannot be changed in place.

    Integers (``dtype`` int64) or booleans (``dtype`` bool) only, or nothing:
    a cast would truncate 2.7 to 2, or read any nonzero as True.
    """
    values = np.asarray(array)
    kinds = "b" if dtype is bool else "iu"
    if values.size and values.dtype.kind not in kinds:
        first = values.flat[0]
        raise TypeError(f"got {values.dtype} values, e.g. {first.item() if isinstance(first, np.generic) else first!r}")
    values = np.array(values, dtype=dtype)
    values.flags.writeable = False
    return values


@dataclass(frozen=True, eq=False)
class NoisyTask:
    """One draw of the noisy transductive protocol; see :func:`make_noisy_task`.

    All arrays are read-only. "Task-local position" means a position in
    ``indices``, i.e. a row of ``task.subset(X)``.

    Attributes
    ----------
    indices : ndarray of shape (n_task,), int64
        Pool indices of the task's samples, ``D ∪ D_o``, in increasing order.
    y : ndarray of shape (n_task,), int64
        Seed label in ``0..n_classes-1`` for seeds, -1 for every other sample:
        pass it as ``fit(task.subset(X), task.y)``.
    truth : ndarray of shape (n_task,), int64
        True label in ``0..n_classes-1``, or -1 for an outlier.
    seed_mask : ndarray of shape (n_task,), bool
        True for the seeds ``D_l``.
    validation : tuple of two ndarrays of shape (n_validation,), int64
        ``(positions, truth)`` of ``D_v``, positions in increasing order; pass it
        as FastProp's ``validation=``.
    evaluation : ndarray of shape (n_evaluation,), int64
        Task-local positions of the evaluation set ``D_u \\ D_v``, increasing.
    classes : ndarray of shape (n_classes,), int64
        The original class ids drawn, increasing; task class ``k`` is ``classes[k]``.
    noise_ratio : float
        The requested noise ratio.
    label_ratio : float
        The requested label ratio.
    n_pool : int
        Number of samples in the pool the task was drawn from.
    """

    indices: np.ndarray
    y: np.ndarray
    truth: np.ndarray
    seed_mask: np.ndarray
    validation: tuple
    evaluation: np.ndarray
    classes: np.ndarray
    noise_ratio: float
    label_ratio: float
    n_pool: int

    def __post_init__(self):
        """Read-only int64 / bool arrays, checked against each other (a task may be built by hand)."""
        freeze = functools.partial(object.__setattr__, self)
        try:
            for name, dtype in (("indices", np.int64), ("y", np.int64), ("truth", np.int64), ("seed_mask", bool),
                                ("evaluation", np.int64), ("classes", np.int64)):
                freeze(name, _frozen(getattr(self, name), dtype))
            positions, validation_truth = self.validation
            freeze("validation", (_frozen(positions, np.int64), _frozen(validation_truth, np.int64)))
        except (TypeError, ValueError) as error:
            raise ValueError(f"a NoisyTask's arrays must be integer (seed_mask: bool) arrays: {error}") from None
        n = self.indices.size
        for name in ("indices", "y", "truth", "seed_mask", "evaluation", "classes"):
            if getattr(self, name).ndim != 1:
                raise ValueError(f"NoisyTask.{name} must be 1-D, got shape {getattr(self, name).shape}.")
        if not self.y.size == self.truth.size == self.seed_mask.size == n:
            raise ValueError("NoisyTask.indices, y, truth and seed_mask must have one entry per task sample.")
        if self.classes.size == 0 or (self.truth < -1).any() or (self.truth >= self.classes.size).any():
            raise ValueError("NoisyTask.truth must hold task classes 0..len(classes)-1 or -1, and classes "
                             "at least one class.")
        positions, validation_truth = self.validation
        if positions.shape != validation_truth.shape or positions.ndim != 1:
            raise ValueError("NoisyTask.validation must be (positions, truth) of equal-length 1-D arrays.")
        for name, where in (("validation positions", positions), ("evaluation", self.evaluation)):
            if where.size and (where.min() < 0 or where.max() >= n):
                raise ValueError(f"NoisyTask {name} must be task-local positions in [0, {n - 1}].")
        if not np.array_equal(validation_truth, self.truth[positions]):
            raise ValueError("NoisyTask.validation's truth must be NoisyTask.truth at its positions.")
        check_integer("NoisyTask.n_pool", self.n_pool)
        if (np.diff(self.classes) <= 0).any():
            raise ValueError("NoisyTask.classes must increase strictly: each original class id once, in order.")
        if n and (self.indices.min() < 0 or self.indices.max() >= self.n_pool):
            raise ValueError(f"NoisyTask.indices must be pool indices in [0, n_pool - 1 = {self.n_pool - 1}].")
        for name, where in (("indices", self.indices), ("validation positions", positions),
                            ("evaluation", self.evaluation)):
            if (np.diff(where) <= 0).any():
                raise ValueError(f"NoisyTask {name} must increase strictly: no sample twice, in order.")
        seeds = np.flatnonzero(self.seed_mask)
        for first, second, these in (("seeds", "validation", (seeds, positions)),
                                     ("seeds", "evaluation", (seeds, self.evaluation)),
                                     ("validation", "evaluation", (positions, self.evaluation))):
            if np.intersect1d(*these).size:
                raise ValueError(f"NoisyTask's {first} and {second} sets must not share a sample.")
        if (self.truth[seeds] < 0).any() or not np.array_equal(self.y, np.where(self.seed_mask, self.truth, -1)):
            raise ValueError("NoisyTask.y must be the truth of the seeds (seed_mask), which are in-class, and -1 "
                             "elsewhere.")
        for name in ("noise_ratio", "label_ratio"):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not 0 <= value <= 1:
                raise ValueError(f"NoisyTask.{name} must be a number in [0, 1], got {value!r}.")

    @property
    def n_samples(self):
        """Number of samples in the task, ``|D ∪ D_o|``."""
        return int(self.indices.size)

    @property
    def n_classes(self):
        """Number of classes in the task."""
        return int(self.classes.size)

    @property
    def actual_noise_ratio(self):
        """Share of outliers in the unlabelled set, ``|D_o| / |D_u|`` (0 if ``D_u`` is empty)."""
        n_unlabelled = int((~self.seed_mask).sum())
        n_outliers = int((self.truth == -1).sum())
        return n_outliers / n_unlabelled if n_unlabelled else 0.0

    def subset(self, X):
        """Return the rows of the pool's ``X`` that belong to the task, ``X[indices]``.

        Parameters
        ----------
        X : array_like of shape (n_pool, ...)
            Features (or anything indexed by sample) of the whole pool.

        Returns
        -------
        ndarray of shape (n_task, ...)
        """
        if sp.issparse(X):
            raise ValueError("X is a scipy.sparse matrix; pass a dense array (X.toarray()) of the pool's rows.")
        array = np.asarray(X)
        if array.ndim == 0 or array.shape[0] != self.n_pool:
            raise ValueError(
                f"X has shape {array.shape} but the task was drawn from a pool of "
                f"{self.n_pool} samples; pass the pool's full X (one row per entry of y_all)."
            )
        return array[self.indices]


def make_noisy_task(y_all, n_classes, *, label_ratio=0.01, noise_ratio, random_state):
    """Draw a noisy transductive task from a labelled pool (Yang et al., Sec. 4.1).

    Every draw is uniform and without replacement, made from ``random_state``
    in this order:

    1. **Classes.** ``n_classes`` of the class ids present in ``y_all``
       (``>= 0``); ``D`` is every sample of those classes. Class ``classes[k]``
       (ids sorted increasingly) becomes task class ``k``.
    2. **Seeds** ``D_l``: ``round(label_ratio * |D|)`` samples of ``D``. Then,
       for each drawn class without a seed, in increasing class order, one
       sample of that class is added. So every class has a seed and ``|D_l|``
       exceeds ``round(label_ratio * |D|)`` by at most ``n_classes``.
    3. **Outliers** ``D_o``: ``round(noise_ratio / (1 - noise_ratio) * |D \\ D_l|)``
       samples of everything outside ``D`` (other classes and ``y_all == -1``),
       so that ``|D_o| / |D_u|`` is ``noise_ratio`` up to rounding. If fewer
       samples exist, all are taken and a ``UserWarning`` says the ratio reached.
    4. **Validation** ``D_v``: ``|D_l|`` samples of ``D_u = (D \\ D_l) ∪ D_o``.
       The evaluation set is ``D_u \\ D_v``.

    ``round`` is Python's (halves to even). The same ``y_all``, arguments and
    integer ``random_state`` always give the same task.

    Parameters
    ----------
    y_all : array_like of shape (n_pool,)
        Integer class id of every pool sample; -1 for a sample of no class.
    n_classes : int
        Number of classes ``M`` to draw, ``1 <= M <=`` the number present.
    label_ratio : float, default=0.01
        Share of ``D`` used as seeds, in ``(0, 1]`` (the paper uses 1%).
    noise_ratio : float
        Share of outliers in the unlabelled set, in ``[0, 1)`` (the paper uses
        0, 0.1, 0.3 and 0.5).
    random_state : None, int or numpy.random.Generator
        Source of randomness; pass an int for a reproducible task.

    Returns
    -------
    NoisyTask

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.evaluation.protocol import make_noisy_task
    >>> y_all = np.repeat(np.arange(10), 100)
    >>> task = make_noisy_task(y_all, 3, label_ratio=0.05, noise_ratio=0.3, random_state=0)
    >>> task.n_samples, int(task.seed_mask.sum()), round(task.actual_noise_ratio, 2)
    (422, 15, 0.3)
    """
    labels = check_pool_labels(y_all)
    n_classes = check_integer("n_classes", n_classes, low=1)
    label_ratio = check_real("label_ratio", label_ratio, low=0, high=1, low_inclusive=False)
    noise_ratio = check_real("noise_ratio", noise_ratio, low=0, high=1, high_inclusive=False)
    rng = check_random_state(random_state)

    present = np.unique(labels[labels >= 0])
    if n_classes > present.size:
        raise ValueError(
            f"n_classes={n_classes!r} is larger than the {present.size} class(es) present in "
            f"y_all; allowed: 1 to {present.size}."
        )
    classes = np.sort(rng.choice(present, size=n_classes, replace=False))

    in_task_class = np.isin(labels, classes)
    D = np.flatnonzero(in_task_class)
    seeds = rng.choice(D, size=round(label_ratio * D.size), replace=False)
    seeded = np.isin(classes, labels[seeds])
    extra = [rng.choice(np.flatnonzero(labels == c)) for c in classes[~seeded]]
    seeds = np.concatenate([seeds, np.asarray(extra, dtype=np.int64)]).astype(np.int64)

    outside = np.flatnonzero(~in_task_class)
    n_unseeded = D.size - seeds.size
    n_outliers = round(noise_ratio / (1 - noise_ratio) * n_unseeded)
    if n_outliers > outside.size:
        reached = outside.size / (outside.size + n_unseeded)
        warnings.warn(
            f"noise_ratio={noise_ratio!r} needs {n_outliers} outliers but the pool has only "
            f"{outside.size} samples outside the {n_classes} drawn classes; all are used and "
            f"the noise ratio is {reached:.4f}. Lower noise_ratio or n_classes for an exact ratio.",
            UserWarning,
            stacklevel=2,
        )
        n_outliers = outside.size
    outliers = rng.choice(outside, size=n_outliers, replace=False)

    indices = np.union1d(D, outliers)
    seed_mask = np.isin(indices, seeds)
    unlabelled = np.flatnonzero(~seed_mask)
    if unlabelled.size <= seeds.size:
        raise ValueError(
            f"label_ratio={label_ratio!r} leaves no evaluation samples: the validation set has "
            f"as many samples as the {seeds.size} seeds and the unlabelled set only "
            f"{unlabelled.size}. Lower label_ratio (the paper uses 0.01)."
        )
    validation = np.sort(rng.choice(unlabelled, size=seeds.size, replace=False))
    evaluation = np.setdiff1d(unlabelled, validation, assume_unique=True)

    pool_labels = labels[indices]
    truth = np.where(np.isin(pool_labels, classes), np.searchsorted(classes, pool_labels), -1)
    y = np.where(seed_mask, truth, -1)
    return NoisyTask(  # which freezes its arrays
        indices=indices,
        y=y,
        truth=truth,
        seed_mask=seed_mask,
        validation=(validation, truth[validation]),
        evaluation=evaluation,
        classes=classes,
        noise_ratio=noise_ratio,
        label_ratio=label_ratio,
        n_pool=int(labels.size),
    )


def outlier_auroc(confidence, truth):
    """Area under the ROC curve of ``confidence`` for telling classes from outliers.

    In-class samples (``truth >= 0``) are the positives, outliers
    (``truth == -1``) the negatives. Computed from ranks (the Mann-Whitney
    statistic), ties counting one half, in ``O(n log n)``.

    Parameters
    ----------
    confidence : array_like of shape (n_samples,)
        Finite scores; higher should mean "in class".
    truth : array_like of shape (n_samples,)
        True class index, or -1 for an outlier.

    Returns
    -------
    float
        The probability that a random in-class sample scores above a random
        outlier (ties count 1/2); NaN when either group is empty.

    Examples
    --------
    >>> from fastprop.evaluation.protocol import outlier_auroc
    >>> outlier_auroc([0.9, 0.4, 0.4, 0.1], [0, 1, -1, -1])
    0.875
    """
    scores, _, truth = check_scores(confidence, None, truth, ranking_only=True)
    positive = truth != -1
    n_positive = int(positive.sum())
    n_negative = scores.size - n_positive
    if n_positive == 0 or n_negative == 0:
        return float("nan")
    ranks = rankdata(scores)  # average ranks for ties
    u_statistic = ranks[positive].sum() - n_positive * (n_positive + 1) / 2
    return float(u_statistic / (n_positive * n_negative))


def calibration_error(confidence, correct, n_bins=10):
    """Expected calibration error of ``confidence`` as the probability of being ``correct``.

    The samples are put in ``n_bins`` equal-width bins of confidence on
    [0, 1] (1 in the last); the error is the mean over bins of
    ``|mean confidence - share correct|``, weighted by each bin's share of
    the samples.

    Parameters
    ----------
    confidence : array_like of shape (n_samples,)
        Probabilities in [0, 1].
    correct : array_like of bool, shape (n_samples,)
        E.g. whether each sample's most probable class is its truth.
    n_bins : int, default=10
        At most ``2**40``; only the bins that hold samples take memory.

    Returns
    -------
    float
        In [0, 1]; NaN for no sample.

    Examples
    --------
    >>> from fastprop.evaluation.protocol import calibration_error
    >>> calibration_error([0.75, 0.75, 0.25, 0.25], [True, False, False, False])  # |0.75 - 1/2|, |0.25 - 0|
    0.25
    """
    check_integer("n_bins", n_bins, low=1, high=MAX_BINS)
    scores = check_confidence(confidence)  # real, finite, 1-D (strings such as "0.5" are refused)
    correct = np.asarray(correct)
    if correct.dtype != bool:
        numeric = np.issubdtype(correct.dtype, np.integer) or np.issubdtype(correct.dtype, np.floating)
        if not (numeric and np.isin(correct, (0, 1)).all()):
            raise ValueError(f"correct must hold booleans (or 0 / 1), got dtype {correct.dtype}.")
        correct = correct.astype(bool)
    if scores.ndim != 1 or correct.shape != scores.shape:
        raise ValueError(f"confidence and correct must be 1-d of one length, got shapes {scores.shape} and "
                         f"{correct.shape}.")
    if not np.all((scores >= 0) & (scores <= 1)):
        raise ValueError("confidence must lie in [0, 1]: it is read as a probability.")
    if scores.size == 0:
        return float("nan")
    bins = np.minimum((scores * n_bins).astype(np.int64), n_bins - 1)
    _, occupied = np.unique(bins, return_inverse=True)  # the bins that hold samples, in order
    # per bin, |sum of confidences - count correct| / n = its share of samples x |mean confidence - share correct|
    gap = np.abs(np.bincount(occupied, scores) - np.bincount(occupied, correct))
    return float(gap.sum() / scores.size)


def _check_outputs(task, label_distributions, confidence):
    if not isinstance(task, NoisyTask):
        raise ValueError(
            f"task must be a NoisyTask from make_noisy_task, got {type(task).__name__}."
        )
    expected = (task.n_samples, task.n_classes)
    distributions = np.asarray(label_distributions)
    if distributions.shape != expected:
        raise ValueError(
            f"label_distributions has shape {distributions.shape} but the task needs "
            f"{expected}: one row per task sample (task.subset(X)) and one column per class."
        )
    if not np.issubdtype(distributions.dtype, np.number) or np.iscomplexobj(distributions):
        raise _refusal(distributions.dtype)(
            f"label_distributions must hold real numbers, got dtype {distributions.dtype}."
        )
    distributions = distributions.astype(np.float64)
    if not np.isfinite(distributions).all():
        raise ValueError("label_distributions has NaN or infinite values; all must be finite.")
    if confidence is None:
        return distributions, distributions.max(axis=1)
    scores = np.asarray(confidence)
    if scores.shape != (task.n_samples,):
        raise ValueError(
            f"confidence has shape {scores.shape} but the task needs ({task.n_samples},): one "
            "value per task sample."
        )
    return distributions, scores


def evaluate(task, label_distributions, confidence=None):
    """Score a method's output on a task with the paper's metric.

    The outlier threshold ``o_tau`` is chosen on the validation set with
    :func:`fastprop.threshold.choose_threshold`, the same rule for every
    method, and the scores below are computed on the evaluation set only.
    The predicted class is the argmax of ``label_distributions`` (the first
    column on ties).

    Parameters
    ----------
    task : NoisyTask
        The task the method was fitted on.
    label_distributions : array_like of shape (task.n_samples, task.n_classes)
        Class scores of every task sample, rows in the order of ``task.indices``.
    confidence : array_like of shape (task.n_samples,), optional
        Confidence of every task sample. Defaults to the row maximum of
        ``label_distributions``.

    Returns
    -------
    dict
        ``accuracy``
            Top-1 accuracy with rejection: truth -1 for outliers, prediction -1
            where ``confidence < outlier_threshold``.
        ``in_class_accuracy``
            Argmax accuracy on the in-class evaluation samples, without
            rejection (NaN if there are none).
        ``outlier_auroc``
            :func:`outlier_auroc` of the confidence on the evaluation set (NaN
            when it has no outlier or no in-class sample).
        ``outlier_threshold``
            ``o_tau`` chosen on the validation set (may be ``-inf``: no rejection).
        ``validation_accuracy``
            Accuracy with rejection on the validation set at ``o_tau``.
        ``best_threshold_accuracy``
            Accuracy with rejection on the evaluation set at the threshold
            best for it, known only in hindsight (the same rule chosen on the
            evaluation samples themselves): the most any threshold reaches
            with this confidence. Its excess over ``accuracy`` is what
            choosing ``o_tau`` on the small validation set cost; what remains
            below a perfect score is the ranking's and the argmax's.
        ``n_evaluated``
            Number of evaluation samples.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.evaluation.protocol import evaluate, make_noisy_task
    >>> task = make_noisy_task(np.repeat(np.arange(4), 50), 2, label_ratio=0.1,
    ...                        noise_ratio=0.2, random_state=0)
    >>> perfect = np.eye(2)[np.maximum(task.truth, 0)] * (task.truth >= 0)[:, None]
    >>> evaluate(task, perfect)["accuracy"]
    1.0
    """
    distributions, scores = _check_outputs(task, label_distributions, confidence)
    predicted = distributions.argmax(axis=1)
    scores, predicted, truth = check_scores(scores, predicted, task.truth)

    positions, truth_val = task.validation
    if positions.size == 0 or task.evaluation.size == 0:
        raise ValueError("the task's validation or evaluation set is empty; the protocol chooses o_tau on the "
                         "first and scores the second (make_noisy_task draws both).")
    threshold = choose_threshold(scores[positions], predicted[positions], truth_val)
    validation_accuracy = accuracy_with_rejection(
        scores[positions], predicted[positions], truth_val, threshold
    )

    evaluation = task.evaluation
    scores, predicted, truth = scores[evaluation], predicted[evaluation], truth[evaluation]
    in_class = truth != -1
    in_class_right = predicted[in_class] == truth[in_class]
    best_threshold = choose_threshold(scores, predicted, truth)
    return {
        "accuracy": accuracy_with_rejection(scores, predicted, truth, threshold),
        "in_class_accuracy": float(in_class_right.mean()) if in_class.any() else float("nan"),
        "outlier_auroc": outlier_auroc(scores, truth),
        "outlier_threshold": threshold,
        "validation_accuracy": validation_accuracy,
        "best_threshold_accuracy": accuracy_with_rejection(scores, predicted, truth, best_threshold),
        "n_evaluated": int(evaluation.size),
    }
