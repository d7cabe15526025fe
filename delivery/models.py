import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from delivery.rules.send_shares import OWN
from delivery.rules.vocabulary import (
    UNFINISHED,
    AttemptOutcome,
    AttemptQueue,
    DeadLetterReason,
    DeliveryStatus,
    ErrorClass,
    choices,
)
from subscriptions.models import Endpoint, Subscription, Tenant, Topic


class Message(models.Model):
    """One published event."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="messages")
    # A deleted tenant's messages stay (the owner's own subscriptions had them too), addressed to nobody else.
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages",
                               help_text="Published for this tenant: only its subscriptions and the owner's own "
                                         "receive it.")
    broadcast = models.BooleanField(default=False, db_default=False,
                                    help_text="Published for every tenant of the owner.")
    # Whom it was published for when the owner had no such tenant yet (a registered tenant is `tenant`): a customer's
    # messages from before it registered are found by its external id (docs/tenants.md). Not kept for a registered
    # tenant, so that a tenant deleted and its external id registered again by someone else finds none of its.
    tenant_external_id = models.CharField(max_length=256, blank=True, default="", db_default="", help_text=(
        "The tenant's external id it was published for, when no tenant of the owner had it."))
    event_type = models.CharField(max_length=256, default="herald.message")
    event_version = models.CharField(max_length=64, blank=True, default="", db_default="", help_text=(
        "The version of its event type its payload is in (empty: its type has no versions)."))
    subject = models.CharField(max_length=1024, blank=True, default="")
    payload = models.JSONField(null=True, blank=True)
    payload_is_text = models.BooleanField(default=False, help_text="Published as `message` (text), not `payload`.")
    attributes = models.JSONField(default=dict, blank=True)
    # db_default: rows written by code that predates the column (a rolling upgrade, raw SQL) still insert.
    schema_mismatch = models.CharField(max_length=512, blank=True, default="", db_default="", help_text=(
        "Why its payload did not match its event type's schema, published all the same (on_mismatch record)."))
    published_at = models.DateTimeField(db_index=True)
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 (NULL = no key; unique when set)
    request_fingerprint = models.CharField(max_length=64, blank=True, default="")
    fanout_pending = models.BooleanField(default=False, help_text="Its deliveries are still being created by a "
                                                                  "fan-out job (large topics).")
    ordering_key = models.CharField(max_length=256, null=True, blank=True, help_text=(  # noqa: DJ001
        "Subscriptions with ordered delivery receive the messages of one key one at a time, in publish order."))
    # The W3C traceparent of the span that published it (empty: tracing was off): its attempts, hours later and on
    # any host, belong to that trace (delivery/engine/plumbing/tracing.py).
    trace_parent = models.CharField(max_length=55, blank=True, default="", db_default="")
    fanout_skipped = models.JSONField(null=True, blank=True, help_text=(
        "The subscriptions that got no delivery (or a held one) at publish time, by outcome: "
        '{"filtered_out": {attribute: [ids]}, "not_confirmed": [ids], "paused": [ids]}. NULL: published before '
        "decisions were recorded."))

    class Meta:
        ordering = ["-published_at"]
        indexes = [
            models.Index(fields=["topic", "-published_at"], name="message_topic_published"),
            models.Index(fields=["published_at"], condition=Q(fanout_pending=True), name="message_fanout_pending"),
            # A tenant's messages from before it registered (replays, search): few rows, kept by this partial index.
            models.Index(fields=["topic", "tenant_external_id", "published_at"],
                         condition=Q(tenant__isnull=True) & ~Q(tenant_external_id=""), name="message_unregistered"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["topic", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="message_unique_idempotency_key",
            )
        ]

    def __str__(self):
        return str(self.id)


class Delivery(models.Model):
    """One (message, subscription) pair and where it stands."""

    DeadLetterReason = DeadLetterReason

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="deliveries")
    # (Its lookups go along delivery_subscription_due, which leads with it: no index of its own to keep up.)
    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="deliveries",
                                     db_index=False)
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deliveries")
    # The topic's owner, on the row so that claiming shares due work fairly across owners (leases.claim_due).
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    # The subscription's tenant (empty: the owner's own), so that claiming shares an owner's turn fairly across its
    # tenants too.
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+",
                               db_index=False)
    status = models.CharField(max_length=16, choices=choices(DeliveryStatus), default=DeliveryStatus.PENDING)
    attempt_count = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    first_attempt_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    dead_letter_reason = models.CharField(max_length=32, choices=choices(DeadLetterReason), blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)
    # A redrive or manual retry grants a fresh attempt budget: the policy then counts attempts after
    # `budget_attempts` and measures the time-to-live from `budget_started_at` (else from publishing).
    budget_attempts = models.PositiveIntegerField(default=0)
    budget_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True,
                                       help_text="When it succeeded, was dead-lettered or dropped.")
    ordering_key = models.CharField(max_length=256, null=True, blank=True, help_text=(  # noqa: DJ001
        "The message's ordering key, for a subscription with ordered delivery (else empty)."))
    replay = models.ForeignKey("Replay", null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries",
                               help_text="The replay that created it; empty for the message's own delivery.",
                               db_index=False)  # indexed where set (delivery_replayed)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(fields=["message", "subscription"], condition=Q(replay__isnull=True),
                                    name="delivery_unique_per_subscription"),
            models.UniqueConstraint(fields=["message", "subscription", "replay"], condition=Q(replay__isnull=False),
                                    name="delivery_unique_per_replay"),
        ]
        indexes = [
            # The workers' due-work query: pending rows by due time. Partial, so it holds only pending work and a
            # claim reads a batch's worth of it however large the table grows.
            models.Index(fields=["next_attempt_at"], condition=Q(status=DeliveryStatus.PENDING),
                         name="delivery_pending_due"),
            # Fair claiming: which (owner, tenant) shares have pending work, and each one's oldest due rows (the
            # owner's own rows are tenant OWN, 0).
            models.Index(F("owner"), Coalesce(F("tenant"), Value(OWN)), F("next_attempt_at"),
                         condition=Q(status=DeliveryStatus.PENDING), name="delivery_pending_share_due"),
            # Within a share, its endpoints with pending work (a skip scan) and each one's oldest due rows, in
            # (next_attempt_at, id) order so that a claim can read on from where it stopped.
            models.Index(F("owner"), Coalesce(F("tenant"), Value(OWN)), F("endpoint"), F("next_attempt_at"), F("id"),
                         condition=Q(status=DeliveryStatus.PENDING), name="delivery_pending_endpoint_due"),
            # Lease expiry (crash recovery) scans only in-flight rows.
            models.Index(fields=["lease_until"], condition=Q(status=DeliveryStatus.IN_FLIGHT), name="delivery_lease"),
            models.Index(fields=["status", "next_attempt_at"], name="delivery_status_next"),
            # A subscription's rows by status; its pending rows by due time (a batching subscription's claim fills
            # its batch with its oldest due rows: a batch read, whatever its backlog).
            models.Index(fields=["subscription", "status", "next_attempt_at"], name="delivery_subscription_due"),
            models.Index(fields=["status", "finished_at"], name="delivery_status_finished"),
            # A replay's deliveries. Partial: the message's own deliveries (nearly all) have none, and a full index
            # took an entry for each of their row versions.
            models.Index(fields=["replay"], condition=Q(replay__isnull=False), name="delivery_replayed"),
            # Ordered delivery: the unfinished rows of one (subscription, key), in publish order.
            models.Index(fields=["subscription", "ordering_key", "id"], name="delivery_ordering",
                         condition=Q(ordering_key__isnull=False, status__in=UNFINISHED)),
        ]

    def __str__(self):
        return f"delivery {self.pk} ({self.status})"

    @property
    def budget_start(self):
        """Where the current attempt budget's time-to-live is measured from."""
        return self.budget_started_at or self.message.published_at


class Replay(models.Model):
    """A request to deliver a topic's archived messages to one subscription again."""

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="replays")
    since = models.DateTimeField()
    until = models.DateTimeField()
    filter_policy = models.JSONField(null=True, blank=True, help_text="Only messages this policy matches.")
    filter_policy_scope = models.CharField(max_length=20, default="MessageAttributes")
    event_types = models.JSONField(default=list, blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    requested_at = models.DateTimeField()
    messages = models.PositiveIntegerField(default=0, help_text="How many messages it delivers again.")

    class Meta:
        ordering = ["-requested_at", "-id"]

    def __str__(self):
        return f"replay {self.pk} of subscription {self.subscription_id}"


class Exchange(models.Model):
    """What one request of a batch carried and got back, stored once for the attempts of all the events it carried
    (without it, every event's attempt kept its own copy: a failing batch of 100 events stored 100 answers)."""

    request_headers = models.JSONField(default=dict, blank=True)
    request_body = models.TextField(blank=True, default="")
    response_headers = models.JSONField(default=dict, blank=True)
    response_body = models.TextField(blank=True, default="")

    def __str__(self):
        return f"exchange {self.id}"


class Attempt(models.Model):
    """One HTTP try of a delivery."""

    Queue = AttemptQueue

    ErrorClass = ErrorClass

    Outcome = AttemptOutcome

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    queue = models.CharField(max_length=16, choices=choices(AttemptQueue))
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    request_url = models.URLField(max_length=2048)
    request_headers = models.JSONField(default=dict, blank=True)
    request_body = models.TextField(blank=True, default="", help_text="The first 4 KiB of what was sent.")
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_headers = models.JSONField(default=dict, blank=True)
    response_body = models.TextField(blank=True, default="")
    error_class = models.CharField(max_length=32, choices=choices(ErrorClass), blank=True, default="")
    error_detail = models.CharField(max_length=1024, blank=True, default="")
    outcome = models.CharField(max_length=32, choices=choices(AttemptOutcome))
    # A batch's request: its headers and bodies are the exchange's (the fields above stay empty).
    exchange = models.ForeignKey(Exchange, null=True, blank=True, on_delete=models.SET_NULL, related_name="attempts")

    class Meta:
        ordering = ["delivery_id", "number"]
        indexes = [
            models.Index(fields=["delivery", "number"], name="attempt_delivery_number"),
            models.Index(fields=["started_at"], name="attempt_started"),
        ]

    def __str__(self):
        return f"attempt {self.number} of delivery {self.delivery_id}"

    @property
    def recorded(self):
        """Where its request and response excerpts are: the batch's exchange, or the attempt itself."""
        return self.exchange if self.exchange_id else self


class Dashboard(Message):
    """No data of its own: the operators' dashboard as an entry of Herald's section of the admin index, so a host
    project's admin links to it without overriding the admin's templates."""

    class Meta:
        proxy = True
        verbose_name = "delivery dashboard"
        verbose_name_plural = "delivery dashboard (traffic, failing endpoints, dead letters, queues)"
