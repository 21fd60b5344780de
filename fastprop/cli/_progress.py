"""Progress lines on stderr for the command line: what is running, done/total, rate, time left.

Only a terminal gets progress: :meth:`Progress.for_stream` turns it off when
stderr is redirected or ``--quiet`` is given. Messages (warnings) are written
either way. A stage without a known total still shows its elapsed time, kept
current by a background thread that only redraws the line.
"""

import shutil
import sys
import threading
import time

_PREFIX = "fastprop: "


def _count(value):
    return f"{value:,}"


def _duration(seconds):
    """``42s``, ``3m05s`` or ``2h07m``; ``0.4s`` below ten seconds."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    seconds = int(round(seconds))
    if seconds < 3600:
        minutes, seconds = divmod(seconds, 60)
        return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
    hours, seconds = divmod(seconds, 3600)
    return f"{hours}h{seconds // 60:02d}m"


def _rate(per_second):
    if per_second >= 100:
        return f"{per_second:,.0f}/s"
    return f"{per_second:.2g}/s"


def format_progress(label, elapsed, done=None, total=None, *, unit="", rate=None, detail=None):
    """One progress line (without the ``fastprop:`` prefix).

    Parameters
    ----------
    label : str
        What is running.
    elapsed : float
        Seconds since the stage started.
    done, total : int or None
        Items done so far, out of ``total``; both None for a stage of unknown length.
    unit : str
        Name of the items, e.g. ``"confident"``.
    rate : float or None
        Items per second; with ``total`` it also gives the time left.
    detail : str or None
        Appended after a dash (e.g. the last run's result).

    Examples
    --------
    >>> format_progress("bench", 3.2, 5, 20, unit="fits", rate=1.5)
    'bench: 5/20 fits (25%), 1.5/s, ~10s left [3.2s]'
    """
    parts = [label]
    if done is not None:
        count = f"{_count(done)}/{_count(total)}" if total else _count(done)
        if unit:
            count += f" {unit}"
        if total:
            count += f" ({100 * done / total:.0f}%)"
        fields = [count]
        if rate:
            fields.append(_rate(rate))
            if total and total > done:
                fields.append(f"~{_duration((total - done) / rate)} left")
        parts = [f"{label}: " + ", ".join(fields)]
    text = parts[0] + f" [{_duration(elapsed)}]"
    if detail:
        text += f" - {detail}"
    return text


class Progress:
    """Progress of a sequence of stages, drawn on one refreshed line of a terminal.

    Use as a context manager. :meth:`start` begins a stage (finishing the one
    before), :meth:`update` reports ``done`` of ``total``, :meth:`finish` ends
    the stage with a line that says how long it took. When disabled every
    method but :meth:`message` does nothing.

    Parameters
    ----------
    enabled : bool
        Draw progress at all.
    stream : file object, default=sys.stderr
    interval : float, default=0.25
        Seconds between redraws of the line (by the update calls and by the
        background thread that keeps the elapsed time current).
    clock : callable, default=time.monotonic
    """

    def __init__(self, enabled, *, stream=None, interval=0.25, clock=time.monotonic):
        self.enabled = bool(enabled)
        self._stream = sys.stderr if stream is None else stream
        self._interval = interval
        self._clock = clock
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = None
        self._stage = None
        self._last_draw = -float("inf")

    @classmethod
    def for_stream(cls, stream=None, *, quiet=False, **options):
        """Enabled when ``stream`` (default stderr) is a terminal and ``quiet`` is false."""
        stream = sys.stderr if stream is None else stream
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        return cls(tty and not quiet, stream=stream, **options)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback):
        self.close(failed=exc_type is not None)
        return False

    # ------------------------------------------------------------------ stages

    def start(self, label, total=None, *, unit="", initial=0):
        """Begin the stage ``label`` (``total`` items, or None if unknown).

        ``initial`` items count as done before the stage started (they do not
        add to the rate). A stage that may stop short of a count (FastProp's
        patch loop) has no ``total``: a total must be one the stage reaches.
        """
        if not self.enabled:
            return
        with self._lock:
            if self._stage is not None:
                self._finish_locked(None)
            now = self._clock()
            self._stage = {
                "label": label, "total": total, "unit": unit, "done": None, "detail": None,
                "start": now, "initial": initial,
            }
            self._draw_locked(force=True)
        if self._thread is None:
            self._thread = threading.Thread(target=self._tick, name="fastprop-progress", daemon=True)
            self._thread.start()

    def update(self, done, total=None, *, detail=None):
        """Report ``done`` items (of ``total``, which may change)."""
        if not self.enabled:
            return
        with self._lock:
            stage = self._stage
            if stage is None:
                return
            stage["done"] = done
            if total is not None:
                stage["total"] = total
            if detail is not None:
                stage["detail"] = detail
            self._draw_locked(force=False)

    def finish(self, note=None):
        """End the current stage with a final line: ``label: done in 1.2s[, note]``."""
        if not self.enabled:
            return
        with self._lock:
            if self._stage is not None:
                self._finish_locked(note)

    def message(self, text):
        """Write ``fastprop: text`` on a line of its own (also when progress is disabled)."""
        with self._lock:
            if self.enabled and self._stage is not None:
                self._stream.write("\r\x1b[K")
            self._stream.write(f"{_PREFIX}{text}\n")
            if self.enabled and self._stage is not None:
                self._draw_locked(force=True)
            self._stream.flush()

    def close(self, failed=False):
        """Stop redrawing; a stage still running is finished (or its line cleared if ``failed``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if not self.enabled:
            return
        with self._lock:
            if self._stage is not None:
                if failed:
                    self._stream.write("\r\x1b[K")
                    self._stream.flush()
                    self._stage = None
                else:
                    self._finish_locked(None)

    # ---------------------------------------------------------------- drawing

    def _tick(self):
        while not self._stop.wait(self._interval):
            with self._lock:
                if self._stage is not None:
                    self._draw_locked(force=True)

    def _line(self, now):
        stage = self._stage
        rate = None
        if stage["done"] is not None and now > stage["start"]:
            rate = (stage["done"] - stage["initial"]) / (now - stage["start"]) or None
        return format_progress(
            stage["label"], now - stage["start"], stage["done"], stage["total"],
            unit=stage["unit"], rate=rate, detail=stage["detail"],
        )

    def _width(self):
        return max(20, shutil.get_terminal_size((100, 24)).columns - 1)

    def _draw_locked(self, force):
        now = self._clock()
        if not force and now - self._last_draw < self._interval:
            return
        self._last_draw = now
        text = (_PREFIX + self._line(now))[: self._width()]
        self._stream.write(f"\r{text}\x1b[K")
        self._stream.flush()

    def _finish_locked(self, note):
        stage = self._stage
        self._stage = None
        elapsed = self._clock() - stage["start"]
        text = f"{_PREFIX}{stage['label']}: done in {_duration(elapsed)}"
        if note is None and stage["done"] is not None:
            total = f"/{_count(stage['total'])}" if stage["total"] else ""
            note = f"{_count(stage['done'])}{total} {stage['unit']}".rstrip()
        if note:
            text += f", {note}"
        self._stream.write(f"\r{text[: self._width()]}\x1b[K\n")
        self._stream.flush()
