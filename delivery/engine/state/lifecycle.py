"""The one door for a delivery's state: what each state is, and every change of it with what must follow.

    (new) ──▶ pending ──claim──▶ in_flight ──try──▶ succeeded | dead_lettered | dropped
                │  ▲                  │                              │
          hold  │  │ release          └──retry / deferred──▶ pending  │ new_budget (redrive, recover, retry now)
                ▼  │                                                 ▼
               held (pending, no due time)                        pending
    waiting ──(the key's previous one finished)──▶ pending          (ordered delivery)

Names for the states no column spells alone: `held()` (pending with no due time: paused, awaiting confirmation,
endpoint disabled or frozen), `waiting()` (behind an earlier message of its ordering key), `due(now)`.

What follows a change, always the same way, whoever makes it:
- finished (succeeded, dead-lettered, dropped): the next waiting delivery of its ordering key is released in the
  same transaction; the signals (delivery/signals.py) are sent after commit (`announce`);
- due now (released, redriven, the next of a key): a pump is asked for after commit, never the scheduler;
- due later (a retry's time, a throttle's slot): the scheduler is woken after commit to plan for it.

The field changes themselves are `transitions.py` (no database access). Rows taken by a job are written back by
`leases.write_back`, only while the lease is the job's; the job then calls `settled` for what follows. Every other
status write is a function here.
"""

from collections import Counter

from django.db import transaction
from django.db.models import Min

from delivery.engine.plumbing import clock, counters
from delivery.engine.plumbing.queues import pump_after_commit, send_now_after_commit, wake_scheduler_after_commit
from delivery.engine.state import announce, ordering, transitions
from delivery.models import Delivery
from delivery.rules.vocabulary import TERMINAL, DeliveryStatus

Status = DeliveryStatus
BATCH = 1000


# --- what the states are ------------------------------------------------------------------------------------------

def held(**where):
    """Pending with no due time: not attempted until released (its time-to-live still runs)."""
    return Delivery.objects.filter(status=Status.PENDING, next_attempt_at__isnull=True, **where)


def waiting(**where):
    """Ordered delivery: behind an unfinished earlier message of its key."""
    return Delivery.objects.filter(status=Status.WAITING, **where)


def due(now, **where):
    """Pending and due at `now`: what the pumps take."""
    return Delivery.objects.filter(status=Status.PENDING, next_attempt_at__lte=now, **where)


def scheduled(after, **where):
    """Pending and due later than `after`: what the scheduler plans for."""
    return Delivery.objects.filter(status=Status.PENDING, next_attempt_at__gt=after, **where)


def pending(**where):
    """Pending, due or held."""
    return Delivery.objects.filter(status=Status.PENDING, **where)


def not_started(**where):
    """Pending or waiting: nothing of it is on its way (it follows its subscription to a new endpoint)."""
    return Delivery.objects.filter(status__in=(Status.PENDING, Status.WAITING), **where)


def in_flight(**where):
    return Delivery.objects.filter(status=Status.IN_FLIGHT, **where)


def lease_expired(now):
    """In flight with a lease that ran out: its worker died or stalled mid-try."""
    return in_flight(lease_until__lt=now)


def is_held(delivery: Delivery) -> bool:
    return delivery.status == Status.PENDING and delivery.next_attempt_at is None


def is_waiting(delivery: Delivery) -> bool:
    return delivery.status == Status.WAITING


# --- a new delivery -----------------------------------------------------------------------------------------------

def new(*, due, hold: bool = False, behind: bool = False) -> dict:
    """The state a new delivery is written in: waiting (`behind` an unfinished message of its ordering key), held
    (`hold`: its subscription is paused or awaits confirmation), or pending and due at `due`."""
    if behind:
        return {"status": Status.WAITING, "next_attempt_at": None}
    return transitions.initial(due=None if hold else due)


def new_delivery(message, *, subscription_id: int, endpoint_id: int, owner_id: int, tenant_id: int | None, due,
                 hold: bool = False, ordering_key: str | None = None, behind: bool = False, replay=None) -> Delivery:
    """An unsaved delivery of `message` to a subscription, in the state `new` gives it. Its endpoint, owner (the
    topic's) and tenant are copied from the subscription onto the row: the claim's indexes order pending rows by
    them (owner, tenant, endpoint), so every writer of a delivery builds it here, with all three."""
    return Delivery(message=message, subscription_id=subscription_id, endpoint_id=endpoint_id, owner_id=owner_id,
                    tenant_id=tenant_id, ordering_key=ordering_key, replay=replay,
                    **new(due=due, hold=hold, behind=behind))


def created(deliveries: list[Delivery]) -> None:
    """New deliveries were written (publish, fan-out, replay): the due ones ask for a pump after commit, and the
    operators' counter of deliveries created counts them then."""
    if any(d.status == Status.PENDING and d.next_attempt_at is not None for d in deliveries):
        pump_after_commit()
    counters.add_after_commit({counters.field("deliveries_created"): len(deliveries)})


# --- changes and what follows them --------------------------------------------------------------------------------

def settled(changes: dict[int, dict], *, keyed=(), now=None) -> None:
    """What follows changes already written (under a job's lease, or rows the caller locked): inside the caller's
    transaction the next message of each finished ordering key among `keyed` (ids of rows that carry a key) is
    released; after commit the finished ones are announced, and a pump is asked for (rows due now) or the
    scheduler woken (rows due later)."""
    now = now or clock.now()
    ended = {i: c["status"] for i, c in changes.items() if c.get("status") in TERMINAL}
    if ended:
        release_next([i for i in keyed if i in ended], now=now)
        announce.deliveries_finished(ended)
        counters.add_after_commit(Counter(counters.field("deliveries_finished", str(status))
                                          for status in ended.values()))
    follow_up([c.get("next_attempt_at") for c in changes.values() if c.get("status") == Status.PENDING], now)


def follow_up(due_times, now) -> None:
    """After commit: a pump for rows due by `now`, the scheduler for rows due later."""
    due_times = [at for at in due_times if at is not None]
    if any(at <= now for at in due_times):
        pump_after_commit()
    if any(at > now for at in due_times):
        wake_scheduler_after_commit()


def apply(updates: dict[int, dict], *, keyed=(), now=None) -> None:
    """Write each row's changes (rows the caller holds locked, e.g. the reconciler's expired leases), then what
    follows them."""
    for delivery_id, changes in updates.items():
        Delivery.objects.filter(id=delivery_id).update(**changes)
    settled(updates, keyed=keyed, now=now)


def hold(**where) -> int:
    """Every pending row matching `where` is held (a changed endpoint awaits confirmation). Not an attempt."""
    return pending(**where).update(**transitions.on_hold())


def release(*, now, limit: int | None = None, **where) -> int:
    """Held rows matching `where` are due at `now` (endpoint active again, subscription resumed or confirmed, a
    probe); a pump is asked for after commit. `limit`: at most this many (the oldest)."""
    rows = held(**where)
    if limit is not None:
        rows = held(id__in=list(rows.order_by("id").values_list("id", flat=True)[:limit]))
    released = rows.update(**transitions.released(now=now))
    if released:
        pump_after_commit()
    return released


def new_budget(rows, *, now) -> int:
    """Every row of `rows` (finished ones: redrive, recover) is pending and due now with a fresh attempt budget,
    a thousand rows per statement, each batch its own transaction; a pump is asked for after each commits."""
    total = 0
    while True:
        with transaction.atomic():
            ids = list(rows.select_for_update(skip_locked=True).values_list("id", flat=True)[:BATCH])
            if ids:
                total += Delivery.objects.filter(id__in=ids).update(**transitions.fresh_budget(now=now))
                pump_after_commit()
        if len(ids) < BATCH:
            return total


def retry_now(delivery: Delivery, label: str, *, now) -> None:
    """A delivery the caller locked, pending or finished, is sent at once by a job of its own, its attempt
    recorded under `label`; a finished one gets a fresh budget."""
    fresh = delivery.status != Status.PENDING
    changes = transitions.fresh_budget(now=now) if fresh else transitions.released(now=now)
    Delivery.objects.filter(id=delivery.id).update(**changes)
    send_now_after_commit([delivery.id], label)


def end_untried(rows, status: str, reason: str, *, now) -> list[int]:
    """End the rows of `rows` without a try (dead-lettered or dropped by hand, or past their time-to-live while
    held); what follows a finish follows. Rows another transaction holds are left for the next time."""
    with transaction.atomic():
        picked = list(rows.select_for_update(skip_locked=True, of=("self",)).values_list("id", "ordering_key"))
        ids = [delivery_id for delivery_id, _ in picked]
        Delivery.objects.filter(id__in=ids).update(**transitions.finished(status, reason, now=now))
        changes = {delivery_id: {"status": status} for delivery_id in ids}
        settled(changes, keyed=[delivery_id for delivery_id, key in picked if key], now=now)
    return ids


# --- ordered delivery ---------------------------------------------------------------------------------------------

def release_next(finished_ids, *, now) -> int:
    """Inside the transaction that finished `finished_ids` (deliveries with an ordering key): the next waiting
    delivery of each of their keys is pending and due now, unless the key still has its head (a redriven older
    message). Returns how many were released."""
    keys = ordering.keys_of(finished_ids) if finished_ids else []
    if not keys:
        return 0
    ordering.lock((topic_id, key) for topic_id, _, key in keys)
    return sum(_release_head(subscription_id, key, now) for _, subscription_id, key in keys)


def next_in_line(subscription_id: int, key: str) -> int | None:
    """Under the key's lock: the waiting delivery that is the key's next head, or None when the key still has its
    head (a pending or in-flight delivery, e.g. a redriven older message) or nothing waits."""
    rows = Delivery.objects.filter(subscription_id=subscription_id, ordering_key=key)
    if rows.filter(status__in=(Status.PENDING, Status.IN_FLIGHT)).exists():
        return None
    return rows.filter(status=Status.WAITING).aggregate(first=Min("id"))["first"]


def _release_head(subscription_id: int, key: str, now) -> int:
    head = next_in_line(subscription_id, key)
    if head is None:
        return 0
    released = waiting(id=head).update(**transitions.next_in_line(now=now))
    if released:
        pump_after_commit()
    return released


def release_heads(subscription_id: int | None = None, *, now=None, limit: int = 1000) -> int:
    """Each key (of one subscription, or of all) whose deliveries all wait gets its oldest released, each under
    its key's lock: a replay's keyed deliveries are written waiting and released by this, and the reconciler runs
    it as the safety net for a key left without a head."""
    now = now or clock.now()
    released = 0
    rows = waiting() if subscription_id is None else waiting(subscription_id=subscription_id)
    keys = rows.values_list("subscription__topic_id", "subscription_id", "ordering_key").distinct()[:limit]
    for topic_id, key_subscription, key in list(keys):
        with transaction.atomic():
            ordering.lock([(topic_id, key)])
            released += _release_head(key_subscription, key, now)
    return released


def release_stranded_keys(now=None) -> int:
    """The reconciler's safety net for ordering keys (see `release_heads`)."""
    return release_heads(None, now=now)


def release_ordered(subscription_id: int, *, now) -> int:
    """Ordering turned off: every waiting delivery of the subscription is due now."""
    released = waiting(subscription_id=subscription_id).update(**transitions.next_in_line(now=now))
    if released:
        pump_after_commit()
    return released
