"""What the API takes and shows of subscriptions, and the bodies and answers of their actions: their shape. Their
rules (delivery/rules/subscription_rules.py) are checked once, by the services every door calls, so the API refuses
exactly what the admin and Python refuse. A secret is shown once, at creation or rotation."""

from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from delivery.engine.state import effective
from delivery.engine.state.effective import subscription_policy_or_default
from delivery.rules import client_certificates, delivery_headers
from delivery.rules.filters import policy as filters
from delivery.rules.policy import PolicyError
from delivery.web.api.ownership import OwnerTuning, tenant_of, tenant_scope
from delivery.web.api.signing_keys import public_key_of
from delivery.web.api.strict import StrictInput
from subscriptions.models import Subscription, Topic
from subscriptions.states import SignatureScheme


class TopicField(serializers.PrimaryKeyRelatedField):
    """A topic by id, or by name among the requester's own topics. For a tenant, its owner's topics open to
    tenants: a closed one, by id or by name, answers exactly as a topic that does not exist."""

    def get_queryset(self):
        request = self.context.get("request")
        access = tenant_of(request) if request is not None else None
        if access is None:
            return super().get_queryset()
        return tenant_scope(super().get_queryset(), access, "owner", "open")

    def to_internal_value(self, data):
        if isinstance(data, str) and not (data.isascii() and data.isdigit()):
            request = self.context.get("request")
            found = self.get_queryset().filter(owner=request.user, name=data) if request is not None else None
            topic = found.first() if found is not None else None
            if topic is None:
                raise serializers.ValidationError(f"You have no topic named {data[:256]!r}.")
            return topic
        return super().to_internal_value(data)


class DeliveryHeadersField(serializers.JSONField):
    """Delivery headers as stored, shown without secret values."""

    def to_representation(self, value):
        return delivery_headers.shown(value)


@extend_schema_field({"type": "object", "nullable": True, "required": ["code"], "additionalProperties": False,
                      "properties": {"code": {"type": "string"}, "enabled": {"type": "boolean", "default": True}}})
class TransformationField(serializers.JSONField):
    """A transformation's shape in the schema; its rules (rules/subscription_rules.transformation_problem) and the
    compile of its code are the service's."""


class SubscriptionSerializer(OwnerTuning, StrictInput, serializers.ModelSerializer):
    """Output and input of subscriptions: shapes only. The rules (subscription_rules) and what is stored of the
    stream options and credentials (delivery headers encrypted, a client certificate inspected, a token URL
    checked) are the service's, checked once for every door (subscribing.checked_options, check_rules). The secret
    is never part of it (see SubscriptionCreatedSerializer)."""

    owner_tuning = ("delivery_policy", "effective_delivery_policy", "effective_delivery_policy_sources",
                    "max_events_per_batch", "preferred_batch_size_kb")

    topic = TopicField(queryset=Topic.objects.all(), help_text="The topic's id or name.")
    tenant = serializers.SlugRelatedField(slug_field="external_id", read_only=True,
                                          help_text="The tenant whose subscription it is; empty: the owner's own.")
    endpoint = serializers.CharField(source="endpoint.url", max_length=2048)
    endpoint_id = serializers.IntegerField(source="endpoint.id", read_only=True)
    endpoint_state = serializers.CharField(source="endpoint.state", read_only=True)
    effective_delivery_policy = serializers.SerializerMethodField()
    effective_delivery_policy_sources = serializers.SerializerMethodField(
        help_text="Where each section of the effective policy comes from: subscription, topic or default "
                  "(SNS's EffectiveDeliveryPolicy, section by section).")
    signature_scheme = serializers.ChoiceField(
        choices=[s.value for s in SignatureScheme], required=False,
        help_text="hmac-sha256 (v1, a shared whsec_ secret; the default) or ed25519 (v1a: Herald keeps the signing "
                  "key, receivers verify with public_key). Changing it issues a new key; the old one signs too for "
                  "24 hours.")
    secret = serializers.CharField(
        required=False, write_only=True, max_length=200, trim_whitespace=False,
        help_text="hmac-sha256: a whsec_ secret of your own (base64 of 24 to 64 random bytes; `manage.py "
                  "herald_secret` makes one), so your receiver is configured before it is asked to confirm. "
                  "Default: Herald makes one and shows it in the answer, this once.")
    public_key = serializers.SerializerMethodField(help_text="ed25519: the whpk_ key receivers verify with.")
    previous_public_key = serializers.SerializerMethodField(
        help_text="ed25519: the previous key, while a rotation's grace period runs.")
    signing_keys_url = serializers.SerializerMethodField(
        help_text="ed25519: this subscription's public keys as a JSON Web Key Set (no token needed; it answers once "
                  "the endpoint has confirmed).")
    client_certificate = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=client_certificates.MAX_PEM_CHARS,
        help_text="mTLS: a PEM certificate Herald presents to the endpoint (with client_key; both empty to remove).")
    oauth_token_url = serializers.CharField(
        required=False, allow_blank=True, max_length=2048,
        help_text="OAuth2 client credentials: the token URL Herald gets a bearer token from for this endpoint "
                  "(with oauth_client_id and oauth_client_secret; all empty to remove).")
    oauth_client_id = serializers.CharField(required=False, allow_blank=True, max_length=255)
    oauth_client_secret = serializers.CharField(
        required=False, allow_blank=True, write_only=True, max_length=1024,
        help_text="Stored encrypted, never shown again.")
    oauth_scope = serializers.CharField(required=False, allow_blank=True, max_length=1024,
                                        help_text="e.g. api://my-app/.default")
    event_types = serializers.JSONField(
        required=False, help_text="Only these event types: exact, or with * wildcards (order.*); [] for all.")
    delivery_headers = DeliveryHeadersField(
        required=False,
        help_text="Up to 10 extra headers: {name, value, secret?} or {name, from_attribute}. Secret values are "
                  "stored encrypted and shown as null; give {name, secret: true} without a value to keep one.")
    transformation = TransformationField(
        required=False, allow_null=True,
        help_text="{code, enabled}: JavaScript defining function handler(webhook), run before each send; it may change "
                  "webhook.payload, webhook.method (POST or PUT) or set webhook.cancel. Its code is compiled when "
                  "saved (a 400 names the line); null removes it. Try it with POST transformation/test/.")
    event_version = serializers.CharField(
        required=False, allow_blank=True, max_length=64,
        help_text="The event version this endpoint was built for (docs/versions.md): each event is delivered in the "
                  "newest version of its type not after it, brought down by the catalog's down-converters. Default: "
                  "the catalog's latest when the subscription is made; empty follows the latest.")
    last_handshake = serializers.SerializerMethodField(
        help_text="What the endpoint answered to the last confirmation request: at, status (null: no answer), "
                  "problem (why it did not confirm; empty when it did). Null: none answered yet. (Its body is not "
                  "shown: until it confirms, the URL may be anyone's; operators see an excerpt in the admin.)")
    client_key = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, write_only=True,
        max_length=client_certificates.MAX_PEM_CHARS,
        help_text="mTLS: the certificate's unencrypted PEM private key; stored encrypted, never shown again.")

    class Meta:
        model = Subscription
        fields = ["id", "topic", "tenant", "endpoint", "endpoint_id", "endpoint_state", "delivery_policy",
                  "effective_delivery_policy", "effective_delivery_policy_sources", "filter_policy",
                  "raw_message_delivery", "signature_scheme",
                  "secret", "public_key", "previous_public_key", "signing_keys_url", "client_certificate",
                  "client_key", "client_certificate_expires_at", "oauth_token_url", "oauth_client_id",
                  "oauth_client_secret", "oauth_scope", "filter_policy_scope", "event_types", "ordered_delivery",
                  "max_events_per_batch", "preferred_batch_size_kb", "delivery_headers", "send_trace_context",
                  "transformation", "event_version", "status", "confirmed_at",
                  "last_handshake", "created_at", "updated_at"]
        read_only_fields = ["id", "status", "confirmed_at", "client_certificate_expires_at", "created_at",
                            "updated_at"]

    @extend_schema_field({"type": "object", "nullable": True, "properties": {
        "at": {"type": "string", "format": "date-time"}, "status": {"type": "integer", "nullable": True},
        "problem": {"type": "string"}}})
    def get_last_handshake(self, obj) -> dict | None:
        if obj.handshake_at is None:
            return None
        return {"at": obj.handshake_at, "status": obj.handshake_status, "problem": obj.handshake_problem}

    def get_effective_delivery_policy(self, obj) -> dict:
        return subscription_policy_or_default(obj)[0].document  # (one that no longer merges: the default's)

    def get_effective_delivery_policy_sources(self, obj) -> dict[str, str]:
        try:
            return effective.sources(obj)
        except PolicyError:
            return {"*": "default (the subscription's policy no longer makes a valid one with its topic's)"}

    def get_public_key(self, obj) -> str | None:
        return public_key_of(obj.secret)

    def get_signing_keys_url(self, obj) -> str | None:
        if obj.signature_scheme != SignatureScheme.ED25519:
            return None
        return reverse("herald:signing-keys", args=[obj.keys_id])

    def get_previous_public_key(self, obj) -> str | None:
        if obj.previous_secret_expires_at is None or obj.previous_secret_expires_at <= timezone.now():
            return None
        return public_key_of(obj.previous_secret)

    def validate_topic(self, topic):
        request = self.context["request"]
        if not (request.user.is_staff or topic.owner_id == request.user.id):
            # Same answer as for a topic that does not exist: never reveal other owners' topics.
            raise serializers.ValidationError(f'Invalid pk "{topic.pk}" - object does not exist.')
        return topic


class SubscriptionUpdateSerializer(SubscriptionSerializer):
    topic = serializers.PrimaryKeyRelatedField(read_only=True)

    def validate_secret(self, value):
        raise serializers.ValidationError("a secret changes by rotation, so the old one keeps signing for 24 hours: "
                                          "POST it to rotate-secret/")


def shareable_secret(obj) -> str | None:
    """The secret a receiver needs, shown once: an HMAC secret; None for Ed25519 (the private key never leaves)."""
    return None if public_key_of(obj.secret) else obj.secret


class SubscriptionCreatedSerializer(SubscriptionSerializer):
    secret = serializers.SerializerMethodField(help_text="hmac-sha256: the whsec_ secret, shown only this once.")

    class Meta(SubscriptionSerializer.Meta):
        fields = SubscriptionSerializer.Meta.fields  # `secret` shown: this class's own field, read-only

    def get_secret(self, obj) -> str | None:
        return shareable_secret(obj)


class RotatedSecretSerializer(serializers.Serializer):
    secret = serializers.SerializerMethodField(help_text="hmac-sha256: the new whsec_ secret, shown only this once.")
    public_key = serializers.SerializerMethodField(help_text="ed25519: the new whpk_ public key.")
    previous_secret_expires_at = serializers.DateTimeField()

    def get_secret(self, obj) -> str | None:
        return shareable_secret(obj)

    def get_public_key(self, obj) -> str | None:
        return public_key_of(obj.secret)


class RedriveSerializer(StrictInput, serializers.Serializer):
    since = serializers.DateTimeField(required=False, help_text="Only dead letters from this time on.")
    until = serializers.DateTimeField(required=False, help_text="Only dead letters before this time.")


class ReplaySerializer(StrictInput, serializers.Serializer):
    since = serializers.DateTimeField(help_text="Replay messages published from this time on.")
    until = serializers.DateTimeField(required=False, help_text="... and before this time (default: now).")
    filter_policy = serializers.JSONField(required=False, help_text="Only messages this SNS filter policy matches "
                                                                   "(on top of the subscription's own filters).")
    filter_policy_scope = serializers.ChoiceField(choices=list(filters.SCOPES), default=filters.ATTRIBUTES)
    event_types = serializers.JSONField(required=False, help_text="Only these event types (order.* wildcards).")


class ReplayCreatedSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="Sent as the herald-replay header of each replayed delivery.")
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    messages = serializers.IntegerField(help_text="How many messages will be delivered again.")
    requested_at = serializers.DateTimeField()


class RecoverSerializer(StrictInput, serializers.Serializer):
    since = serializers.DateTimeField(help_text="Resend what failed for messages published from this time on.")


class CountSerializer(serializers.Serializer):
    count = serializers.IntegerField()


class RotateSecretSerializer(StrictInput, serializers.Serializer):
    secret = serializers.CharField(
        required=False, max_length=200, trim_whitespace=False,
        help_text="hmac-sha256: the new whsec_ secret, of your own; default: Herald makes one (shown this once).")


class ConfirmSerializer(StrictInput, serializers.Serializer):
    token = serializers.CharField()


class TransformationTestSerializer(StrictInput, serializers.Serializer):
    code = serializers.CharField(required=False, trim_whitespace=False,
                                 help_text="The JavaScript to run; default: the subscription's saved code.")
    payload = serializers.JSONField(required=False, allow_null=True,
                                    help_text="The webhook's payload; default: the catalog's example of event_type.")
    event_type = serializers.CharField(
        required=False, allow_blank=True, max_length=256,
        help_text="webhook.eventType; default: the subscription's first event type (an exact name).")


class TransformationResultSerializer(serializers.Serializer):
    ok = serializers.BooleanField(help_text="Whether the handler returned a webhook Herald can send.")
    method = serializers.CharField(required=False, help_text="ok: POST or PUT.")
    payload = serializers.JSONField(required=False, help_text="ok: the payload it would send.")
    cancelled = serializers.BooleanField(required=False, help_text="ok: the handler cancelled the send.")
    error = serializers.CharField(required=False, help_text="not ok: why, e.g. \"timed out after 50 ms\".")
    line = serializers.IntegerField(required=False, allow_null=True, help_text="not ok: the code's line, if known.")


class EventVersionPreviewSerializer(StrictInput, serializers.Serializer):
    event_version = serializers.CharField(
        allow_blank=True, max_length=64, help_text="The version to preview an upgrade to; empty: the latest.")


@extend_schema_field({"type": "object", "properties": {
    "version": {"type": "string"}, "payload": {}, "error": {"type": "string"},
    "line": {"type": "integer", "nullable": True}}})
class RenderingField(serializers.JSONField):
    """{version, payload}, or {version, error, line} where a down-converter failed."""


class EventVersionPreviewResultSerializer(serializers.Serializer):
    event_type = serializers.CharField()
    message = serializers.UUIDField(allow_null=True, help_text="The event previewed; null: the catalog's example.")
    current = RenderingField(help_text="As the endpoint receives it now.")
    upgraded = RenderingField(help_text="As it would receive it at event_version.")
