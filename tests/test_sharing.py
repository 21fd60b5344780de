"""ThreadSharing: the way that measures faster is taken, the other tried again at the promised spacing."""

import math

import numba
import pytest

from fastprop.sharing import FIRST_INTERVAL, LONGEST_INTERVAL, TRY_OVERHEAD, ThreadSharing, ThreadSharingBySize


def run(sharing, cost, n_batches, work=1000):
    """Let ``sharing`` choose ``n_batches`` times; batch ``b`` costs ``cost(shared, b)`` seconds per vertex."""
    choices = []
    for batch in range(n_batches):
        shared = sharing.share()
        sharing.record(shared, cost(shared, batch) * work, work)
        choices.append(shared)
    return choices


def tries(choices, usual):
    return [batch for batch, shared in enumerate(choices) if shared != usual]


@pytest.mark.parametrize("forced", [True, False])
def test_forced_way_is_always_taken(forced):
    assert run(ThreadSharing(forced=forced), lambda shared, batch: 1.0 if shared else 5.0, 40) == [forced] * 40


def test_quiet_machine_keeps_sharing_and_tries_alone_ever_more_rarely():
    choices = run(ThreadSharing(), lambda shared, batch: 0.6 if shared else 1.0, 3000)
    assert not choices[0] and choices[1]  # alone first; the second batch tries sharing, which wins
    alone = tries(choices, usual=True)[1:]
    assert alone[0] == 1 + FIRST_INTERVAL + 1  # a try soon after the switch
    waits = [later - earlier - 1 for earlier, later in zip(alone, alone[1:])]  # shared batches between tries
    # every loss at least doubles the wait, and a try costs 0.4/0.6 of a batch more: 23 batches apart at least
    assert waits[0] == int(-(-(1.0 / 0.6 - 1) // TRY_OVERHEAD))
    assert all(b >= min(2 * a, LONGEST_INTERVAL) for a, b in zip(waits, waits[1:]))
    assert max(waits) == LONGEST_INTERVAL


def test_busy_machine_stops_sharing_and_tries_spend_at_most_the_overhead():
    slow = 14.0  # shared 14x the cost of alone, as measured under load
    choices = run(ThreadSharing(), lambda shared, batch: slow if shared else 1.0, 2000)
    shared_batches = tries(choices, usual=False)
    # alone first; the try of the second batch loses, and the next comes once it costs TRY_OVERHEAD at most
    assert shared_batches[0] == 1
    assert shared_batches[1] - shared_batches[0] - 1 == min(int(-(-(slow - 1) // TRY_OVERHEAD)), LONGEST_INTERVAL)
    extra = len(shared_batches) * (slow - 1)  # the tries' extra time, in batches of the cheap way
    assert extra <= TRY_OVERHEAD * 2000 + slow


def test_a_change_of_load_is_followed_and_a_lucky_try_undone_at_once():
    slow = 14.0
    lucky = 1 + math.ceil((slow - 1) / TRY_OVERHEAD) + 1  # the second try of sharing on a busy machine

    def cost(shared, batch):
        if batch == lucky:  # sharing happens to win once while the machine is busy
            return 0.5 if shared else 1.0
        busy = batch < 1500
        return (slow if shared else 1.0) if busy else (0.6 if shared else 1.0)

    choices = run(ThreadSharing(), cost, 3000)
    assert tries(choices, usual=False)[:2] == [1, lucky]
    # it switched, and the first shared batch's cost (14) sends it back at once
    assert choices[lucky + 1] and not any(choices[lucky + 2: lucky + 2 + FIRST_INTERVAL])
    assert sum(choices[:1500]) <= 2 + 1 + 3
    # back to quiet: sharing again within one longest interval, and from then on but for the tries
    assert sum(choices[1500 + LONGEST_INTERVAL + 1:]) >= 0.98 * (1500 - LONGEST_INTERVAL - 1)


def test_by_size_learns_each_size_apart_and_nothing_on_one_thread():
    from threads import run_on_threads

    sharing = ThreadSharingBySize()
    seen = []

    def run(shared):
        seen.append(shared)
        return shared

    run_on_threads(1, lambda: [sharing.timed(run, 1000) for _ in range(5)])
    assert seen == [False] * 5 and sharing.by_size == {}  # one thread never shares
    if numba.config.NUMBA_NUM_THREADS < 2:
        return
    run_on_threads(2, lambda: [sharing.timed(run, work) for work in (1000, 1000, 64_000, 70_000)])
    assert sorted(sharing.by_size) == [5, 8]  # 1000 -> 10 bits, 64,000 and 70,000 -> 16 and 17 bits
    assert [c.n_shared + c.n_alone for _, c in sorted(sharing.by_size.items())] == [2, 2]
    assert seen[5:] == [False, True, False, True]  # each size starts alone and tries sharing second


def test_a_machine_turning_busy_is_noticed_within_a_few_batches():
    slow = 14.0

    def cost(shared, batch):
        if batch < 1000:  # quiet: sharing wins, alone is tried rarely
            return 0.6 if shared else 1.0
        return slow if shared else 1.0

    choices = run(ThreadSharing(), cost, 1100)
    assert sum(choices[:1000]) > 950
    assert not any(choices[1000 + 5: 1100])  # alone again after a few busy batches


def test_a_machine_turning_quiet_again_is_noticed_within_a_few_batches():
    def cost(shared, batch):
        if batch < 1000:  # busy: alone wins by far, sharing is tried every few hundred batches
            return 14.0 if shared else 1.0
        return 0.3 if shared else 0.45  # quiet: both faster, sharing faster still

    choices = run(ThreadSharing(), cost, 1100)
    assert sum(choices[:1000]) <= 5
    first_shared = 1000 + choices[1000:].index(True)
    assert first_shared <= 1000 + 60  # the slow running cost of alone halved: sharing is tried at once
    assert sum(choices[first_shared:1100]) >= 0.85 * (1100 - first_shared)  # and kept, but for the tries


def test_noisy_costs_under_load_do_not_set_off_tries():
    import random

    noise = random.Random(0)

    def cost(shared, batch):  # under load one batch costs 0.7-3.5x its usual, sharing 14x
        return (14.0 if shared else 1.0) * noise.uniform(0.7, 3.5)

    choices = run(ThreadSharing(), cost, 3000)
    assert sum(choices) <= 3000 * TRY_OVERHEAD / 13 + 4  # the spacing's budget, and the first tries
