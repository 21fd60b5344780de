"""ThreadSharing: the way that measures faster is taken, the other tried again at the promised spacing."""

import pytest

from fastprop.sharing import FIRST_INTERVAL, LONGEST_INTERVAL, TRY_OVERHEAD, ThreadSharing


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


def test_one_thread_never_shares():
    sharing = ThreadSharing(1)
    assert run(sharing, lambda shared, batch: 1.0, 50) == [False] * 50
    assert (sharing.n_shared, sharing.n_alone) == (0, 50)


@pytest.mark.parametrize("forced", [True, False])
def test_forced_way_is_always_taken(forced):
    assert run(ThreadSharing(4, forced=forced), lambda shared, batch: 1.0 if shared else 5.0, 40) == [forced] * 40


def test_quiet_machine_keeps_sharing_and_tries_alone_ever_more_rarely():
    choices = run(ThreadSharing(2), lambda shared, batch: 0.6 if shared else 1.0, 1000)
    assert choices[0] and not choices[1]  # the second batch tries the calling thread alone
    alone = tries(choices, usual=True)
    waits = [later - earlier - 1 for earlier, later in zip(alone, alone[1:])]  # shared batches between tries
    # every loss at least doubles the wait (a try costs 0.4/0.6 of a batch more: 7 batches at least)
    assert waits[0] == 7 and all(b >= min(2 * a, LONGEST_INTERVAL) for a, b in zip(waits, waits[1:]))
    assert max(waits) == LONGEST_INTERVAL


def test_busy_machine_stops_sharing_and_tries_spend_at_most_the_overhead():
    slow = 14.0  # shared 14x the cost of alone, as measured under load
    choices = run(ThreadSharing(2), lambda shared, batch: slow if shared else 1.0, 2000)
    shared_batches = tries(choices, usual=False)
    # the first batch shares; alone wins the try of the second, and shared is tried again after FIRST_INTERVAL
    assert shared_batches[:2] == [0, 1 + FIRST_INTERVAL + 1]
    assert shared_batches[2] - shared_batches[1] - 1 == int(-(-(slow - 1) // TRY_OVERHEAD))
    after_start = len(shared_batches) - 2
    extra = after_start * (slow - 1)
    assert extra <= TRY_OVERHEAD * 2000 * 1.0 + slow  # the tries' extra time, in batches of the cheap way


def test_a_change_of_load_is_followed_and_a_lucky_try_undone_at_once():
    def cost(shared, batch):
        if batch == 300:  # one lucky shared batch while the machine is busy
            return 0.5 if shared else 1.0
        busy = batch < 600
        return (14.0 if shared else 1.0) if busy else (0.6 if shared else 1.0)

    sharing = ThreadSharing(2)
    choices = run(sharing, cost, 1500)
    if choices[300]:  # the lucky try fell on batch 300: undone within FIRST_INTERVAL batches
        assert not any(choices[301 + FIRST_INTERVAL + 1: 600])
    assert sum(choices[:600]) < 20
    # back to quiet: sharing again within one longest interval, and mostly from then on
    assert sum(choices[600 + LONGEST_INTERVAL + 1:]) >= 0.95 * (900 - LONGEST_INTERVAL - 1)
