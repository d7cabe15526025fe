"""A pump's pace (rules/pump_pace.py): when it looks, how much it claims; times passed in."""

from delivery.rules.pump_pace import ANNOUNCED_BATCH, CLAIM_BATCH, LOOK_INTERVAL_SECONDS, Pace


def test_the_pace_takes_announced_work_at_once_in_a_small_claim():
    pace = Pace(seen=7, stalls=0)
    pace.claimed(10.0, taken=64, more=True, batch=CLAIM_BATCH, pending=500)  # a backlog, the transport full
    assert pace.claim_size(10.01, announced=None) == (False, CLAIM_BATCH)  # wait for completions
    assert pace.claim_size(10.01, announced=8) == (True, ANNOUNCED_BATCH)  # a publish: at once, small
    assert pace.seen == 8 and pace.claim_size(10.02, announced=8) == (False, CLAIM_BATCH)
    assert pace.claim_size(10.0 + LOOK_INTERVAL_SECONDS, announced=None) == (True, CLAIM_BATCH)
    # Sends completed and a full claim is due now: the announced work goes with it, not in a small claim before.
    pace.freed = True
    assert pace.claim_size(10.3, announced=9) == (True, CLAIM_BATCH) and pace.seen == 9


def test_the_pace_follows_a_full_claim_at_once_only_while_little_is_in_flight():
    pace = Pace(seen=0, stalls=0)
    pace.claimed(1.0, taken=64, more=True, batch=CLAIM_BATCH, pending=64)
    assert pace.freed and pace.claim_next(claiming=True, free=10)
    pace.claimed(1.1, taken=64, more=True, batch=CLAIM_BATCH, pending=200)
    assert not pace.freed and not pace.claim_next(claiming=True, free=10)
    pace.stalled(1)  # a stalled send gave its slot back
    assert pace.freed
    pace.claimed(1.2, taken=3, more=False, batch=CLAIM_BATCH, pending=3)
    assert not pace.more_due and not pace.claim_next(claiming=True, free=10)


def test_the_pace_looks_for_handshakes_once_an_interval():
    pace = Pace(seen=0, stalls=0)
    assert pace.time_for_handshakes(5.0) and not pace.time_for_handshakes(5.1)
    assert pace.time_for_handshakes(5.0 + LOOK_INTERVAL_SECONDS)
    pace.announced_while_lingering(3)
    assert pace.time_for_handshakes(5.3) and pace.seen == 3 and pace.more_due and pace.freed



def test_the_slots_are_reported_once_an_interval():
    pace = Pace(seen=0, stalls=0)
    assert pace.time_to_report_slots(1.0, every=5.0) and not pace.time_to_report_slots(5.9, every=5.0)
    assert pace.time_to_report_slots(6.0, every=5.0)


def test_a_wake_in_a_stream_of_publishes_gathers_and_a_lone_one_is_claimed_at_once():
    pace = Pace(seen=0, stalls=0)
    assert pace.gather_for(100.0, 0.030) == 0.0  # the first publish in a while: at once
    assert pace.streaming(100.074, 0.030) and not pace.streaming(100.076, 0.030)  # a stream: within 30 + 45 ms
    assert pace.gather_for(100.05, 0.030) == 0.030
    assert pace.gather_for(100.1, 0.030) == 0.030
    assert pace.gather_for(101.0, 0.030) == 0.0  # after a quiet spell: at once again
    assert pace.gather_for(101.01, 0.0) == 0.0 and not pace.streaming(101.02, 0.0)  # HERALD_PUMP_GATHER_MS=0
