"""Topic, subscription and endpoint services: validate, check current state, change it."""

import hmac
from urllib.parse import urlsplit

from django.db import IntegrityError, transaction
from django.urls import reverse

from delivery.conf import herald
from delivery.engine.accounts import catalog, policies, quotas, signing_secrets, tenancy
from delivery.engine.accounts.confirmation import confirmation_request
from delivery.engine.plumbing import clock
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state import lifecycle
from delivery.rules import client_certificates, delivery_headers, subscription_rules
from delivery.rules.header_text import control_problem
from delivery.transport import sandbox, ssrf, transforms
from subscriptions.models import Endpoint, Subscription, Topic
from subscriptions.secrets import encrypt
from subscriptions.states import SignatureScheme
from subscriptions.urlnorm import DEFAULT_PORTS, InvalidURL, normalize_url


def check_rules(current: dict, changes: dict) -> None:
    """A 400 naming every rule of a subscription (delivery/rules/subscription_rules.py) the change would break."""
    found = subscription_rules.problems(current, changes)
    if found:
        raise ApplicationError.of_problems(found)


def topic_create(*, owner, name: str, description: str | None = None, delivery_policy=None,
                 message_retention_days: int | None = None, open_to_tenants: bool | None = None
                 ) -> tuple[Topic, bool]:
    """(topic, created). Like SNS CreateTopic, creating a topic you already have returns it, as long as the request
    asks for nothing different (409 naming the differences otherwise: change a topic with PATCH)."""
    policies.topic_policy_checked(delivery_policy)
    existing = Topic.objects.filter(owner=owner, name=name).first()
    if existing is None:
        try:
            with transaction.atomic():
                return Topic.objects.create(owner=owner, name=name, description=description or "",
                                            delivery_policy=delivery_policy or None,
                                            message_retention_days=message_retention_days,
                                            open_to_tenants=bool(open_to_tenants)), True
        except IntegrityError:  # created meanwhile by a concurrent request
            existing = Topic.objects.get(owner=owner, name=name)
    asked = {"description": description, "delivery_policy": delivery_policy or None,
             "message_retention_days": message_retention_days, "open_to_tenants": open_to_tenants}
    different = [field for field, value in asked.items()
                 if value is not None and value != getattr(existing, field)]
    if different:
        path = reverse("herald:topic-detail", args=[existing.id])
        raise ApplicationError(f"You already have a topic named {name!r} (id {existing.id}) with a different "
                               f"{' and '.join(different)}; change it with PATCH {path}.",
                               field="name", status_code=409)
    return existing, False


def topic_update(*, topic: Topic, **changes) -> Topic:
    if "delivery_policy" in changes:
        policies.topic_policy_checked(changes["delivery_policy"], topic=topic)
        changes["delivery_policy"] = changes["delivery_policy"] or None
    for key, value in changes.items():
        setattr(topic, key, value)
    try:
        with transaction.atomic():
            topic.save()
    except IntegrityError:
        raise ApplicationError("You already have a topic with this name.", field="name") from None
    return topic


MAX_URL_CHARS = 2048  # Endpoint.url's and oauth_token_url's columns


def checked_url(url: str, field: str) -> str:
    """`url` normalized, if Herald may send to it (the address guard at subscribe time); a 400 naming `field`. It
    goes into a request line and a Host header, so control characters are refused (not silently dropped, as URL
    parsing drops line breaks and tabs)."""
    problem = control_problem(url.strip()) if isinstance(url, str) else "must be a URL"
    if problem:
        raise ApplicationError(problem, field=field)
    if len(url.strip()) > MAX_URL_CHARS:
        raise ApplicationError(f"Ensure this field has no more than {MAX_URL_CHARS} characters.", field=field)
    try:
        normalized = normalize_url(url)
    except InvalidURL as exc:
        raise ApplicationError(str(exc), field=field) from None
    parts = urlsplit(normalized)
    allowed = ssrf.parse_networks(tuple(herald.ALLOWED_NETWORKS))
    refusal = ssrf.subscribe_time_refusal(parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme], allowed)
    if refusal:
        raise ApplicationError(refusal, field=field)
    return normalized


def endpoint_for(*, owner, url: str, tenant=None) -> Endpoint:
    """The health record of `url` for the owner (or for one of its tenants: each has its own)."""
    endpoint, _ = Endpoint.objects.get_or_create(owner=owner, tenant=tenant, url=checked_url(url, "endpoint"))
    return endpoint


def options_only(given: dict, options: tuple[str, ...]) -> None:
    """A 400 naming what in `given` is none of a subscription's `options` (rules/subscription_rules.py), whoever
    asks: nothing else of a subscription (its status, its keys) is set through a service's keywords."""
    unknown = sorted(set(given) - set(options))
    if unknown:
        raise ApplicationError(f"not an option of a subscription one can set: {', '.join(unknown)}", field=unknown[0])


def checked_options(changes: dict, subscription: Subscription | None = None, *, now=None, owner_id=None) -> dict:
    """`changes` to a subscription's stream options and credentials as they are stored, checked here for every door
    (API, admin, portal, Python): event types ([] for all); delivery headers validated, their secret values
    encrypted (a secret given without a value keeps the stored one); a client certificate and key inspected (its
    expiry noted; both empty remove them); a transformation compiled; an event version of the owner's catalog;
    OAuth2 credentials (all empty remove them and the scope; a token URL is checked as an endpoint is). A 400
    naming the field otherwise."""
    changes = dict(changes)
    current = subscription_rules.stored(subscription) if subscription is not None else {}
    if "event_types" in changes:
        changes["event_types"] = changes["event_types"] or []
    if "delivery_headers" in changes:
        changes["delivery_headers"] = _stored_headers(changes, subscription)
    if "client_certificate" in changes or "client_key" in changes:
        certificate, key = changes.get("client_certificate", ""), changes.get("client_key", "")
        if certificate or key:
            try:
                info = client_certificates.inspect(certificate, key, now or clock.now())
            except client_certificates.CertificateError as exc:
                raise ApplicationError(exc.reason, field=exc.field) from None
            changes["client_certificate_expires_at"] = info.not_after
        else:
            changes.update(client_certificate="", client_key="", client_certificate_expires_at=None)
    if "transformation" in changes:
        changes["transformation"] = checked_transformation(changes["transformation"])
    if "event_version" in changes:
        owner_id = subscription.topic.owner_id if subscription is not None else owner_id
        changes["event_version"] = catalog.checked_pin(owner_id, changes["event_version"])
    credentials = subscription_rules.OAUTH_CREDENTIALS
    if any(name in changes for name in credentials):
        if not any({**current, **changes}.get(name) for name in credentials):  # all three removed
            changes.update(oauth_token_url="", oauth_client_id="", oauth_client_secret="", oauth_scope="")
        elif changes.get("oauth_token_url"):
            changes["oauth_token_url"] = checked_url(changes["oauth_token_url"], "oauth_token_url")
    return changes


def checked_transformation(value) -> dict | None:
    """A transformation as stored ({code, enabled}; None removes it), its code compiled (transforms.check) so that no
    worker is handed code that cannot run: a 400 on `transformation` naming the line otherwise."""
    limits = transforms.limits()
    problem = subscription_rules.transformation_problem(value, limits.code_bytes)
    compiled = transforms.check(value["code"]) if value is not None and not problem else sandbox.Outcome()
    if problem or not compiled.ok:
        where = f"line {compiled.line}: " if compiled.line else ""
        raise ApplicationError(problem or f"{where}{compiled.error}", field="transformation")
    return subscription_rules.transformation_stored(value)


def _stored_headers(changes: dict, subscription: Subscription | None) -> list[dict]:
    stored = {h["name"].lower(): h["value"] for h in getattr(subscription, "delivery_headers", None) or []
              if h.get("secret")}
    oauth = bool(changes.get("oauth_token_url", getattr(subscription, "oauth_token_url", "")))
    try:
        checked = delivery_headers.validate(changes["delivery_headers"], kept_secrets=set(stored), oauth=oauth)
    except delivery_headers.HeaderError as exc:
        raise ApplicationError(str(exc), field="delivery_headers") from None
    for header in checked:
        if header.get("secret"):
            kept = header["value"] is None
            header["value"] = stored[header["name"].lower()] if kept else encrypt(header["value"])
    return checked


def subscription_create(
    *, topic: Topic, endpoint: str, delivery_policy=None, filter_policy=None, raw_message_delivery=None,
    signature_scheme=None, secret: str | None = None, tenant=None, **credentials,
) -> tuple[Subscription, str | None]:
    """(subscription, signing secret), the secret shown to the caller this once. `secret`: a `whsec_` secret of the
    caller's own (its receiver is configured with it before subscribing, so the confirmation handshake that goes
    out during this call verifies), else Herald makes one. `credentials`: the model's
    client-certificate and OAuth2 fields and stream options, checked here (`checked_options`). Like SNS Subscribe,
    subscribing an endpoint again to the same topic returns the existing subscription (secret None: it is never
    shown again) instead of a second one that would deliver every event twice; 409 if the request asks for
    different settings. `tenant`: the subscription is that tenant's (the topic must be open to tenants, its event
    types chosen from the catalog), with an endpoint record of its own, within the tenant's quotas."""
    options_only(credentials, (*subscription_rules.CREDENTIALS, *subscription_rules.STREAM_OPTIONS))
    if credentials.get("transformation") is not None:
        tenancy.tenant_transformations(tenant)
    policies.subscription_policy_checked(delivery_policy, topic=topic)
    credentials = checked_options(credentials, owner_id=topic.owner_id)
    if tenant is not None:
        tenant_rules(topic, tenant, credentials.get("event_types"))
    check_rules({}, {"filter_policy": filter_policy, "raw_message_delivery": raw_message_delivery, **credentials})
    scheme = signature_scheme or SignatureScheme.HMAC_SHA256
    own_secret = secret is not None
    secret = signing_secrets.new_secret(scheme, secret)
    with transaction.atomic():
        Topic.objects.select_for_update().filter(id=topic.id).first()  # one subscribe per topic at a time
        url = checked_url(endpoint, "endpoint")
        health = endpoint_for(owner=topic.owner, url=url, tenant=tenant)
        existing = Subscription.objects.filter(topic=topic, endpoint=health).order_by("id").first()
        if existing is not None:
            asked = {"delivery_policy": delivery_policy, "filter_policy": filter_policy,
                     "raw_message_delivery": raw_message_delivery, "signature_scheme": signature_scheme}
            _same_as(existing, health.url, asked, credentials, secret if own_secret else None)
            return existing, None
        quotas.subscriptions(topic.owner)
        if tenant is not None:
            quotas.tenant_subscriptions(tenant, url=url)
        confirmed = not herald.REQUIRE_CONFIRMATION
        subscription = Subscription.objects.create(
            topic=topic,
            tenant=tenant,
            endpoint=health,
            delivery_policy=delivery_policy or None,
            filter_policy=filter_policy or None,
            raw_message_delivery=bool(raw_message_delivery),
            signature_scheme=scheme,
            secret=secret,
            # mTLS certificate and key, OAuth2 client credentials, options (checked above); by default the event
            # version it is pinned to is the catalog's latest (docs/versions.md)
            **{"event_version": catalog.latest_version(topic.owner_id), **credentials},
            status=Subscription.Status.CONFIRMED if confirmed else Subscription.Status.PENDING_CONFIRMATION,
            confirmed_at=clock.now() if confirmed else None,  # confirmed however: no handshake was required
        )
        if not confirmed:
            confirmation_request(subscription=subscription)
    return subscription, subscription.secret


def _same_as(existing: Subscription, url: str, asked: dict, options: dict, own_secret: str | None) -> None:
    """A subscribe of an endpoint already subscribed to the topic: a 409 naming what it asks for differently (what
    it leaves out, None, is not a difference)."""
    asked_as_stored = {"delivery_policy": asked["delivery_policy"] or None,
                       "filter_policy": asked["filter_policy"] or None,
                       "raw_message_delivery": bool(asked["raw_message_delivery"]),
                       "signature_scheme": asked["signature_scheme"]}
    different = [f for f, value in asked_as_stored.items() if asked[f] is not None and value != getattr(existing, f)]
    different += [name for name in subscription_rules.STREAM_OPTIONS if name in options and name != "delivery_headers"
                  and options[name] != getattr(existing, name)]
    if own_secret is not None and not hmac.compare_digest(str(existing.secret), own_secret):
        different.append("secret")
    if different:
        path = reverse("herald:subscription-detail", args=[existing.id])
        raise ApplicationError(
            f"{url} is already subscribed to this topic (subscription {existing.id}) with a "
            f"different {' and '.join(different)}; change it with PATCH {path}.", field="endpoint", status_code=409)


def tenant_rules(topic: Topic, tenant, event_types, kept=()) -> None:
    """What a tenant's subscription must respect: a topic of its owner's that is open to tenants (else the same
    answer as for a topic that does not exist), event types from the owner's catalog. `kept`: the types the
    subscription has already, which it keeps even when the owner has deprecated or closed them since; what it adds
    is chosen from the catalog."""
    if topic.owner_id != tenant.owner_id or not topic.open_to_tenants:
        raise ApplicationError(f'Invalid pk "{topic.pk}" - object does not exist.', field="topic")
    added = [name for name in event_types or [] if name not in kept]
    if event_types and not added:
        return
    problem = catalog.tenant_choice_problem(tenant.owner_id, added or event_types)
    if problem:
        raise ApplicationError(problem, field="event_types")


def subscription_update(*, subscription: Subscription, now=None, **changes) -> Subscription:
    """Apply the changes. A new signature scheme brings a new secret or key of that scheme; the old one keeps
    signing beside it for the rotation's grace period, so receivers can switch without failing a request.

    A new destination (another endpoint URL, a new OAuth2 token URL) needs consent, as at subscribe time: the
    subscription is `pending_confirmation` again and the handshake goes to the new endpoint; until it confirms,
    nothing else is sent there or to the token URL. Deliveries due meanwhile, and messages published meanwhile, are
    held (their time-to-live runs), not lost: confirming releases them."""
    options_only(changes, subscription_rules.UPDATABLE)
    if changes.get("transformation") is not None and subscription.tenant_id is not None:
        tenancy.tenant_transformations(subscription.tenant)
    changes = checked_options(changes, subscription, now=now)
    check_rules(subscription_rules.stored(subscription), changes)
    if subscription.tenant_id is not None and "event_types" in changes:
        tenant_rules(subscription.topic, subscription.tenant, changes["event_types"],
                     kept=subscription.event_types or [])
    now = now or clock.now()
    scheme = changes.pop("signature_scheme", None)
    if "delivery_policy" in changes:
        policies.subscription_policy_checked(changes["delivery_policy"], topic=subscription.topic)
        changes["delivery_policy"] = changes["delivery_policy"] or None
    if "endpoint" in changes:
        changes["endpoint"] = checked_url(changes["endpoint"], "endpoint")
        if changes["endpoint"] == subscription.endpoint.url:
            del changes["endpoint"]  # the same URL, however spelled: nothing to move, no consent to ask
    new_destination = "endpoint" in changes or (
        changes.get("oauth_token_url") and changes["oauth_token_url"] != subscription.oauth_token_url)
    reconfirm = bool(new_destination) and herald.REQUIRE_CONFIRMATION
    unordered = subscription.ordered_delivery and changes.get("ordered_delivery") is False
    with transaction.atomic():
        if "endpoint" in changes:  # within the tenant's endpoint quota, like a new subscription
            if subscription.tenant_id is not None:
                quotas.tenant_endpoints(subscription.tenant, url=changes["endpoint"], leaving=subscription.endpoint.url)
            changes["endpoint"] = endpoint_for(owner=subscription.topic.owner, url=changes["endpoint"],
                                               tenant=subscription.tenant)
        if scheme is not None and scheme != subscription.signature_scheme:  # after the checks: nothing half-done
            subscription = signing_secrets.subscription_rotate_secret(subscription=subscription, scheme=scheme)
        for key, value in changes.items():
            setattr(subscription, key, value)
        if reconfirm:
            # confirmed_at keeps the earlier consent: publishing holds this subscription's messages meanwhile
            subscription.status = Subscription.Status.PENDING_CONFIRMATION
        subscription.save()
        if "endpoint" in changes:
            # Retries, held and waiting deliveries follow the subscription to its new URL (and its health record).
            lifecycle.not_started(subscription=subscription).update(endpoint=changes["endpoint"])
        if reconfirm:
            lifecycle.hold(subscription=subscription)
            confirmation_request(subscription=subscription)
        if unordered:  # what waited for its turn is due now
            lifecycle.release_ordered(subscription.id, now=now)
    return subscription
