"""Whether the threads share a batch of patches, or the calling thread does it alone: chosen by measurement.

A batch of patches is a few milliseconds of work. Shared among the threads
it takes ``depth + 1`` parallel launches (one for a batch of whole
patches), each ending in a barrier. On a quiet machine that pays (two
threads: the patch loop 1.6-1.8x faster on Banking77 and a 50k mixture);
on a machine whose cores other processes keep busy, each barrier waits for
a thread the kernel has descheduled, and the same loop ran 4-8x *slower*
than on one thread (bench/RESULTS.md, issue #17). No fixed rule tells the
two apart in advance, so :class:`ThreadSharing` times both: it starts
on the calling thread alone, tries sharing on the second batch, then keeps
whichever costs less per patch vertex, trying the other again now and then
in case the load changes:

- 2 batches after a switch, then twice as long after every try it loses,
  never so often that the tries cost more than ``TRY_OVERHEAD`` of the
  time (a way 14x slower, as sharing was under load, is tried again only
  after 433 batches), and at most ``LONGEST_INTERVAL`` apart;
- at once when the running cost of the way taken passes what the other way
  cost when last tried (a lucky try is undone after one batch, a quiet
  machine turning busy is noticed within a few);
- at once when its slow running cost moves by a factor ``DRIFT`` from what
  it was at the last try (the load changed, in either direction: a busy
  machine turning quiet is noticed within ~50 batches).

Both ways compute every row with the same arithmetic, so the choice changes
the time and never the result.
"""

import math
import time

import numba

#: Batches between two tries of the way not taken: after a switch, and at most.
FIRST_INTERVAL = 2
LONGEST_INTERVAL = 512
#: The share of the time the tries of the slower way may cost, at most (after the first ones).
TRY_OVERHEAD = 0.03
#: Weight of the newest batch in the running cost of the way taken.
NEWEST_WEIGHT = 0.25
#: The slow running cost of the way taken (newest batch weighted ``SLOW_WEIGHT``: about the last
#: 20 batches, where one batch's cost under load varies 4-5x) moving by ``DRIFT`` (either way)
#: from what it was at the last try means the load changed: the other way is tried at once.
SLOW_WEIGHT = 0.05
DRIFT = 2.0


class ThreadSharing:
    """Chooses, batch by batch, whether the threads share the work; learns from the time each batch took.

    Parameters
    ----------
    forced : bool or None, default=None
        Always share (True) or never (False) instead of measuring; for tests
        and benches.

    Attributes
    ----------
    n_shared, n_alone : int
        Batches run each way so far.
    """

    def __init__(self, forced=None):
        self.forced = forced
        self.n_shared = 0
        self.n_alone = 0
        self._cost = {True: None, False: None}  # seconds per unit of work, running mean
        self._current = False
        self._interval = FIRST_INTERVAL
        self._until_try = 1  # the second batch tries sharing
        self._reference = None  # the way taken's cost when the other was last tried
        self._slow = None  # the way taken's cost since then, averaged over more batches

    def share(self):
        """Whether the next batch is shared among the threads."""
        if self.forced is not None:
            return self.forced
        if self._until_try == 0:
            return not self._current
        return self._current

    def record(self, shared, seconds, work):
        """The batch just run took ``seconds`` for ``work`` (its patch vertices), shared or not."""
        if shared:
            self.n_shared += 1
        else:
            self.n_alone += 1
        if self.forced is not None:
            return
        cost = seconds / max(work, 1)
        if shared == self._current:
            previous = self._cost[shared]
            self._cost[shared] = cost if previous is None else NEWEST_WEIGHT * cost + (1 - NEWEST_WEIGHT) * previous
            self._until_try -= 1
            other, reference = self._cost[not shared], self._reference
            if other is not None and self._cost[shared] > other:
                self._until_try = 0  # the way taken now costs more than the other did: try it at once
            if reference is not None:
                self._slow = SLOW_WEIGHT * cost + (1 - SLOW_WEIGHT) * self._slow
                if not reference / DRIFT <= self._slow <= reference * DRIFT:
                    self._until_try = 0  # the load changed since the last try (the other's cost is stale)
            return
        # A try of the other way: it replaces that way's cost, and wins or waits longer for the next try.
        self._cost[shared] = cost
        if self._cost[self._current] is None or cost < self._cost[self._current]:
            self._current = shared
            self._interval = FIRST_INTERVAL
        else:
            spacing = math.ceil((cost / self._cost[self._current] - 1) / TRY_OVERHEAD)
            self._interval = min(max(2 * self._interval, spacing), LONGEST_INTERVAL)
        self._until_try = self._interval
        self._reference = self._slow = self._cost[self._current]

    def timed(self, run, work):
        """Run ``run(shared)`` the way :meth:`share` chooses, record its time, return its result."""
        shared = self.share()
        clock = time.perf_counter()
        result = run(shared)
        self.record(shared, time.perf_counter() - clock, work)
        return result


class ThreadSharingBySize:
    """A :class:`ThreadSharing` for each size of work, sizes within a factor of 4 together.

    A parallel launch costs about the same whatever the work, so whether
    sharing pays depends on the size: a walk step over a few hundred seed
    rows and one over the whole graph are measured apart. Meant to live as
    long as the process (one per kind of work): what one fit learnt, the
    next uses, so a service fitting again and again tries the slower way
    only every few hundred batches, not at the start of every fit. With one
    Numba thread the work runs on the calling thread and nothing is learnt.
    """

    def __init__(self):
        self.by_size = {}

    def timed(self, run, work):
        """:meth:`ThreadSharing.timed` with the chooser of ``work``'s size."""
        if numba.get_num_threads() < 2:
            return run(False)
        size = max(int(work), 1).bit_length() // 2
        if size not in self.by_size:
            self.by_size[size] = ThreadSharing()
        return self.by_size[size].timed(run, work)
