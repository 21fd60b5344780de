"""Running a check in a child forked from the test process, reported by its exit status."""

import os


def status_of_forked_check(check):
    """Fork; the child runs ``check()`` (an int, 0 for success) and exits with it, never returning to pytest.

    Returns the child's exit status, or ``-signal`` when a signal ended it; 99 when ``check`` raised.
    """
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = int(check())
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
