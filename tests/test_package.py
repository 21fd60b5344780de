"""The package itself: its version, and what importing it and fitting pull in."""

import subprocess
import sys
from importlib import metadata

import fastprop


def test_version_is_the_installed_distributions():
    assert fastprop.__version__ == metadata.version("fastprop-graph")


def test_fitting_never_imports_scikit_learn():
    script = (
        "import sys, numpy as np\n"
        "from fastprop import FastProp\n"
        "from fastprop.baselines import SGC\n"
        "X = np.random.default_rng(0).normal(size=(60, 4)).astype(np.float32)\n"
        "y = np.full(60, -1); y[:2], y[30:32] = 0, 1\n"
        "model = FastProp(n_neighbors=5, random_state=0).fit(X, y)\n"
        "SGC(n_neighbors=5).fit(X, y)\n"
        "print(repr(model), model.get_params()['n_neighbors'], 'sklearn' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["FastProp(n_neighbors=5,", "random_state=0)", "5", "False"]
