"""Quotas, in one place: what one owner (or one of its tenants) may take of what every owner shares, each a setting
with a default, each refusal naming its limit (docs/security.md, docs/tenants.md). Every door's service asks here.

    HERALD_MAX_TENANTS_PER_OWNER         tenants of one owner                                    400
    HERALD_MAX_KEYS_PER_TENANT           live API keys of one tenant                             400
    HERALD_MAX_SUBSCRIPTIONS_PER_TENANT  subscriptions of one tenant                             400
    HERALD_MAX_ENDPOINTS_PER_TENANT      distinct endpoint URLs of one tenant's subscriptions    400
    MAX_EVENT_TYPES_PER_OWNER            event types in one owner's catalog (1,000)              400

    HERALD_MAX_SUBSCRIPTIONS_PER_OWNER   subscriptions across the owner's topics (its tenants' too)   400
    HERALD_MAX_REPLAYS_PER_HOUR          replays of the owner's own subscriptions in an hour   429, Retry-After
    HERALD_MAX_REPLAYS_PER_SUBSCRIPTION_PER_HOUR   replays of one subscription in an hour   429, Retry-After
    HERALD_MAX_REPLAYS_PER_TENANT_PER_HOUR         replays of one tenant's subscriptions     429, Retry-After
    HERALD_MAX_TEST_EVENTS_PER_HOUR      test events to one subscription in an hour 429, Retry-After
    HERALD_RESEND_INTERVAL_SECONDS       between two resent confirmations of one subscription   429, Retry-After
    HERALD_MAX_RESENDS_PER_HOUR          resent confirmations of the owner's (of each tenant's) per clock hour   429
    HERALD_MAX_HANDSHAKES_PER_HOUR       confirmations asked of the owner's (its tenants' too) per clock hour   429
    HERALD_MAX_HANDSHAKES_PER_TENANT_PER_HOUR   confirmations asked of one tenant's per clock hour   429, Retry-After

(A replay's size is HERALD_MAX_REPLAY_MESSAGES, checked by the replay itself.) Counting resends and handshakes needs
Redis, as sending them does; without it the request fails as a whole (503), nothing half-done.
"""

from collections import Counter
from datetime import timedelta

from delivery.conf import herald
from delivery.engine.plumbing import redis_link
from delivery.engine.plumbing.errors import ApplicationError
from delivery.models import Delivery, Replay
from delivery.rules.send_shares import share_of
from delivery.rules.vocabulary import TEST_EVENT_TYPE, AttemptQueue
from subscriptions.models import EventType, Subscription, Tenant, TenantKey

HOUR = 3600
MAX_EVENT_TYPES_PER_OWNER = 1000


def tenants(owner) -> None:
    """Before an owner's new tenant."""
    limit = herald.MAX_TENANTS_PER_OWNER
    if Tenant.objects.filter(owner=owner).count() >= limit:
        raise ApplicationError(f"You have {limit} tenants, the most one owner may have "
                               f"(HERALD_MAX_TENANTS_PER_OWNER).")


def tenant_keys(tenant: Tenant) -> None:
    """Before a tenant's new API key."""
    live = TenantKey.objects.filter(tenant=tenant, revoked_at=None).count()
    if live >= herald.MAX_KEYS_PER_TENANT:
        raise ApplicationError(f"This tenant has {live} keys, the most one may have (HERALD_MAX_KEYS_PER_TENANT); "
                               f"revoke one first.")


def event_types(owner) -> None:
    """Before an owner's new event type: a catalog is compiled and kept per process, so its size is bounded."""
    if EventType.objects.filter(owner=owner).count() >= MAX_EVENT_TYPES_PER_OWNER:
        raise ApplicationError(f"Your catalog has {MAX_EVENT_TYPES_PER_OWNER} event types, the most it may have.")




def subscriptions(owner) -> None:
    """Before a new subscription of `owner`'s: room for one more."""
    limit = herald.MAX_SUBSCRIPTIONS_PER_OWNER
    if Subscription.objects.filter(topic__owner=owner).count() >= limit:
        raise ApplicationError(f"You have {limit} subscriptions, the most one owner may have "
                               f"(HERALD_MAX_SUBSCRIPTIONS_PER_OWNER); delete some first.")


def replay(subscription: Subscription, now) -> None:
    """Before a replay of `subscription`: fewer than the hour's allowance in the last hour, for the subscription and
    for whose it is: its tenant's allowance for a tenant's subscription, the owner's for the owner's own. (A tenant
    never uses up the owner's allowance, nor another tenant's.)"""
    hour_ago = now - timedelta(hours=1)
    recent = Replay.objects.filter(requested_at__gt=hour_ago)
    if subscription.tenant_id:
        whose = (recent.filter(subscription__tenant_id=subscription.tenant_id),
                 herald.MAX_REPLAYS_PER_TENANT_PER_HOUR, "HERALD_MAX_REPLAYS_PER_TENANT_PER_HOUR", "one tenant")
    else:
        whose = (recent.filter(subscription__topic__owner_id=subscription.topic.owner_id,
                               subscription__tenant__isnull=True),
                 herald.MAX_REPLAYS_PER_HOUR, "HERALD_MAX_REPLAYS_PER_HOUR", "one owner")
    for found, limit, setting, who in (
            (recent.filter(subscription=subscription), herald.MAX_REPLAYS_PER_SUBSCRIPTION_PER_HOUR,
             "HERALD_MAX_REPLAYS_PER_SUBSCRIPTION_PER_HOUR", "one subscription"), whose):
        if found.count() >= limit:
            oldest = found.order_by("requested_at").values_list("requested_at", flat=True).first()
            wait = max(1, int((oldest + timedelta(hours=1) - now).total_seconds()) + 1)
            raise ApplicationError(f"{limit} replays were asked for in the last hour, the most {who} may ask "
                                   f"for ({setting}); try again in {wait} s.", status_code=429, retry_after=wait)


def test_events(subscription: Subscription, now) -> None:
    """Before a test event: fewer than HERALD_MAX_TEST_EVENTS_PER_HOUR for the subscription in the last hour."""
    limit = herald.MAX_TEST_EVENTS_PER_HOUR
    recent = Delivery.objects.filter(subscription=subscription, message__event_type=TEST_EVENT_TYPE,
                                     created_at__gt=now - timedelta(hours=1))
    if recent.count() >= limit:
        raise ApplicationError(f"{limit} test events were sent to this subscription in the last hour, the most "
                               f"one may get (HERALD_MAX_TEST_EVENTS_PER_HOUR); try again later.", status_code=429,
                               retry_after=600)


def resend(subscription: Subscription, now) -> None:
    """Before a confirmation is sent again: not sooner than the interval after the last resend of this
    subscription, and within its owner's allowance for the clock hour. Counted in Redis (keys expire by
    themselves)."""
    connection = redis_link.connection(AttemptQueue.DELIVERIES)
    interval = herald.RESEND_INTERVAL_SECONDS
    key = f"herald:quota:resend:subscription:{subscription.id}"
    if interval > 0 and not connection.set(key, 1, nx=True, ex=interval):
        wait = max(1, connection.ttl(key))
        raise ApplicationError(f"A confirmation was sent again less than {interval} s ago "
                               f"(HERALD_RESEND_INTERVAL_SECONDS); try again in {wait} s.", status_code=429,
                               retry_after=wait)
    owner_key = _resend_key(subscription, now)
    with connection.pipeline() as pipe:
        count, _ = pipe.incr(owner_key).expire(owner_key, HOUR).execute()
    limit = herald.MAX_RESENDS_PER_HOUR
    if count > limit:  # refused: it counts for neither allowance
        resend_given_back(subscription, now)
        wait = _rest_of_the_hour(now)
        raise ApplicationError(f"{limit} confirmations were sent again in the last hour, the most one owner may "
                               f"send (HERALD_MAX_RESENDS_PER_HOUR); try again in {wait} s.", status_code=429,
                               retry_after=wait)


def _rest_of_the_hour(now) -> int:
    """Seconds until the next clock hour, whose allowance is new (a fixed window)."""
    return max(1, HOUR - int(now.timestamp()) % HOUR)


def _resend_key(subscription: Subscription, now) -> str:
    """The clock hour's (a fixed window) count of resends: the owner's own subscriptions share one allowance, each
    tenant has one of its own (same size)."""
    window = int(now.timestamp()) // HOUR
    owner, tenant = share_of(subscription.topic.owner_id, subscription.tenant_id)
    return f"herald:quota:resend:owner:{owner}:{tenant}:{window}"


def resend_given_back(subscription: Subscription, now) -> None:
    """A resend refused after `resend` counted it (here, or by the handshake's own quota) counts for nothing."""
    connection = redis_link.connection(AttemptQueue.DELIVERIES)
    connection.pipeline().decr(_resend_key(subscription, now)).delete(
        f"herald:quota:resend:subscription:{subscription.id}").execute()


def handshake(subscription: Subscription, now) -> None:
    """Before a confirmation request goes out to `subscription`'s endpoint, whatever asked for it (a new
    subscription, a changed endpoint or token URL, a resend): within the clock hour's allowance of its owner (all
    its subscriptions, its tenants' included: no owner sends more however many tenants it registers) and, for a
    tenant's subscription, of that tenant (so one tenant uses at most its own share of its owner's). A refusal
    counts against neither; deleting a subscription gives nothing back."""
    window = int(now.timestamp()) // HOUR
    budgets = [(f"herald:quota:handshake:owner:{subscription.topic.owner_id}:{window}",
                herald.MAX_HANDSHAKES_PER_HOUR, "HERALD_MAX_HANDSHAKES_PER_HOUR", "one owner and its tenants")]
    if subscription.tenant_id:
        budgets.insert(0, (f"herald:quota:handshake:tenant:{subscription.tenant_id}:{window}",
                           herald.MAX_HANDSHAKES_PER_TENANT_PER_HOUR, "HERALD_MAX_HANDSHAKES_PER_TENANT_PER_HOUR",
                           "one tenant"))
    connection = redis_link.connection(AttemptQueue.DELIVERIES)
    with connection.pipeline() as pipe:
        for key, *_ in budgets:
            pipe.incr(key).expire(key, HOUR)
        counts = pipe.execute()[::2]
    over = [(limit, setting, who) for (_, limit, setting, who), count in zip(budgets, counts, strict=True)
            if count > limit]
    if over:
        with connection.pipeline() as pipe:
            for key, *_ in budgets:
                pipe.decr(key)
            pipe.execute()
        limit, setting, who = over[0]
        wait = _rest_of_the_hour(now)
        raise ApplicationError(f"{limit} confirmation requests were sent this hour, the most {who} may send "
                               f"({setting}); nothing was changed. Try again in {wait} s.", status_code=429,
                               retry_after=wait)


def tenant_subscriptions(tenant: Tenant, *, url: str) -> None:
    """Before a tenant's new subscription to `url` (normalized): room for one more, and for one more endpoint if
    the tenant does not use `url` yet. Inside the caller's transaction."""
    lock_tenant(tenant)
    limit = herald.MAX_SUBSCRIPTIONS_PER_TENANT
    if Subscription.objects.filter(tenant=tenant).count() >= limit:
        raise ApplicationError(f"This tenant has {limit} subscriptions, the most one tenant may have "
                               f"(HERALD_MAX_SUBSCRIPTIONS_PER_TENANT); delete some first.")
    tenant_endpoints(tenant, url=url)


def tenant_endpoints(tenant: Tenant, *, url: str, leaving: str | None = None) -> None:
    """Before one of a tenant's subscriptions uses `url` (normalized; a new subscription, or one whose URL
    changes): room for it among the tenant's endpoints, unless the tenant uses it already. `leaving`: the URL a
    moving subscription leaves, no longer counted when no other subscription of the tenant uses it. Every door
    that changes a URL (the API's create and PATCH, the portal, the admin, Python) comes through here; inside the
    caller's transaction, one change of a tenant's endpoints at a time."""
    lock_tenant(tenant)
    using = Counter(Subscription.objects.filter(tenant=tenant).values_list("endpoint__url", flat=True))
    if url in using:
        return
    if leaving is not None and using[leaving] <= 1:
        using.pop(leaving, None)
    limit = herald.MAX_ENDPOINTS_PER_TENANT
    if len(using) >= limit:
        raise ApplicationError(f"This tenant has {len(using)} endpoints, the most one tenant may have is {limit} "
                               f"(HERALD_MAX_ENDPOINTS_PER_TENANT); remove the subscriptions of one first.",
                               field="endpoint")


def lock_tenant(tenant: Tenant) -> None:
    """Quota checks of one tenant one at a time: a second waits for the first's commit, then counts it."""
    Tenant.objects.select_for_update().filter(id=tenant.id).first()
