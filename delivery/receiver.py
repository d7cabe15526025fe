"""Receiving Herald's webhooks in a Django project: `@webhook_receiver`.

    from delivery.receiver import webhook_receiver

    @webhook_receiver(secrets=["whsec_…"])          # or secrets=lambda request: [...], or the setting below
    def order_events(request, event):
        if event.type == "order.created":
            create_invoice(event.data)
        # return nothing for 204, or any HttpResponse

The decorated view accepts only POST; checks the Standard Webhooks signature (any of the secrets, so both during a
rotation; the timestamp within `tolerance` seconds); answers Herald's subscription confirmation by echoing its token
(Event Grid's handshake); skips a `webhook-id` this view already handled successfully (remembered in Django's cache
for `dedupe_seconds`, per view: two views subscribed to one topic each get every message; at-least-once delivery
means retries can repeat a message) and hands the view a parsed CloudEvent, from a structured body
(`application/cloudevents+json`) or a raw delivery's `ce-*` headers, which it accepts only when their own signature
(`herald-attributes-signature`) holds: everything in `event` is signed; a CloudEvents batch
(`application/cloudevents-batch+json`) calls the view once per event, and the first failing answer fails the whole
batch, which Herald then retries as one. A request that fails
a check gets 400/401 and the view is not called. It is exempt from CSRF (it is called by a server, and signed).
Default secrets: the setting HERALD_RECEIVER_SECRETS, a list of `whsec_` strings.

The first hour: make a secret (`manage.py herald_secret`, or `generate_secret()` from this module), configure the
view with it, then subscribe with the same secret (`"secret"` in POST /api/subscriptions/): Herald's confirmation
request arrives during that call, verifies, and the subscription is confirmed — no restart, no resend. A
confirmation this view cannot verify is answered with what to do about it.
"""

import functools
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from delivery.rules import signing
from delivery.rules.signing import generate_secret  # noqa: F401 (for projects: a new whsec_ secret)

CONFIRMATION = "herald.subscription.confirmation"
SEEN_KEY = "herald:received:{}"


@dataclass(frozen=True)
class CloudEvent:
    id: str
    type: str
    source: str
    subject: str = ""
    time: str = ""
    data: object = None
    datacontenttype: str = ""
    extensions: dict = field(default_factory=dict)


BATCH_CONTENT_TYPE = "application/cloudevents-batch+json"


def structured(document) -> CloudEvent:
    """One structured-mode event (a JSON object)."""
    if not isinstance(document, dict) or "id" not in document or "type" not in document:
        raise ValueError("not a CloudEvent: the JSON body has no id and type")
    known = {"id", "type", "source", "subject", "time", "data", "datacontenttype", "specversion"}
    return CloudEvent(id=str(document["id"]), type=str(document["type"]), source=str(document.get("source", "")),
                      subject=str(document.get("subject", "")), time=str(document.get("time", "")),
                      data=document.get("data"), datacontenttype=str(document.get("datacontenttype", "")),
                      extensions={k: v for k, v in document.items() if k not in known})


def parse_events(request) -> list[CloudEvent]:
    """Every event of the request: a CloudEvents batch's, or the one event of any other request."""
    if (request.content_type or "") == BATCH_CONTENT_TYPE:
        documents = json.loads(request.body)
        if not isinstance(documents, list):
            raise ValueError("not a CloudEvents batch: the JSON body is not an array")
        return [structured(document) for document in documents]
    return [parse_event(request)]


def parse_event(request) -> CloudEvent:
    """The request as a CloudEvent: structured (the JSON body is the event) or binary (`ce-*` headers, the body is
    the data). Raises ValueError for a body that is neither."""
    body = request.body
    content_type = request.content_type or ""
    if content_type in ("application/cloudevents+json", "application/json") and not request.headers.get("ce-id"):
        return structured(json.loads(body))
    headers = {name.lower(): value for name, value in request.headers.items()}
    if "ce-id" not in headers or "ce-type" not in headers:
        raise ValueError("not a CloudEvent: no ce-id and ce-type headers")
    try:
        data = json.loads(body) if content_type.endswith("json") else body.decode("utf-8")
    except ValueError:
        data = body
    known = {"ce-id", "ce-type", "ce-source", "ce-subject", "ce-time", "ce-specversion"}
    return CloudEvent(id=headers["ce-id"], type=headers["ce-type"], source=headers.get("ce-source", ""),
                      subject=headers.get("ce-subject", ""), time=headers.get("ce-time", ""), data=data,
                      datacontenttype=content_type,
                      extensions={k[3:]: v for k, v in headers.items() if k.startswith("ce-") and k not in known})


CONFIRMATION_FIX = (
    "This is Herald's subscription confirmation, and this receiver cannot verify it. Configure the receiver with "
    "the secret the subscription signs with, then ask for a new confirmation (POST "
    "/api/subscriptions/<id>/resend-confirmation/, or the button on the subscription's admin page). Next time, "
    "make the secret first (`manage.py herald_secret`), configure the receiver with it and subscribe with it "
    "(\"secret\" in POST /api/subscriptions/): the confirmation then verifies during the create.")


def _is_confirmation(request) -> bool:
    """Does the (not yet verified) request say it is Herald's confirmation? Only to word an error."""
    try:
        body = json.loads(request.body[:65536]) if len(request.body) <= 65536 else None
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("type") == CONFIRMATION


def _with_fix(request, problem: str) -> str:
    return f"{problem}. {CONFIRMATION_FIX}" if _is_confirmation(request) else problem


def webhook_receiver(view: Callable | None = None, *, secrets: Iterable[str] | Callable | None = None,
                     tolerance: float = signing.TIMESTAMP_TOLERANCE_SECONDS, dedupe: bool = True,
                     dedupe_seconds: int = 7 * 86400):
    """Decorate a view `view(request, event)`; see the module's description."""

    def decorate(func):
        view_name = f"{func.__module__}.{func.__qualname__}"

        @csrf_exempt
        @functools.wraps(func)
        def wrapper(request, *args, **kwargs):
            if request.method != "POST":
                return JsonResponse({"error": "webhooks are POSTed"}, status=405, headers={"Allow": "POST"})
            refused = _unverified(request, _secrets_of(request, secrets), tolerance)
            if refused is not None:
                return refused
            try:
                events = parse_events(request)
            except ValueError as exc:
                return JsonResponse({"error": str(exc)}, status=400)
            first = events[0] if events else None
            if first and first.type == CONFIRMATION and isinstance(first.data, dict) and "token" in first.data:
                return JsonResponse({"validationResponse": first.data["token"]})
            msg_id = request.headers.get("webhook-id")
            seen = SEEN_KEY.format(f"{view_name}:{msg_id}")  # per view: one message reaches every view subscribed
            if dedupe and cache.get(seen):
                return HttpResponse(status=204, headers={"herald-duplicate": "1"})
            response = _handled(func, request, events, args, kwargs)
            if dedupe and 200 <= response.status_code < 300:  # only what was handled: a failure is retried
                cache.set(seen, 1, timeout=dedupe_seconds)
            return response

        return wrapper

    return decorate(view) if view is not None else decorate


def _secrets_of(request, secrets) -> list[str]:
    """The secrets a request may be signed with: the decorator's (a list, or a function of the request), else the
    setting HERALD_RECEIVER_SECRETS."""
    keys = secrets(request) if callable(secrets) else secrets
    return list(keys if keys is not None else getattr(settings, "HERALD_RECEIVER_SECRETS", []))


def _unverified(request, keys: list[str], tolerance: float) -> JsonResponse | None:
    """The answer to a request that is not signed as Herald signs (500 without a secret to check it with, 401),
    or None for one that is: its body, and a raw delivery's `ce-*` headers."""
    if not keys:
        problem = ("no signing secret is configured for this receiver: pass secrets=[...] to "
                   "@webhook_receiver or set HERALD_RECEIVER_SECRETS (a list of whsec_ secrets)")
        return JsonResponse({"error": _with_fix(request, problem)}, status=500)
    msg_id = request.headers.get("webhook-id")
    problem = signing.check(keys, msg_id, request.headers.get("webhook-timestamp"),
                            request.headers.get("webhook-signature"), request.body, now=time.time(),
                            tolerance=tolerance)
    if problem:
        return JsonResponse({"error": _with_fix(request, f"signature: {problem}")}, status=401)
    if request.headers.get("ce-id") is not None:  # a raw delivery: its attributes travel in headers
        problem = signing.check(keys, msg_id, request.headers.get("webhook-timestamp"),
                                request.headers.get(signing.ATTRIBUTES_SIGNATURE_HEADER),
                                signing.attribute_bytes(request.headers), now=time.time(), tolerance=tolerance)
        if problem:
            return JsonResponse({"error": f"the ce-* headers and Content-Type are not signed as "
                                          f"{signing.ATTRIBUTES_SIGNATURE_HEADER} says: {problem}"}, status=401)
    return None


def _handled(func, request, events: list[CloudEvent], args, kwargs) -> HttpResponse:
    """The view's answer: called once per event of a batch, the first failing answer failing the whole batch;
    204 when the view returns nothing (or for a batch that succeeded)."""
    response = None
    for event in events:
        answer = func(request, event, *args, **kwargs)
        if answer is not None and not 200 <= answer.status_code < 300:
            response = answer
            break
        response = answer if len(events) == 1 else None
    return response if response is not None else HttpResponse(status=204)
