import base64
import secrets
import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

# The event catalog's models live in subscriptions/catalog.py (imported here, so they are this app's).
from subscriptions.catalog import (  # noqa: F401
    EVENT_TYPE_NAME_VALIDATOR,
    EVENT_VERSION_VALIDATOR,
    EventType,
    EventTypeVersion,
)
from subscriptions.secrets import EncryptedSecretField, Unreadable, UnreadableSecret
from subscriptions.states import FILTER_SCOPES, EndpointState, SignatureScheme, SubscriptionStatus, choices

# `\Z`, not `$`: `$` also matches before a final line break, which would pass "orders\n".
TOPIC_NAME_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9_.-]{1,256}\Z", "Use 1 to 256 letters, digits, '_', '.' or '-'."
)


def generate_secret() -> str:
    """A Standard Webhooks signing secret: `whsec_` + base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


TENANT_ID_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9_.:@-]{1,128}\Z", "Use 1 to 128 letters, digits, '_', '.', ':', '@' or '-'.")
class Tenant(models.Model):
    """One of an owner's customers, who subscribes to the owner's open topics itself (with a tenant API key or
    through a portal link) and receives only the events published for it, or for everyone (docs/tenants.md)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tenants")
    external_id = models.CharField(max_length=128, validators=[TENANT_ID_VALIDATOR], help_text=(
        "The owner's own name for the customer (an account id): what `publish(..., tenant=...)` names."))
    name = models.CharField(max_length=200)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["owner", "external_id"], name="tenant_unique_per_owner")]

    def __str__(self):
        return f"{self.name} ({self.external_id})"


class TenantKey(models.Model):
    """A tenant's API key: shown once at creation, kept only as its SHA-256 (a key is 32 random bytes, so a fast
    hash is enough: nothing to guess), revocable. `prefix` names it in lists without revealing it."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="keys")
    name = models.CharField(max_length=200, blank=True, default="")
    prefix = models.CharField(max_length=16, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    read_only = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"{self.prefix}…"


class Portal(models.Model):
    """How an owner's tenant portal looks and where it may be framed."""

    owner = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="herald_portal")
    name = models.CharField(max_length=200, blank=True, default="", help_text="Shown in the portal's header.")
    logo_url = models.URLField(max_length=2048, blank=True, default="")
    colour = models.CharField(max_length=7, blank=True, default="", validators=[RegexValidator(
        r"^#[0-9A-Fa-f]{6}\Z", "A colour as #rrggbb.")])
    allow_transformations = models.BooleanField(default=False, db_default=False, help_text=(
        "Tenants may write transformations for their endpoints in the portal (docs/transformations.md)."))
    frame_ancestors = models.JSONField(default=list, blank=True, help_text=(
        "Origins that may show the portal in an iframe (CSP frame-ancestors), e.g. [\"https://app.example.com\"]; "
        "empty: none."))
    refresh_url = models.URLField(max_length=2048, blank=True, default="", db_default="", help_text=(
        "A page of your app the browser is sent to when a portal link has expired: it issues a fresh link and "
        "redirects to it (like Outpost's refresh URL); empty: the portal shows that the link expired."))

    def __str__(self):
        return self.name or str(self.owner)


class Topic(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="topics")
    name = models.CharField(max_length=256, validators=[TOPIC_NAME_VALIDATOR])
    description = models.TextField(blank=True, default="")
    open_to_tenants = models.BooleanField(default=False, db_default=False, help_text=(
        "The owner's tenants see this topic and may subscribe to it (like an SNS topic policy); closed topics are "
        "invisible to them."))
    delivery_policy = models.JSONField(null=True, blank=True)
    message_retention_days = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(3650)],
        help_text="How long its messages are kept (and can be replayed), in days; empty: "
                  "HERALD_MESSAGE_RETENTION_DAYS. A message is kept while any of its deliveries is unfinished.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="topic_unique_name_per_owner")]

    def __str__(self):
        return self.name


class Endpoint(models.Model):
    """Health of one URL for one owner, shared by that owner's subscriptions to the URL."""

    State = EndpointState

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="endpoints")
    # A tenant's endpoints are its own: two tenants (or a tenant and its owner) naming one URL get two health
    # records, so one's failures never disable the other's deliveries.
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="endpoints")
    url = models.URLField(max_length=2048)
    state = models.CharField(max_length=16, choices=choices(EndpointState), default=State.ACTIVE)
    consecutive_failures = models.PositiveIntegerField(default=0)
    window_attempts = models.PositiveIntegerField(default=0)
    window_failures = models.PositiveIntegerField(default=0)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_failure_at = models.DateTimeField(null=True, blank=True)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    next_probe_at = models.DateTimeField(null=True, blank=True)
    state_reason = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "url"], condition=models.Q(tenant__isnull=True),
                                    name="endpoint_unique_url_per_owner"),
            models.UniqueConstraint(fields=["tenant", "url"], condition=models.Q(tenant__isnull=False),
                                    name="endpoint_unique_url_per_tenant"),
        ]

    def __str__(self):
        return self.url


class Subscription(models.Model):
    Status = SubscriptionStatus

    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="subscriptions")
    # A tenant's subscription receives the messages published for that tenant and broadcasts; the owner's own
    # (no tenant) receive every message of the topic.
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="subscriptions")
    endpoint = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="subscriptions")
    delivery_policy = models.JSONField(null=True, blank=True)
    filter_policy = models.JSONField(null=True, blank=True, help_text=(
        "SNS filter policy: keys mapped to lists of conditions (docs/filtering.md). Empty: every message."))
    filter_policy_scope = models.CharField(
        max_length=20, choices=[(scope, scope) for scope in FILTER_SCOPES], default=FILTER_SCOPES[0],
        help_text="MessageAttributes: the policy's keys are the message's attributes; MessageBody: keys of its JSON "
                  "payload (nested keys allowed).")
    event_types = models.JSONField(default=list, blank=True, help_text=(
        "Only these event types (exact, or with * wildcards such as order.*); empty: every event type."))
    ordered_delivery = models.BooleanField(default=False, help_text=(
        "Messages with the same ordering_key arrive one at a time, in publish order, each after the previous one "
        "succeeded or was dead-lettered (docs/ordering.md)."))
    max_events_per_batch = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(5000)],
        help_text="1: one event per request. More: up to this many events per request, as a CloudEvents batch "
                  "(docs/batching.md).")
    preferred_batch_size_kb = models.PositiveIntegerField(
        default=64, validators=[MinValueValidator(1), MaxValueValidator(1024)],
        help_text="A batch stops growing at this size (a single larger event still goes alone).")
    delivery_headers = models.JSONField(default=list, blank=True, help_text=(
        "Up to 10 extra request headers: {name, value} or {name, from_attribute}; secret values are stored "
        "encrypted and never shown again (docs/delivery-headers.md)."))
    raw_message_delivery = models.BooleanField(default=False)
    event_version = models.CharField(max_length=64, blank=True, default="", db_default="", help_text=(
        "The event version this endpoint was built for: each event is delivered in the newest version of its type "
        "not after this one (docs/versions.md). Empty: the latest."))
    transformation = models.JSONField(null=True, blank=True, help_text=(
        "{code, enabled}: JavaScript defining handler(webhook), run before each send to change the payload or the "
        "method, or to cancel it (docs/transformations.md)."))
    send_trace_context = models.BooleanField(default=True, db_default=True, help_text=(
        "With tracing on, each request carries a W3C traceparent header that continues the publish's trace "
        "(docs/operators.md, \"Tracing\"); off: no trace header goes to this endpoint."))
    signature_scheme = models.CharField(max_length=16, choices=choices(SignatureScheme),
                                        default=SignatureScheme.HMAC_SHA256)
    # mTLS: a certificate the sender presents to this endpoint, its key encrypted at rest like the secrets.
    client_certificate = models.TextField(blank=True, default="")
    client_key = EncryptedSecretField(blank=True, default="")
    client_certificate_expires_at = models.DateTimeField(null=True, blank=True)
    # OAuth2 client credentials: Herald obtains a bearer token for the endpoint (delivery/engine/sending/oauth.py).
    oauth_token_url = models.URLField(max_length=2048, blank=True, default="")
    oauth_client_id = models.CharField(max_length=255, blank=True, default="")
    oauth_client_secret = EncryptedSecretField(blank=True, default="")
    oauth_scope = models.CharField(max_length=1024, blank=True, default="")
    # Encrypted at rest (subscriptions/secrets.py): the column holds `fernet:<token>`, the attribute the secret.
    secret = EncryptedSecretField(default=generate_secret)
    previous_secret = EncryptedSecretField(blank=True, default="")
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=32, choices=choices(SubscriptionStatus), default=Status.PENDING_CONFIRMATION)
    confirmation_token_hash = models.CharField(max_length=64, blank=True, default="", db_index=True)
    confirmation_expires_at = models.DateTimeField(null=True, blank=True)
    # When the handshake is to be sent (a pump takes it; while one sends it, the end of its lease); null: nothing
    # to send.
    confirmation_send_at = models.DateTimeField(null=True, blank=True, editable=False)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    # What the endpoint answered to the last handshake (docs/security.md, "Confirming a subscription"): when, its
    # HTTP status (null: no answer), an excerpt of its body, and why it did not confirm ("" when it did).
    handshake_at = models.DateTimeField(null=True, blank=True, editable=False)
    handshake_status = models.PositiveSmallIntegerField(null=True, blank=True, editable=False)
    handshake_answer = models.TextField(blank=True, default="", db_default="", editable=False)
    handshake_problem = models.CharField(max_length=500, blank=True, default="", db_default="", editable=False)
    # The public, unguessable name of its Ed25519 public keys (GET /api/keys/<keys_id>/jwks.json): no sequential id
    # in a public URL, nothing to enumerate.
    keys_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["topic", "status"], name="subscription_topic_status"),
                   # Fan-out of a tenant's message reads the owner's subscriptions and that tenant's only.
                   models.Index(fields=["topic", "tenant"], name="subscription_topic_tenant"),
                   models.Index(fields=["confirmation_send_at"], condition=models.Q(confirmation_send_at__isnull=False),
                                name="subscription_handshake_due")]

    def __str__(self):
        return f"{self.topic.name} → {self.endpoint.url}"

    @property
    def owner(self):
        return self.topic.owner

    def client_credentials(self) -> tuple[str, str] | None:
        """(certificate, key) PEM for mTLS, or None."""
        if not self.client_certificate:
            return None
        if isinstance(self.client_key, Unreadable):
            raise UnreadableSecret("no key in HERALD_SECRET_KEYS decrypts this subscription's client key; upload "
                                   "the certificate and key again (docs/security.md)")
        return self.client_certificate, self.client_key

    def signing_secrets(self, now) -> tuple[str, ...]:
        """The secrets to sign with: the current one, plus the previous one while a rotation's grace period runs."""
        if self.previous_secret and self.previous_secret_expires_at and self.previous_secret_expires_at > now:
            chosen = (self.secret, self.previous_secret)
        else:
            chosen = (self.secret,)
        if any(isinstance(secret, Unreadable) for secret in chosen):
            raise UnreadableSecret("no key in HERALD_SECRET_KEYS decrypts this subscription's signing secret; "
                                   "rotate its secret (docs/security.md)")
        return chosen


class EndpointTransition(models.Model):
    """Every change of an endpoint's state: when, from, to, why, and the counters at that moment."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="transitions")
    at = models.DateTimeField()
    from_state = models.CharField(max_length=16, choices=choices(EndpointState))
    to_state = models.CharField(max_length=16, choices=choices(EndpointState))
    reason = models.CharField(max_length=255)
    consecutive_failures = models.PositiveIntegerField(default=0)
    window_attempts = models.PositiveIntegerField(default=0)
    window_failures = models.PositiveIntegerField(default=0)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              help_text="The operator, for manual changes.")

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["endpoint", "-at"], name="transition_endpoint_at")]

    def __str__(self):
        return f"{self.from_state} → {self.to_state}"


class EndpointWindowBucket(models.Model):
    """Attempts and failures of one endpoint in one slice of the rolling rate window (upserted atomically)."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="window_buckets")
    bucket = models.BigIntegerField(help_text="Start of the slice, in seconds since the epoch.")
    attempts = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["endpoint", "bucket"], name="window_bucket_unique")]

    def __str__(self):
        return f"{self.endpoint_id}@{self.bucket}: {self.failures}/{self.attempts}"
