"""Data for demos and tests: a synthetic noisy mixture, and embeddings from disk.

:func:`make_noisy_mixture` draws a pool that looks like the embeddings
label propagation meets in practice: many classes of uneven size, each a
union of sub-modes on the unit sphere, confusable neighbours, and samples of
no class (``y == -1``), some diffuse and some from unlisted clusters that sit
next to real classes. :func:`load_embeddings` reads an ``.npz`` or ``.npy``
file of embeddings without unpickling anything.
"""

import os
from pathlib import Path

import numpy as np

from .._files import NpzArchive, read_npy
from .._validation import (
    as_integer_labels,
    check_features,
    check_integer,
    check_memory,
    check_random_state,
    check_real,
)

__all__ = ["make_noisy_mixture", "load_embeddings"]

#: make_noisy_mixture's largest ``overlap`` (far past pure noise; its float32 rows stay finite) and
#: ``class_imbalance`` (the class sizes' weights stay finite).
MAX_OVERLAP = 1e6
MAX_CLASS_IMBALANCE = 1e12

# Geometry of make_noisy_mixture, in its latent space of dimension r. An offset
# "f g" is a Gaussian vector g of per-coordinate scale 1/sqrt(r), so of norm
# close to 1, times a factor f: roughly the tangent of the angle it turns by.
_SHARED = 0.6  # weight of the direction all groups share: cos(group, group') ~ 0.26
_CLASS_SPREAD = 0.3  # class centre around its group centre: cos(class, class') ~ 0.92
_MODE_SPREAD = 0.25  # sub-mode around its class centre: cos(mode, class) ~ 0.97
_NOISE = 0.8  # sample noise around its sub-mode at overlap=1 (calibrated, see docstring)
_DIFFUSE = 2.0  # diffuse outliers around a group centre, relative to the sample noise
_AMBIENT = 0.2  # isotropic noise in all n_features dimensions, relative to a unit vector


def _unit_rows(array):
    """Scale every row of ``array`` to unit L2 norm, in place, and return it.

    In place and in the array's own precision, unlike
    :func:`fastprop.rows.unit_rows` (a float64 scale, a copy): the generators
    hold a million rows at a time, and their output stays the same bit for bit.
    """
    array /= np.sqrt(np.einsum("ij,ij->i", array, array))[:, None]
    return array


def _perturb(rng, centres, scale):
    """``normalise(centres + scale * g)``, ``g`` isotropic Gaussian of norm ~1, in float32."""
    noise = rng.standard_normal(centres.shape, dtype=np.float32)
    noise *= np.float32(scale / np.sqrt(centres.shape[1]))
    noise += centres
    return _unit_rows(noise)


def _split(rng, total, weights):
    """Split ``total`` into counts proportional to ``weights`` (largest remainder)."""
    shares = total * np.asarray(weights, dtype=np.float64) / np.sum(weights)
    counts = np.floor(shares).astype(np.int64)
    remainder = int(total - counts.sum())
    if remainder:
        # Ties in the fractional parts are broken at random, not by position.
        order = np.lexsort((rng.random(counts.size), -(shares - counts)))
        counts[order[:remainder]] += 1
    return counts


def make_noisy_mixture(
    n_samples=10000,
    n_classes=20,
    *,
    n_features=64,
    intrinsic_dim=32,
    modes_per_class=3,
    class_imbalance=5.0,
    overlap=1.0,
    outlier_fraction=0.2,
    diffuse_fraction=0.3,
    n_outlier_classes=None,
    random_state=None,
):
    """Draw a labelled pool of unit-norm embeddings with classes, sub-modes and outliers.

    The pool mimics sentence or image embeddings: many classes of uneven
    size, each a union of sub-modes, classes that are confused with their
    neighbours, structure in a subspace of low dimension, and samples of no
    class (``y == -1``) both diffuse and clustered next to real classes.

    **Generative process.** Everything is first drawn in a latent space of
    dimension ``r = min(intrinsic_dim, n_features)``. ``normalise`` scales a
    vector to unit length; ``g`` is a fresh standard normal vector divided by
    ``sqrt(r)``, so of norm about 1.

    - ``ceil(sqrt(n_classes + n_outlier_classes))`` *group* centres are
      ``normalise(0.8 e + g)`` around one direction ``e`` that all share (so
      unrelated samples still have a cosine of about 0.2, as in real
      embeddings). The classes, real and unlisted, are dealt round-robin to
      the groups in random order.
    - A class centre is ``normalise(group + 0.3 g)``: classes of one group are
      close (cosine about 0.9 between centres), the confusable neighbours.
    - A class has ``modes_per_class`` sub-mode centres
      ``normalise(class + 0.25 g)``; its samples are split between them with
      Dirichlet(2) weights, so some sub-modes are small.
    - A sample is ``mode + s g`` with ``s = 0.3 * overlap``.
    - Samples of no class: a ``diffuse_fraction`` share are ``group + 2 s g``
      around a random group centre, a broad background; the others come from
      ``n_outlier_classes`` unlisted classes built exactly like the real ones,
      in the same groups, so they lie next to real classes (the hard,
      realistic kind of outlier).
    - The latent points are mapped into ``n_features`` dimensions by a random
      isometry, noise of norm about 0.2 is added in all dimensions (centred
      uniform coordinates),
      and every row is normalised.

    Class sizes are spaced log-uniformly between 1 and ``class_imbalance``
    (relative), dealt to the classes in random order. Rows are in random order.

    **Difficulty.** At the defaults, a leave-one-out 30-nearest-neighbour
    (cosine) majority vote on 10,000 samples labels about 81% of the in-class
    samples right (79% when the outliers take part in the vote and count as
    a class of their own). It hardly depends on ``n_features`` at a fixed
    ``intrinsic_dim``; a smaller ``intrinsic_dim`` makes it harder.

    Parameters
    ----------
    n_samples : int, default=10000
        Number of samples, in-class and outliers together.
    n_classes : int, default=20
        Number of real classes, labelled ``0..n_classes-1``.
    n_features : int, default=64
        Dimension of the embeddings, at least 2.
    intrinsic_dim : int, default=32
        Dimension of the subspace that holds the class structure, at least 2
        (capped at ``n_features``).
    modes_per_class : int, default=3
        Sub-modes per class (real and unlisted); 1 gives one blob per class.
    class_imbalance : float, default=5.0
        Size of the largest real class over the smallest, in ``[1, 1e12]`` (1 = balanced).
    overlap : float, default=1.0
        Noise around each sub-mode relative to the calibrated default, in
        ``(0, 1e6]``. Larger is harder: 30-NN accuracy is about 0.99 at 0.6
        and 0.6 at 1.5.
    outlier_fraction : float, default=0.2
        Share of the samples that belong to no class (``y == -1``), in ``[0, 1)``.
    diffuse_fraction : float, default=0.3
        Share of those outliers that are diffuse background, in ``[0, 1]``; the
        rest come from the unlisted classes.
    n_outlier_classes : int or None, default=None
        Number of unlisted classes, at most ``n_samples``; ``None`` gives
        ``max(1, n_classes // 4)``.
    random_state : None, int or numpy.random.Generator, default=None
        Source of randomness; pass an int for a reproducible pool.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float32
        Unit-norm embeddings.
    y : ndarray of shape (n_samples,), int64
        Class of each sample, or -1 for a sample of no class.

    Examples
    --------
    >>> from fastprop.evaluation.datasets import make_noisy_mixture
    >>> X, y = make_noisy_mixture(2000, 10, n_features=32, random_state=0)
    >>> X.shape, X.dtype, int((y == -1).sum()), int(y.max())
    ((2000, 32), dtype('float32'), 400, 9)
    """
    n_samples = check_integer("n_samples", n_samples, low=1)
    n_classes = check_integer("n_classes", n_classes, low=1)
    n_features = check_integer("n_features", n_features, low=2)
    intrinsic_dim = check_integer("intrinsic_dim", intrinsic_dim, low=2)
    modes_per_class = check_integer("modes_per_class", modes_per_class, low=1)
    class_imbalance = check_real("class_imbalance", class_imbalance, low=1, high=MAX_CLASS_IMBALANCE)
    overlap = check_real("overlap", overlap, low=0, high=MAX_OVERLAP, low_inclusive=False)
    outlier_fraction = check_real(
        "outlier_fraction", outlier_fraction, low=0, high=1, high_inclusive=False
    )
    diffuse_fraction = check_real("diffuse_fraction", diffuse_fraction, low=0, high=1)
    n_outliers = round(outlier_fraction * n_samples)
    n_inliers = n_samples - n_outliers
    if n_inliers < n_classes:
        raise ValueError(
            f"n_samples={n_samples!r} leaves {n_inliers} in-class samples (after "
            f"outlier_fraction={outlier_fraction!r}) for n_classes={n_classes!r}; every class "
            "needs at least one sample. Raise n_samples or lower outlier_fraction."
        )
    if n_outlier_classes is None:
        n_outlier_classes = max(1, n_classes // 4)
    n_outlier_classes = check_integer("n_outlier_classes", n_outlier_classes, low=0, high=n_samples)
    rng = check_random_state(random_state)
    latent_dim = min(intrinsic_dim, n_features)
    n_modes = (n_classes + n_outlier_classes) * modes_per_class
    check_memory(4 * (2 * n_samples * n_features + n_samples * latent_dim + 2 * n_modes * latent_dim) + 24 * n_modes,
                 f"make_noisy_mixture(n_samples={n_samples}, n_features={n_features}, "
                 f"modes_per_class={modes_per_class})", "lower n_samples, n_features or modes_per_class.")

    n_diffuse = round(diffuse_fraction * n_outliers)
    if n_outlier_classes == 0 and n_diffuse < n_outliers:
        raise ValueError(
            f"n_outlier_classes=0 but diffuse_fraction={diffuse_fraction!r} asks for "
            f"{n_outliers - n_diffuse} outliers from unlisted classes; raise "
            "n_outlier_classes or set diffuse_fraction=1."
        )

    # Sample counts: real classes (at least one sample each), unlisted classes, diffuse.
    weights = np.geomspace(1.0, class_imbalance, n_classes)[rng.permutation(n_classes)]
    class_sizes = 1 + _split(rng, n_inliers - n_classes, weights)
    hidden_sizes = _split(rng, n_outliers - n_diffuse, np.ones(n_outlier_classes))

    # Latent centres: groups around a shared direction, classes (real, then unlisted), sub-modes.
    n_all_classes = n_classes + n_outlier_classes
    n_groups = int(np.ceil(np.sqrt(n_all_classes)))
    shared = _unit_rows(rng.standard_normal((1, latent_dim), dtype=np.float32))
    groups = _perturb(rng, np.repeat(_SHARED * shared, n_groups, axis=0), 1.0)
    class_group = rng.permutation(np.arange(n_all_classes) % n_groups)
    centres = _perturb(rng, groups[class_group], _CLASS_SPREAD)
    modes = _perturb(rng, np.repeat(centres, modes_per_class, axis=0), _MODE_SPREAD)

    # The source of every sample: a sub-mode, or (for a diffuse outlier) a group
    # centre, stored after the sub-modes. Rows come out in random order.
    sizes = np.concatenate([class_sizes, hidden_sizes])
    mode_weights = rng.dirichlet(np.full(modes_per_class, 2.0), size=n_all_classes)
    mode_sizes = np.concatenate([_split(rng, n, p) for n, p in zip(sizes, mode_weights)])
    mode_label = np.repeat(np.arange(n_all_classes), modes_per_class)
    mode_label[mode_label >= n_classes] = -1
    source = np.concatenate([
        np.repeat(np.arange(modes.shape[0]), mode_sizes),
        modes.shape[0] + rng.integers(0, n_groups, size=n_diffuse),
    ])[rng.permutation(n_samples)]
    y = np.concatenate([mode_label, np.full(n_groups, -1)]).astype(np.int64)[source]

    # Latent samples, then a random isometry into n_features dimensions plus ambient noise.
    noise = _NOISE * overlap
    scales = np.repeat(np.float32([noise, _DIFFUSE * noise]), [modes.shape[0], n_groups])
    latent = rng.standard_normal((n_samples, latent_dim), dtype=np.float32)
    latent *= scales[source, None] / np.float32(np.sqrt(latent_dim))
    latent += np.concatenate([modes, groups])[source]
    isometry, _ = np.linalg.qr(rng.standard_normal((n_features, latent_dim)))
    # Ambient noise: centred uniform coordinates (variance 1/12 each; cheaper than normal ones).
    X = rng.random((n_samples, n_features), dtype=np.float32)
    X -= np.float32(0.5)
    X *= np.float32(_AMBIENT * np.sqrt(12.0 / n_features))
    X += latent @ isometry.T.astype(np.float32)
    return _unit_rows(X), y


def load_embeddings(path):
    """Load embeddings (and labels, if stored) from an ``.npz`` or ``.npy`` file.

    Nothing is unpickled, and a corrupt or hostile file is a ``ValueError``
    that names it (see :mod:`fastprop._files`).

    Parameters
    ----------
    path : str or os.PathLike
        An ``.npz`` archive with an array ``X`` of shape (n_samples, n_features)
        and optionally ``y`` of shape (n_samples,) (integer labels, -1 for no
        class; other arrays are ignored), or an ``.npy`` file holding ``X`` only.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float32
        Validated with the same checks as every fastprop input (finite,
        no all-zero row), C-contiguous.
    y : ndarray of shape (n_samples,), int64, or None
        The labels, or None when the file has none.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from fastprop.evaluation.datasets import load_embeddings
    >>> path = os.path.join(tempfile.mkdtemp(), "toy.npz")
    >>> np.savez(path, X=np.eye(3), y=[0, 1, -1])
    >>> X, y = load_embeddings(path)
    >>> X.dtype, y.tolist()
    (dtype('float32'), [0, 1, -1])
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a str or os.PathLike naming a .npz or .npy file, got {path!r}.")
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".npz", ".npy"):
        raise ValueError(
            f"path={str(path)!r} has suffix {path.suffix!r}; load_embeddings reads '.npz' "
            "(arrays X and optional y) or '.npy' (X only)."
        )
    if not path.is_file():
        raise ValueError(f"path={str(path)!r} does not exist or is not a file.")
    if suffix == ".npy":
        X, y = read_npy(path), None
    else:
        with NpzArchive(path) as archive:
            if "X" not in archive.names:
                raise ValueError(
                    f"path={str(path)!r} has no array 'X'; it holds {archive.names!r}. Save the "
                    "embeddings as numpy.savez(path, X=X, y=y)."
                )
            X = archive.read("X")
            y = None
            if "y" in archive.names:
                y_shape, _ = archive.header("y")  # checked before y is read
                if X.ndim == 2 and y_shape != (X.shape[0],):
                    raise ValueError(
                        f"y in {str(path)!r} has shape {y_shape} but X has {X.shape[0]} rows; "
                        "y must be 1-D with one label per row of X."
                    )
                y = archive.read("y")
    X = check_features(X, name="X")
    if y is not None:
        y = as_integer_labels(y, "y")
        if (y < -1).any():
            raise ValueError(
                f"y in {str(path)!r} has labels below -1 (e.g. {int(y.min())}); class ids "
                "must be >= 0, and -1 marks a sample of no class."
            )
    return X, y
