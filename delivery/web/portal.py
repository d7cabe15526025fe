"""The tenant portal: server-rendered pages a tenant opens from a portal link (docs/tenants.md).

Every page lives under `/portal/<token>/`: the signed link is the credential, carried in the path rather than a
cookie, so the portal works inside an owner's iframe on another site (where browsers withhold third-party
cookies). For the same reason forms need no CSRF token: nothing ambient authenticates them, a forged form cannot
know the token. Pages are sent with `Referrer-Policy: no-referrer` (the token never leaves in a Referer header),
`Cache-Control: no-store`, and `frame-ancestors` from the owner's portal settings (none by default): every answer
under `/portal/`, a refused link's and a 404's too. Stored settings are read through their rules
(rules/portal_settings.py), so a value stored before a rule existed is left out, never a 500.

What a tenant may do here is what its key may do through the API, through the same services.

The pages work without JavaScript. One script, inline under a per-answer nonce (the CSP allows no other), adds what
needs it: copy buttons, the page's height told to a framing parent (`herald-portal:height`, docs/tenants.md), and a
page waiting on a delivery or a confirmation updating itself for up to two minutes.
"""

import json
import secrets
from datetime import UTC, datetime, timedelta
from functools import wraps

from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from delivery.conf import herald
from delivery.engine.accounts import recovery, removal, subscribing, tenancy
from delivery.engine.accounts.confirmation import confirmation_resend
from delivery.engine.intake import publishing, replay
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state import health
from delivery.rules import portal_settings
from delivery.rules.vocabulary import UNFINISHED, DeliveryStatus
from delivery.web import selectors
from subscriptions.models import Subscription
from subscriptions.states import EndpointState

RECENT_DELIVERIES = 25
REMOVE_COUNTED = 10_000  # the removal page counts the history it deletes up to this many
ACTIONS = ("pause", "resume", "rotate", "test", "delete", "replay", "enable", "resend", "move", "types")
DONE = {"pause": "Paused: new events are held until you resume.", "resume": "Resumed.",
        "test": "A test event is on its way.", "delete": "Endpoint removed.",
        "enable": "Enabled: held deliveries go out now.", "resend": "A new confirmation request is on its way.",
        "retry": "The delivery is being attempted again.", "replay": "Replay started.",
        "types": "The event types are saved.",
        "move": "The URL is changed. Until the new endpoint confirms, events are held for it (none are lost)."}


def portal_page(view):
    """Resolve the link (403 page if it is forged or expired), refuse changes through a read-only link, and set
    the portal's headers on the answer."""

    @csrf_exempt
    @wraps(view)
    def wrapper(request, token, *args, **kwargs):
        nonce = secrets.token_urlsafe(16)
        try:
            access, expires = tenancy.portal_access(token)
        except tenancy.LinkRefused as refused:
            return _refused(request, refused, nonce)
        portal = selectors.portal_settings(access.owner_id)
        request.portal = {"access": access, "tenant": access.tenant, "token": token, "portal": portal,
                          "brand": portal_settings.brand_colour(portal.colour), "nonce": nonce,
                          "expires": datetime.fromtimestamp(expires, tz=UTC),
                          "read_only": access.read_only}
        if access.read_only and request.method == "POST":
            response = render(request, "herald/portal/refused.html", {
                "reason": "This link lets you look, not change anything.", **request.portal}, status=403)
        else:
            try:
                response = view(request, *args, **kwargs)
            except Http404:
                response = render(request, "herald/portal/refused.html", {
                    "title": "Not found", "reason": "There is no such page here.", **request.portal}, status=404)
        return _headers(response, portal, nonce)

    return wrapper


def _refused(request, refused: tenancy.LinkRefused, nonce: str):
    """A link Herald did not sign: a plain 403 page. A genuine link that expired: the owner's branded page saying so,
    linking to the owner's refresh URL and naming its host, for as long again as a link may live at most; a GET is
    redirected there only on a host the operator allowed (HERALD_PORTAL_REFRESH_HOSTS): the origin every owner
    shares is no open redirect."""
    if refused.owner_id is None:
        return _headers(render(request, "herald/portal/refused.html", {"reason": str(refused), "nonce": nonce},
                               status=403), None, nonce)
    portal = selectors.portal_settings(refused.owner_id)
    recently = refused.expired_for is not None and refused.expired_for <= herald.PORTAL_LINK_MAX_SECONDS
    refresh = portal_settings.refresh_url(portal.refresh_url) if recently else ""
    if refresh and request.method == "GET" and portal_settings.redirect_allowed(refresh, herald.PORTAL_REFRESH_HOSTS):
        return _headers(HttpResponseRedirect(refresh), portal, nonce)
    return _headers(render(request, "herald/portal/refused.html", {
        "title": "Link expired", "heading": "This link has expired", "reason": str(refused), "portal": portal,
        "fresh_link": refresh, "fresh_link_host": portal_settings.refresh_host(refresh) if refresh else "",
        "nonce": nonce, "brand": portal_settings.brand_colour(portal.colour)}, status=403), portal, nonce)


@portal_page
def not_found(request, rest: str = ""):
    """Any other path under a portal link: a 404 with the portal's headers."""
    raise Http404


def _headers(response, portal, nonce: str):
    ancestors = portal_settings.csp_frame_ancestors(portal.frame_ancestors if portal is not None else None)
    response["Content-Security-Policy"] = f"frame-ancestors {ancestors}; default-src 'self'; img-src 'self' https: " \
                                          f"data:; style-src 'self' 'unsafe-inline'; script-src 'nonce-{nonce}'; " \
                                          f"object-src 'none'; base-uri 'none'; form-action 'self'"
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "no-store"
    if ancestors != "'none'":
        response.xframe_options_exempt = True  # CSP frame-ancestors decides
    return response


def _page(request, template: str, context: dict, status: int = 200):
    return render(request, f"herald/portal/{template}", {
        **request.portal, "confirm_first": herald.REQUIRE_CONFIRMATION, **context}, status=status)


def _url(request, name: str, *args) -> str:
    return reverse(f"herald:portal-{name}", args=[request.portal["token"], *args])


def _subscriptions(request):
    return selectors.tenant_subscriptions(request.portal["tenant"])


def _catalog(request):
    return selectors.tenant_catalog(request.portal["tenant"])


@portal_page
def home(request):
    subscriptions = list(_subscriptions(request).order_by("id"))
    attention = [s for s in subscriptions if s.endpoint.state != EndpointState.ACTIVE
                 or s.status != Subscription.Status.CONFIRMED]
    return _page(request, "home.html", {"subscriptions": subscriptions, "attention": attention,
                                        "show_topic": _show_topic(request, subscriptions),
                                        "done": _done(request)})


def _done(request) -> str | None:
    """What the last action did, in words (a changed URL is held for consent only where consent is asked)."""
    done = request.GET.get("done", "")
    if done == "move" and not herald.REQUIRE_CONFIRMATION:
        return "The URL is changed: events go there from now on."
    return DONE.get(done)


def _show_topic(request, subscriptions) -> bool:
    """Topics are named where they tell the tenant something: when several are open, or a subscription is on
    another than the one open topic (one closed since). With one open topic, event types are all there is."""
    open_topics = list(_topics(request).values_list("id", flat=True)[:2])
    return len(open_topics) != 1 or any(s.topic_id != open_topics[0] for s in subscriptions)


@portal_page
def event_types(request):
    shown = list(_catalog(request))
    for event_type in shown:
        event_type.example_json = json.dumps(event_type.example, indent=2)
        event_type.schema_json = json.dumps(event_type.schema, indent=2)
    return _page(request, "event_types.html", {"event_types": shown})


def _topics(request):
    return selectors.tenant_topics(request.portal["tenant"])


@portal_page
@require_http_methods(["GET", "POST"])
def subscription_new(request):
    topics, types = list(_topics(request)), list(_catalog(request).filter(deprecated=False))
    form = {"topic": request.POST.get("topic", ""), "url": request.POST.get("url", "").strip(),
            "event_types": request.POST.getlist("event_types")}
    errors = {}
    if request.method == "POST":
        # One open topic: the customer chooses event types (or takes all), never the topic.
        topic = topics[0] if len(topics) == 1 else next((t for t in topics if str(t.id) == form["topic"]), None)
        if topic is None:
            errors["topic"] = "Choose a topic." if topics else "There are no events to subscribe to yet."
        if not form["url"]:
            errors["url"] = "Enter your endpoint's URL (https://…)."
        if not errors:
            try:
                subscription, secret = subscribing.subscription_create(
                    topic=topic, endpoint=form["url"], tenant=request.portal["tenant"],
                    event_types=form["event_types"])
            except ApplicationError as exc:
                errors = {name: " ".join(reasons) for name, reasons in _fields(exc).items()}
            else:
                if secret is None:
                    errors["url"] = ("This URL already receives these events: see it in your endpoints."
                                     if len(topics) == 1 else "This URL already receives this topic: see it in your "
                                                              "endpoints.")
                else:
                    return _page(request, "secret.html", {"subscription": subscription, "secret": secret,
                                                          "created": True})
    return _page(request, "subscription_new.html", {"topics": topics, "types": types, "form": form,
                                                    "errors": errors}, status=400 if errors else 200)


def _fields(exc: ApplicationError) -> dict:
    named = exc.as_payload()
    if "detail" in named:
        return {"form": [named["detail"]]}
    return {("url" if name == "endpoint" else name): reasons for name, reasons in named.items()}


def _subscription_page(request, subscription: Subscription, *, error: str = "", status: int = 200):
    """An endpoint's page: its health and latest deliveries, its actions, and what the last one refused."""
    deliveries = selectors.recent_deliveries(subscription, RECENT_DELIVERIES)
    waiting = subscription.status == Subscription.Status.PENDING_CONFIRMATION or any(
        d.status in UNFINISHED for d in deliveries)
    return _page(request, "subscription.html", {
        "subscription": subscription, "endpoint": subscription.endpoint, "deliveries": deliveries,
        "transitions": selectors.recent_transitions(subscription.endpoint, 5),
        "done": _done(request),
        "types": _catalog(request).filter(deprecated=False), "error": error,
        "refresh": waiting and not error,  # an action's refusal is answered at the action's URL, which only POSTs
        "show_topic": _show_topic(request, [subscription])}, status=status)


@portal_page
def subscription_detail(request, subscription_id: int):
    return _subscription_page(request, get_object_or_404(_subscriptions(request), id=subscription_id))


@portal_page
@require_POST
def subscription_action(request, subscription_id: int, name: str):
    subscription = get_object_or_404(_subscriptions(request), id=subscription_id)
    if name not in ACTIONS:
        raise Http404
    try:
        if name == "rotate":
            rotated = subscribing.subscription_rotate_secret(subscription=subscription)
            return _page(request, "secret.html", {"subscription": rotated, "secret": rotated.secret,
                                                  "created": False})
        if name == "delete":
            if request.POST.get("confirm") != "yes":  # the first press asks: removing deletes its history too
                history = selectors.history_size(subscription, REMOVE_COUNTED)
                return _page(request, "remove.html", {"subscription": subscription, "counted": REMOVE_COUNTED,
                                                      "deliveries": history})
            removal.subscription_delete(subscription=subscription)  # a 409 page while it is being sent to
            return HttpResponseRedirect(_url(request, "home") + "?done=delete")
        run_action(name, subscription, request)
    except ApplicationError as exc:
        detail = " ".join(str(reason) for reasons in exc.as_payload().values()  # a "detail" is one string
                          for reason in (reasons if isinstance(reasons, list) else [reasons]))
        return _subscription_page(request, subscription, error=detail, status=exc.status_code)
    return HttpResponseRedirect(_url(request, "subscription", subscription.id) + f"?done={name}")


def run_action(name: str, subscription: Subscription, request) -> None:
    if name == "pause":
        recovery.subscription_pause(subscription=subscription)
    elif name == "resume":
        recovery.subscription_resume(subscription=subscription)
    elif name == "test":
        publishing.test_event(subscription=subscription)
    elif name == "enable":
        health.endpoint_enable(endpoint=subscription.endpoint)
    elif name == "move":
        url = request.POST.get("url", "").strip()  # a URL too long is refused by the service, as through the API
        subscribing.subscription_update(subscription=subscription, endpoint=url)
    elif name == "types":
        subscribing.subscription_update(subscription=subscription, event_types=request.POST.getlist("event_types"))
    elif name == "resend":
        confirmation_resend(subscription=subscription)
    elif name == "replay":
        try:
            hours = float(request.POST.get("hours", "1"))
        except ValueError:
            hours = 0
        if not 1 / 60 <= hours <= 24 * 30:
            raise ApplicationError("Replay between a minute and 30 days (in hours).", field="hours")
        replay.replay_create(subscription=subscription, since=timezone.now() - timedelta(hours=hours))


@portal_page
def delivery_detail(request, delivery_id: int):
    delivery = get_object_or_404(selectors.tenant_deliveries(request.portal["tenant"]), id=delivery_id)
    attempts = selectors.recent_attempts(delivery, 20)
    retryable = delivery.status in (DeliveryStatus.PENDING, DeliveryStatus.DEAD_LETTERED, DeliveryStatus.DROPPED)
    return _page(request, "delivery.html", {"delivery": delivery, "attempts": attempts, "retryable": retryable,
                                            "refresh": delivery.status in UNFINISHED,
                                            "done": _done(request)})


@portal_page
@require_POST
def delivery_retry(request, delivery_id: int):
    delivery = get_object_or_404(selectors.tenant_deliveries(request.portal["tenant"]), id=delivery_id)
    try:
        recovery.delivery_retry_now(delivery=delivery)
    except ApplicationError as exc:
        return _page(request, "refused.html", {"reason": exc.message}, status=exc.status_code)
    return HttpResponseRedirect(_url(request, "delivery", delivery.id) + "?done=retry")
