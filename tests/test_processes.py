"""Forked processes: a child that cannot run Numba's GNU OpenMP layer gets a clear error, not SIGTERM."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")

#: The parent runs a parallel kernel (the graph's search), then forks; the child builds a graph and
#: reports by exit status: 3 the RuntimeError that names the start methods, 4 a graph, 5 another error.
SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np
    from fastprop import build_knn_graph
    from fastprop._concurrency import _gnu_openmp_in_use

    X = np.random.default_rng(0).normal(size=(80, 6)).astype(np.float32)
    build_knn_graph(X, 5)
    print(int(_gnu_openmp_in_use()), flush=True)
    pid = os.fork()
    if pid == 0:
        try:
            build_knn_graph(X, 5)
        except RuntimeError as error:
            os._exit(3 if "'spawn'" in str(error) and "fork" in str(error) else 5)
        except BaseException:
            os._exit(5)
        os._exit(4)
    _, status = os.waitpid(pid, 0)
    print(status, flush=True)
""")


@pytest.mark.parametrize("layer", ["default", "workqueue"])
def test_a_child_forked_after_a_parallel_kernel_ran_errors_clearly_or_works(layer):
    environment = dict(os.environ)
    if layer != "default":
        environment["NUMBA_THREADING_LAYER"] = layer
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=environment,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    gnu_openmp, status = (int(line) for line in run.stdout.split())
    assert os.WIFEXITED(status), f"the child was ended by signal {os.WTERMSIG(status)}: {run.stderr}"
    assert os.WEXITSTATUS(status) == (3 if gnu_openmp else 4), run.stderr
    if layer == "workqueue":
        assert not gnu_openmp


def test_every_public_entry_point_of_a_child_that_cannot_run_openmp_raises_the_same_error(monkeypatch):
    """What the child above meets whatever the machine's layer (where it is not GNU OpenMP, that test cannot)."""
    import numpy as np

    from fastprop import FastProp, _concurrency, build_knn_graph
    from fastprop.baselines import SGC

    X = np.random.default_rng(0).normal(size=(60, 4)).astype(np.float32)
    y = np.full(60, -1)
    y[:2] = [0, 1]
    model = FastProp(n_neighbors=5, random_state=0).fit(X, y)
    monkeypatch.setattr(_concurrency, "_forked_after_gnu_openmp", True)
    for call in (lambda: build_knn_graph(X, 5), lambda: FastProp(n_neighbors=5).fit(X, y),
                 lambda: model.predict(X[:3]), lambda: SGC(n_neighbors=5).fit(X, y)):
        with pytest.raises(RuntimeError, match=r"forked from one .* 'spawn' or 'forkserver'"):
            call()
