"""What the buttons on a subscription's page do, in one table: `ACTIONS`, an action's name (the last part of its
URL, `subscriptions/<id>/<name>/`) → the engine service it calls and the words the tenant reads once it is done.

An action runs through the same service the API calls, so a rule is checked once for every door; the service's
refusal (an `ApplicationError`) is shown on the subscription's page with its status. A new action is one entry here
and its button in `templates/herald/portal/subscription.html`; `pages.subscription_action` runs any of them.

The transformation editor (shown where the owner's portal settings allow transformations) has two: a test-run
(`web/transformation_trials.py`, the API's and the console's too), whose result the subscription's page shows in
the editor, and saving it through the service, which compiles the code and refuses it with its line.

Upgrading the event version (the Upgrade panel, shown when a newer version exists, beside its preview:
`web/version_previews.py`) sets the subscription's pin through the same service as the API's PATCH.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.http import HttpRequest
from django.utils import timezone

from delivery.conf import herald
from delivery.engine.accounts import recovery, removal, signing_secrets, subscribing, tenancy
from delivery.engine.accounts.confirmation import confirmation_resend
from delivery.engine.intake import replay, trial_events
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state import health
from delivery.rules import answers
from delivery.transport import transforms
from delivery.web import selectors, transformation_trials, version_previews
from delivery.web.api import throttling
from subscriptions.models import Subscription

REMOVE_COUNTED = 10_000  # the removal page counts the history it deletes up to this many

Page = tuple[str, dict]  # a portal template and what it shows


@dataclass(frozen=True)
class Action:
    """One button on a subscription's page.

    `run(subscription, request)` calls the service. Once it is done the tenant is sent back to the subscription's
    page (to the home page with `home`: the subscription is gone) and reads `done` there, or `done_at_once` where
    nothing waits for the endpoint's consent (HERALD_REQUIRE_CONFIRMATION off); or, with `shows`, gets a page of
    its own made from what `run` returned; or, with `on_page`, the subscription's page itself, showing what `run`
    returned in the form that posted (a test-run's result), its fields as they were posted. With `asks_first`, a
    first press only asks (the page it returns), and the action runs when the answer posts `confirm=yes`."""

    run: Callable[[Subscription, HttpRequest], Any]
    done: str = ""
    done_at_once: str = ""
    home: bool = False
    shows: Callable[[Any], Page] | None = None
    asks_first: Callable[[Subscription], Page] | None = None
    on_page: bool = False

    def __post_init__(self):
        if [bool(self.done), self.shows is not None, self.on_page].count(True) != 1:
            raise ValueError("An action says what it did (done), shows a page of its own (shows) or its result on the "
                             "subscription's page (on_page), one of them.")

    def words(self) -> str:
        return self.done_at_once if self.done_at_once and not herald.REQUIRE_CONFIRMATION else self.done


def on_subscription(service) -> Callable[[Subscription, HttpRequest], Any]:
    """A service that takes the subscription alone."""
    return lambda subscription, request: service(subscription=subscription)


def _enable(subscription: Subscription, request) -> None:
    health.endpoint_enable(endpoint=subscription.endpoint)


def _move(subscription: Subscription, request) -> None:
    url = request.POST.get("url", "").strip()  # a URL too long is refused by the service, as through the API
    subscribing.subscription_update(subscription=subscription, endpoint=url)


def _choose_types(subscription: Subscription, request) -> None:
    subscribing.subscription_update(subscription=subscription, event_types=request.POST.getlist("event_types"))


def _replay(subscription: Subscription, request) -> None:
    try:
        hours = float(request.POST.get("hours", "1"))
    except ValueError:
        hours = 0
    if not 1 / 60 <= hours <= 24 * 30:
        raise ApplicationError("Replay between a minute and 30 days (in hours).", field="hours")
    replay.replay_create(subscription=subscription, since=timezone.now() - timedelta(hours=hours))


def _save_transformation(subscription: Subscription, request) -> None:
    """The editor's code and checkbox, saved through the service (empty code removes the transformation); refused
    where the owner does not allow transformations, as the editor is not offered there."""
    tenancy.tenant_transformations(subscription.tenant)
    code = request.POST.get("code", "").replace("\r\n", "\n")  # a browser sends a textarea's lines with CRLF
    value = {"code": code, "enabled": "enabled" in request.POST} if code.strip() else None
    subscribing.subscription_update(subscription=subscription, transformation=value)


def _test_transformation(subscription: Subscription, request) -> dict:
    """One run of the editor's code on its payload (empty: the catalog's example of the event type), within the
    tenant's test-runs a minute (the API's budget)."""
    throttle = throttling.TransformationTestThrottle()
    if not throttle.allow(throttling.tenant_runner(subscription.tenant)):
        raise ApplicationError(f"Too many test-runs: try again in {int(throttle.wait()) + 1} s.", field="code",
                               status_code=429)
    text, payload = request.POST.get("payload", ""), transformation_trials.ABSENT
    if text.strip():
        payload, problem = answers.json_value(text, max_chars=transforms.limits().output_bytes)
        if problem:
            raise ApplicationError(f"The payload to test with is {problem}.", field="payload")
    outcome = transformation_trials.trial(subscription, code=request.POST.get("code", ""), payload=payload,
                                          event_type=request.POST.get("event_type") or None)
    return transformation_trials.answer(outcome)


def _upgrade(subscription: Subscription, request) -> None:
    """Pin the subscription to the version the panel offered (the newest it showed; default: the newest now), so
    that a version added while the tenant read the preview is not taken unseen."""
    version = request.POST.get("event_version", "").strip() or version_previews.newest(subscription)
    if not version:
        raise ApplicationError("No event type you receive has versions.", field="event_version")
    subscribing.subscription_update(subscription=subscription, event_version=version)


def _new_secret(rotated: Subscription) -> Page:
    """Shown once: the rotated secret (the previous one keeps signing beside it for a while)."""
    return "secret.html", {"subscription": rotated, "secret": rotated.secret, "created": False}


def _removal_question(subscription: Subscription) -> Page:
    """Removing deletes the subscription's history too: the question says how much."""
    return "remove.html", {"subscription": subscription, "counted": REMOVE_COUNTED,
                           "deliveries": selectors.history_size(subscription, REMOVE_COUNTED)}


ACTIONS: dict[str, Action] = {
    "pause": Action(on_subscription(recovery.subscription_pause),
                    done="Paused: new events are held until you resume."),
    "resume": Action(on_subscription(recovery.subscription_resume), done="Resumed."),
    "rotate": Action(on_subscription(signing_secrets.subscription_rotate_secret), shows=_new_secret),
    "test": Action(on_subscription(trial_events.test_event), done="A test event is on its way."),
    "delete": Action(on_subscription(removal.subscription_delete),  # a 409 while it is being sent to
                     done="Endpoint removed.", home=True, asks_first=_removal_question),
    "replay": Action(_replay, done="Replay started."),
    "enable": Action(_enable, done="Enabled: held deliveries go out now."),
    "resend": Action(on_subscription(confirmation_resend), done="A new confirmation request is on its way."),
    "move": Action(_move, done="The URL is changed. Until the new endpoint confirms, events are held for it (none "
                               "are lost).",
                   done_at_once="The URL is changed: events go there from now on."),
    "types": Action(_choose_types, done="The event types are saved."),
    "transformation": Action(_save_transformation, done="The transformation is saved."),
    "transformation_test": Action(_test_transformation, on_page=True),
    "version": Action(_upgrade, done="Upgraded: your events arrive in the newer version from now on."),
}


def done_words(name: str) -> str | None:
    """What the action `name` did, in words; None for a name that is no action, or one that shows its own page."""
    action = ACTIONS.get(name)
    return action.words() if action is not None and action.done else None
