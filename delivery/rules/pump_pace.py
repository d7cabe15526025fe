"""A pump's pace: when it looks for due work, how much it claims, when it looks for handshakes and reports its
slots — the loop's decisions by name, apart from the loop (engine/sending/pump.py). Times are `time.monotonic()`
readings, passed in.
"""

LOOK_INTERVAL_SECONDS = 0.25  # while sends are in flight and nothing new is wanted, look for due work this often
# At most this many rows per claim: the pump takes in the answers between claims, so a backlog fills the transport in
# a few rounds instead of one long one during which answers pile up unread (and a crash would repeat them all).
CLAIM_BATCH = 64
# New work announced while a backlog drains (another owner's publish, say) is looked for this often and taken by a
# claim of this size at once, before the next full claim: a fresh delivery waits for the step in progress, not for
# the next full claim after it (noisy-neighbour p50 209 → 152 ms, p99 468 → 354 ms; docs/benchmarks.md).
ANNOUNCED_LOOK_SECONDS = 0.02
ANNOUNCED_BATCH = 8
# Wakes closer than the gathering time and this are a stream (`gather_for`): with the default gathering (30 ms), a
# wake within 75 ms of the previous one. A pump's wakes in a stream are its gathering, its claim and its sends'
# answers apart (it lingers again only once they are in), so the margin is what those may take: 45 ms, as when
# the window was four gatherings of 15.
STREAM_MARGIN_SECONDS = 0.045


class Pace:
    """The pump's loop state, and its decisions by name: when to look for due work, how much to claim, when to look
    for handshakes. Times are `time.monotonic()` readings, passed in."""

    def __init__(self, seen: int, stalls: int):
        self.last_look = 0.0
        self.more_due = True  # the last look found work or left some (endpoint room, batch size)
        self.freed = True  # sends completed (or gave their slot back) since the last look
        self.seen = seen  # the work sequence last seen: a change means new work was announced
        self.handshakes_look_at = 0.0
        self.announced_look_at = 0.0
        self.stalls = stalls
        self.slots_report_at = 0.0
        self.woken_at = float("-inf")

    def claim_size(self, moment: float, announced: int | None) -> tuple[bool, int]:
        """(look now, how many rows at most). A look is due when the last one left work and sends completed since,
        or LOOK_INTERVAL_SECONDS passed; new work announced since (`announced`, the work sequence when it was read,
        else None) is taken at once by a small claim, before the next full one, unless a full one is due now
        anyway (it shares its rows across owners and tenants in turn, the announced work's too; a small claim
        before it would split one refill into two claims: the scheduler announces a backlog's due rows each
        tick)."""
        look = (self.more_due and self.freed) or moment - self.last_look >= LOOK_INTERVAL_SECONDS
        if announced is not None and announced != self.seen:
            self.seen = announced
            if not look:
                return True, ANNOUNCED_BATCH
        return look, CLAIM_BATCH

    def gather_for(self, moment: float, gather: float) -> float:
        """A lingering pump woken by new work at `moment`: how long to gather before it claims. `gather` while
        publishes arrive steadily (the previous wake less than `gather` + STREAM_MARGIN_SECONDS ago): one claim then
        takes what arrives meanwhile instead of one claim each, a round's cost being mostly per round, not per
        delivery (docs/benchmarks.md, "The steady rate, a third cheaper"). A publish after a quiet spell is claimed
        at once."""
        streaming = self.streaming(moment, gather)
        self.woken_at = moment
        return gather if streaming else 0.0

    def streaming(self, moment: float, gather: float) -> bool:
        """Whether publishes arrive steadily: the last wake was less than `gather` + STREAM_MARGIN_SECONDS ago.
        Never without gathering (`gather` 0)."""
        return gather > 0 and moment - self.woken_at < gather + STREAM_MARGIN_SECONDS

    def time_to_read_announcements(self, moment: float) -> bool:
        if moment < self.announced_look_at:
            return False
        self.announced_look_at = moment + ANNOUNCED_LOOK_SECONDS
        return True

    def time_for_handshakes(self, moment: float) -> bool:
        """A cheap look, but not one per claim of a backlog."""
        if moment < self.handshakes_look_at:
            return False
        self.handshakes_look_at = moment + LOOK_INTERVAL_SECONDS
        return True

    def time_to_report_slots(self, moment: float, every: float) -> bool:
        """Every `every` seconds: the process's send slots, for the operators' figures."""
        if moment < self.slots_report_at:
            return False
        self.slots_report_at = moment + every
        return True

    def claimed(self, moment: float, taken: int, more: bool, batch: int, pending: int) -> None:
        """After a claim of at most `batch` rows took `taken`. A full claim may be followed at once while little is
        in flight (a cold start, a slow endpoint's backlog); beyond that, claims follow completions. (Up to half
        the slots instead, 20 endpoints answering in 200 ms drained at 0.95-1.14x their ceiling against 0.80-0.88x,
        and the chaos run's kill -9 lost 4-5x as many sends to resend: docs/benchmarks.md, "Twenty endpoints
        answering in 200 ms, again".)"""
        self.last_look = moment
        small = batch < CLAIM_BATCH
        self.more_due = more or (small and self.more_due)
        self.freed = (taken == batch and pending < 2 * CLAIM_BATCH) or (small and self.freed)

    def stalled(self, stalls: int) -> bool:
        """A send stalled and gave its slot back: look again. Whether one did since the last call."""
        if stalls != self.stalls:
            self.stalls, self.freed = stalls, True
            return True
        return False

    def claim_next(self, claiming: bool, free: int) -> bool:
        return self.freed and self.more_due and claiming and free > 0

    def announced_while_lingering(self, latest: int) -> None:
        """New work was published while lingering: look at once, handshakes too."""
        self.more_due, self.freed, self.seen = True, True, latest
        self.handshakes_look_at = 0.0
