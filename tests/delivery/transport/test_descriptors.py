"""transport/descriptors: sends in flight and stalled sized against the process's open files."""

from delivery.transport.descriptors import budget


def test_the_settings_hold_where_the_descriptors_allow():
    ample = budget(65536, max_in_flight=512, stalled_per_slot=4)
    assert (ample.in_flight, ample.stalled) == (512, 2048)


def test_a_small_limit_shrinks_the_sends_and_leaves_half_for_kept_alive_connections():
    small = budget(1024, max_in_flight=512, stalled_per_slot=4)
    assert (small.in_flight, small.stalled) == (76, 308)
    assert small.in_flight + small.stalled == (1024 - 256) // 2
    assert str(small).startswith("1024 descriptors: 76 sends in flight, 308 stalled")


def test_never_so_few_that_every_unanswered_send_would_be_ended():
    tiny = budget(100, max_in_flight=512, stalled_per_slot=4)
    assert (tiny.in_flight, tiny.stalled) == (8, 8)
