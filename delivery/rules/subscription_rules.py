"""What a subscription must be, whoever changes it: the API's serializers, the admin's form and the Python services
(`subscription_create`, `subscription_update`) all ask `problems`, so no door lets a combination in that another
refuses.

A subscription is read as a mapping of its fields: `current` (what is stored; empty for a new one) overlaid with
`changes`. Checks that concern only fields a change leaves alone are not repeated (a stored filter is not parsed
again because the endpoint moved)."""

from collections.abc import Mapping

from delivery.rules import storable
from delivery.rules.filters import policy as filters

OAUTH_CREDENTIALS = ("oauth_token_url", "oauth_client_id", "oauth_client_secret")
# What a subscription's owner (or tenant) may set, the one list every door reads: the services take these and
# nothing else (`subscribing.subscription_update` refuses any other name), the API's create passes them on.
CREDENTIALS = ("client_certificate", "client_key", *OAUTH_CREDENTIALS, "oauth_scope")
STREAM_OPTIONS = ("filter_policy_scope", "event_types", "ordered_delivery", "max_events_per_batch",
                  "preferred_batch_size_kb", "delivery_headers", "send_trace_context", "transformation",
                  "event_version")
UPDATABLE = ("endpoint", "delivery_policy", "filter_policy", "raw_message_delivery", "signature_scheme",
             *CREDENTIALS, *STREAM_OPTIONS)
RAW_AND_BATCHES = "batches are CloudEvents batches; they cannot be combined with raw_message_delivery"
TRANSFORMATION_AND_BATCHES = ("batches are CloudEvents batches, and a transformation changes one webhook at a time; "
                              "they cannot be combined: set max_events_per_batch to 1 or remove the transformation")
TRANSFORMATION_SHAPE = 'must be {"code": "<JavaScript defining function handler(webhook)>", "enabled": true} or null'
OAUTH_TOGETHER = "give the token URL, client id and client secret together, or none"
OAUTH_AUTHORIZATION = ("has an Authorization header, which OAuth2 sets itself: remove it from delivery_headers in "
                       "the same request that adds oauth_token_url")


def problems(current: Mapping, changes: Mapping) -> dict[str, str]:
    """{field: reason} for each rule the subscription would break with `changes` applied; empty when it may be
    stored."""
    after = {**current, **changes}
    found: dict[str, str] = {}
    if changes.keys() & {"filter_policy", "filter_policy_scope", "event_types"}:
        policy = after.get("filter_policy") if changes.keys() & {"filter_policy", "filter_policy_scope"} else None
        found.update(filters.problems(policy=policy, event_types=changes.get("event_types"),
                                      scope=after.get("filter_policy_scope") or filters.ATTRIBUTES))
    if after.get("raw_message_delivery") and (after.get("max_events_per_batch") or 1) > 1:
        found["max_events_per_batch"] = RAW_AND_BATCHES
    if _transforms(after.get("transformation")) and (after.get("max_events_per_batch") or 1) > 1:
        found["transformation" if "transformation" in changes else "max_events_per_batch"] = TRANSFORMATION_AND_BATCHES
    if changes.keys() & set(OAUTH_CREDENTIALS):
        given = {name: after.get(name) or "" for name in OAUTH_CREDENTIALS}
        missing = [name for name, value in given.items() if not value]
        if missing and len(missing) < len(OAUTH_CREDENTIALS):
            found[missing[0]] = OAUTH_TOGETHER
    if after.get("oauth_token_url") and changes.keys() & {"oauth_token_url", "delivery_headers"}:
        if any(str(header.get("name", "")).lower() == "authorization" for header in after.get("delivery_headers") or []
               if isinstance(header, Mapping)):
            found.setdefault("delivery_headers", OAUTH_AUTHORIZATION)
    return found


def stored(subscription, names=None) -> dict:
    """The fields `problems` reads, of a stored subscription (any object with those attributes)."""
    names = names or ("filter_policy", "filter_policy_scope", "event_types", "raw_message_delivery",
                      "max_events_per_batch", "delivery_headers", "transformation", *OAUTH_CREDENTIALS)
    return {name: getattr(subscription, name, None) for name in names}


def _transforms(value) -> bool:
    """Whether a stored transformation runs (one that is there and not turned off)."""
    return isinstance(value, Mapping) and value.get("enabled", True) is not False


def code_problem(code, code_bytes: int) -> str | None:
    """Why `code` cannot be a transformation's code: not text, empty, larger than `code_bytes`, or unstorable."""
    if not isinstance(code, str) or not code.strip():
        return "code must be JavaScript defining function handler(webhook)"
    unstorable = storable.json_problems(code)
    if unstorable:
        return f"code {unstorable[0][1]}"
    if len(code.encode()) > code_bytes:
        return f"the code is larger than {code_bytes} bytes (HERALD_TRANSFORM_CODE_MAX_BYTES)"
    return None


def transformation_problem(value, code_bytes: int) -> str | None:
    """Why `value` is not a subscription's transformation: {"code": …, "enabled": true or false (default true)}, or
    None (no transformation). Whether the code compiles is the sandbox's to say."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return TRANSFORMATION_SHAPE
    unknown = sorted(str(key)[:40] for key in value if key not in ("code", "enabled"))
    if unknown:
        return f"has no {', '.join(unknown)}: {TRANSFORMATION_SHAPE}"
    if not isinstance(value.get("enabled", True), bool):
        return "enabled must be true or false"
    return code_problem(value.get("code"), code_bytes)


def transformation_stored(value) -> dict | None:
    """A transformation `transformation_problem` accepts, as it is stored: enabled unless it says otherwise."""
    return None if value is None else {"code": value["code"], "enabled": value.get("enabled", True)}
