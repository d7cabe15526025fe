"""The portal's pages: the tenant's endpoints (its subscriptions), the event types it may subscribe to, adding one,
a subscription's page and the actions on it (`actions.ACTIONS`; its transformation editor where the owner allows
transformations; the event version it receives and, when a newer one exists, the upgrade with its preview), a
delivery's page and its retry.

Each view is a `portal_page` (access.py): the link is checked and `request.portal` says whose pages these are. Rows
are read through `web/selectors.py`, scoped to the tenant there; changes go through the engine's services.
"""

import json

from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from delivery.conf import herald
from delivery.engine.accounts import recovery, subscribing
from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules.vocabulary import UNFINISHED, DeliveryStatus
from delivery.web import selectors, transformation_trials, version_previews
from delivery.web.api import throttling
from delivery.web.portal import actions
from delivery.web.portal.access import portal_page
from subscriptions.models import Subscription
from subscriptions.states import EndpointState

RECENT_DELIVERIES = 25
RETRIED = "The delivery is being attempted again."  # a delivery's one action, on its own page


def _page(request, template: str, context: dict, status: int = 200):
    return render(request, f"herald/portal/{template}", {
        **request.portal, "confirm_first": herald.REQUIRE_CONFIRMATION, **context}, status=status)


def _url(request, name: str, *args) -> str:
    return reverse(f"herald:portal-{name}", args=[request.portal["token"], *args])


def _subscriptions(request):
    return selectors.tenant_subscriptions(request.portal["tenant"])


def _catalog(request):
    return selectors.tenant_catalog(request.portal["tenant"])


def _topics(request):
    return selectors.tenant_topics(request.portal["tenant"])


def _done(request) -> str | None:
    """What the last action did, in words."""
    done = request.GET.get("done", "")
    return RETRIED if done == "retry" else actions.done_words(done)


def _show_topic(request, subscriptions) -> bool:
    """Topics are named where they tell the tenant something: when several are open, or a subscription is on
    another than the one open topic (one closed since). With one open topic, event types are all there is."""
    open_topics = list(_topics(request).values_list("id", flat=True)[:2])
    return len(open_topics) != 1 or any(s.topic_id != open_topics[0] for s in subscriptions)


@portal_page
def home(request):
    subscriptions = list(_subscriptions(request).order_by("id"))
    attention = [s for s in subscriptions if s.endpoint.state != EndpointState.ACTIVE
                 or s.status != Subscription.Status.CONFIRMED]
    return _page(request, "home.html", {"subscriptions": subscriptions, "attention": attention,
                                        "show_topic": _show_topic(request, subscriptions),
                                        "done": _done(request)})


@portal_page
def event_types(request):
    shown = list(_catalog(request))
    for event_type in shown:
        event_type.example_json = json.dumps(event_type.example, indent=2)
        event_type.schema_json = json.dumps(event_type.schema, indent=2)
    return _page(request, "event_types.html", {"event_types": shown})


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


def _subscription_page(request, subscription: Subscription, *, error: str = "", status: int = 200, result=None):
    """An endpoint's page: its health and latest deliveries, its actions, what the last one refused, and the
    transformation editor with a test-run's `result`."""
    deliveries = selectors.recent_deliveries(subscription, RECENT_DELIVERIES)
    waiting = subscription.status == Subscription.Status.PENDING_CONFIRMATION or any(
        d.status in UNFINISHED for d in deliveries)
    return _page(request, "subscription.html", {
        "subscription": subscription, "endpoint": subscription.endpoint, "deliveries": deliveries,
        "transitions": selectors.recent_transitions(subscription.endpoint, 5),
        "done": _done(request),
        "types": _catalog(request).filter(deprecated=False), "error": error,
        "editor": _editor(request, subscription, result), "versions": _versions(request, subscription),
        # an action's refusal or result is answered at the action's URL, which only POSTs: nothing to fetch again
        "refresh": waiting and request.method == "GET",
        "show_topic": _show_topic(request, [subscription])}, status=status)


def _editor(request, subscription: Subscription, result=None) -> dict | None:
    """The transformation editor's fields, where the owner allows transformations: as the editor posted them (a
    test-run, a refused save), else the saved code and the catalog's example of the first event type."""
    if not request.portal["portal"].allow_transformations:
        return None
    posted = request.POST if request.method == "POST" and "code" in request.POST else None
    if posted is not None:
        editor = {"code": posted.get("code", ""), "enabled": "enabled" in posted, "payload": posted.get("payload", ""),
                  "event_type": posted.get("event_type", ""), "posted": True}
    else:
        saved, event_type = subscription.transformation or {}, transformation_trials.first_event_type(subscription)
        example = transformation_trials.catalog_example(subscription, event_type) if event_type else None
        editor = {"code": saved.get("code", ""), "enabled": saved.get("enabled", True), "event_type": event_type,
                  "payload": "" if example is None else json.dumps(example, indent=2, ensure_ascii=False)}
    if result is not None:
        editor.update(result=result, result_payload=json.dumps(result.get("payload"), indent=2, ensure_ascii=False))
    return editor


def _versions(request, subscription: Subscription) -> dict | None:
    """The event versions the endpoint receives (None: no type it receives has versions) and, when a newer one
    exists, the upgrade to the newest with its preview: the latest event as received now and after upgrading. The
    page's own refreshes (a script's fetch: `Sec-Fetch-Dest: empty`) replace only its live parts, so they do not
    run the preview again."""
    received = version_previews.received(subscription)
    if not received:
        return None
    shown = {"pin": subscription.event_version, "received": received,
             "newest": max(each.latest for each in received) if any(each.behind for each in received) else ""}
    if shown["newest"] and request.headers.get("Sec-Fetch-Dest") != "empty":
        if not throttling.EventVersionPreviewThrottle().allow(throttling.tenant_runner(subscription.tenant)):
            shown["unpreviewable"] = "Too many previews this minute: open the page again in a minute."
            return shown
        try:
            preview = version_previews.preview(subscription, shown["newest"])
        except ApplicationError as exc:
            shown["unpreviewable"] = exc.message
        else:
            for side in ("current", "upgraded"):
                preview[side]["json"] = json.dumps(preview[side].get("payload"), indent=2, ensure_ascii=False)
            shown["preview"] = preview
    return shown


@portal_page
def subscription_detail(request, subscription_id: int):
    return _subscription_page(request, get_object_or_404(_subscriptions(request), id=subscription_id))


@portal_page
@require_POST
def subscription_action(request, subscription_id: int, name: str):
    """Run the action `name` of the table (actions.ACTIONS) on one of the tenant's subscriptions."""
    subscription = get_object_or_404(_subscriptions(request), id=subscription_id)
    action = actions.ACTIONS.get(name)
    if action is None:
        raise Http404
    if action.asks_first is not None and request.POST.get("confirm") != "yes":
        return _page(request, *action.asks_first(subscription))
    try:
        result = action.run(subscription, request)
    except ApplicationError as exc:
        detail = " ".join(str(reason) for reasons in exc.as_payload().values()  # a "detail" is one string
                          for reason in (reasons if isinstance(reasons, list) else [reasons]))
        return _subscription_page(request, subscription, error=detail, status=exc.status_code)
    if action.shows is not None:
        return _page(request, *action.shows(result))
    if action.on_page:
        return _subscription_page(request, subscription, result=result)
    back = _url(request, "home") if action.home else _url(request, "subscription", subscription.id)
    return HttpResponseRedirect(f"{back}?done={name}")


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
