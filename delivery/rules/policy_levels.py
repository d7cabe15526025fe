"""A delivery policy at three levels, merged section by section as SNS merges them (pure; no Django).

SNS keeps a DeliveryPolicy on a topic, in its own form, and one on a subscription; a subscription's
EffectiveDeliveryPolicy takes each section it does not set from its topic's, and what neither sets from SNS's
defaults. Herald does the same with three levels, lowest first: the installation's default
(HERALD_DEFAULT_DELIVERY_POLICY), the topic's, the subscription's. With the topic's
`disableSubscriptionOverrides: true` the topic's sections win over the subscription's.

- **Forms.** A topic's policy may be written in SNS's topic form, `{"http": {"defaultHealthyRetryPolicy": …,
  "defaultSicklyRetryPolicy": …, "defaultThrottlePolicy": …, "defaultRequestPolicy": …,
  "disableSubscriptionOverrides": …}}`, in Herald's own keys, or both (a section given twice is refused). `null`
  for a section (an object), in either form, means the section is not set (AWS returns absent sections as
  `null`); a scalar such as `jitter` must not be null.
- **Sections.** Each top-level key is a section and is taken whole from the highest level that sets it. The retry
  schedule is one slot: a level that sets `healthyRetryPolicy` or `retrySchedule` replaces both, and the
  `retryLimits` of the levels below (they were written for another schedule). A level naming a `preset` sets the
  presets' sections (the retry schedule, `retryLimits`, `jitter`, `responsePolicy`) to the preset's, its own keys
  winning (as a single document always did); throttling and the request policy still come from below.

`merged` returns the full document with, for each section, the level it came from (shown by the API, the admin
and the preview).
"""

import copy

from delivery.rules.policy import PRESETS, DeliveryPolicy, PolicyError, parse, parse_resolved, resolve

TOPIC_FORM = {"defaultHealthyRetryPolicy": "healthyRetryPolicy", "defaultSicklyRetryPolicy": "sicklyRetryPolicy",
              "defaultThrottlePolicy": "throttlePolicy", "defaultRequestPolicy": "requestPolicy"}
OVERRIDES = "disableSubscriptionOverrides"
RETRY_SLOT = ("healthyRetryPolicy", "retrySchedule")
PRESET_SECTIONS = {*RETRY_SLOT, "retryLimits", "jitter", "responsePolicy"}  # what the presets (may) set
# The sections `null` may stand for (objects, as AWS returns them): a scalar such as `jitter` must not be null.
SECTIONS = {*RETRY_SLOT, "sicklyRetryPolicy", "throttlePolicy", "requestPolicy", "retryLimits", "responsePolicy",
            "redrivePolicy"}
SUBSCRIPTION, TOPIC, DEFAULT = "subscription", "topic", "default"


def normalized(document, *, level: str) -> tuple[dict, bool, dict[str, str]]:
    """(the document in Herald's keys with its `null` sections left out, whether it disables subscriptions'
    overrides, how each section was spelled where that was not Herald's key); PolicyError naming what is wrong."""
    if document in (None, "", {}):
        return {}, False, {}
    if isinstance(document, str):
        return {"preset": document}, False, {}
    if not isinstance(document, dict):
        raise PolicyError([("delivery_policy", "must be a JSON object or a preset name")])
    doc = {key: value for key, value in document.items() if value is not None or key not in SECTIONS}
    http = doc.pop("http", None)
    if http is None:
        return doc, False, {}
    if level != TOPIC:
        raise PolicyError([("http", 'the topic form ({"http": {"defaultHealthyRetryPolicy": …}}) is a topic\'s; a '
                                    'subscription\'s policy is {"healthyRetryPolicy": …} (SNS\'s subscription form)')])
    if not isinstance(http, dict):
        raise PolicyError([("http", "must be an object")])
    errors, disable, spelled = [], False, {}
    for key, value in http.items():
        if key == OVERRIDES:
            if value is not None and not isinstance(value, bool):
                errors.append((f"http.{OVERRIDES}", "must be true or false"))
            disable = value is True
        elif key not in TOPIC_FORM:
            errors.append((f"http.{key}", "unknown field"))
        elif value is not None and TOPIC_FORM[key] in doc:
            errors.append((f"http.{key}", f"is given as {TOPIC_FORM[key]} too; give it once"))
        elif value is not None:
            doc[TOPIC_FORM[key]], spelled[TOPIC_FORM[key]] = value, f"http.{key}"
    if errors:
        raise PolicyError(errors)
    return doc, disable, spelled


def is_topic_form(document) -> bool:
    return isinstance(document, dict) and "http" in document


def validated(document, *, level: str) -> DeliveryPolicy | None:
    """A level's document checked on its own (what is stored must parse), errors named as it was written."""
    doc, _, spelled = normalized(document, level=level)
    if not doc:
        return None
    try:
        return parse(doc)
    except PolicyError as exc:
        raise PolicyError([(respelled(path, spelled), reason) for path, reason in exc.errors]) from None


def respelled(path: str, spelled: dict[str, str]) -> str:
    head, dot, rest = path.partition(".")
    return f"{spelled[head]}{dot}{rest}" if head in spelled else path


def expanded(doc: dict) -> tuple[dict, str | None, set[str], set[str]]:
    """A level's sections, its preset's included (its own keys winning); the preset it named; the sections it
    wrote itself; and the sections a preset sets to their defaults by leaving them out (a preset is a whole retry
    configuration: naming `sns-default` over a topic's `event-grid` leaves none of Event Grid's limits, jitter or
    permanent codes)."""
    preset = doc.get("preset")
    own = {key: value for key, value in doc.items() if key != "preset"}
    if not isinstance(preset, str) or preset not in PRESETS:
        return own, None, set(own), set()
    sections = resolve(doc)
    sections.pop("preset")
    return sections, preset, set(own), PRESET_SECTIONS - set(sections)


def merged(subscription, topic, default) -> tuple[dict, dict[str, str], dict]:
    """(the effective document, the level each section came from, the sections users wrote), from the three levels'
    documents as stored. Unparseable levels raise PolicyError. The document names as its `preset` the one of the
    level its retry schedule came from (`sns-default` if that level named none): the 3,600 s cap on a written
    `healthyRetryPolicy` is then judged against that preset's own, as for a single document."""
    written_default = normalized(default, level=DEFAULT)[0]
    default_doc = resolve(written_default or {"preset": "sns-default"})
    default_preset = default_doc.pop("preset")
    topic_doc, disable, _ = normalized(topic, level=TOPIC)
    subscription_doc, _, _ = normalized(subscription, level=SUBSCRIPTION)
    levels = [(DEFAULT, default_doc, default_preset, set(written_default) - {"preset"}, set())]
    order = [(SUBSCRIPTION, subscription_doc), (TOPIC, topic_doc)] if disable else \
        [(TOPIC, topic_doc), (SUBSCRIPTION, subscription_doc)]
    levels += [(name, *expanded(doc)) for name, doc in order]
    result, sources, presets, written = {}, {}, {}, set()
    for name, sections, preset, own, cleared in levels:
        replaced = cleared | ({*RETRY_SLOT, "retryLimits"} if any(key in sections for key in RETRY_SLOT) else set())
        for key in replaced:
            for kept in (result, sources, presets):
                kept.pop(key, None)
            written.discard(key)
        for key, value in sections.items():
            result[key], sources[key] = copy.deepcopy(value), name
            presets.pop(key, None)
            written.discard(key)
            if preset is not None:
                presets[key] = preset
            if key in own:
                written.add(key)
    slot = next((key for key in RETRY_SLOT if key in result), None)
    result["preset"] = presets.get(slot, "sns-default")
    return result, sources, {key: result[key] for key in written}


def effective(subscription, topic, default) -> DeliveryPolicy:
    document, _, written = merged(subscription, topic, default)
    return parse_resolved(document, written=written)
