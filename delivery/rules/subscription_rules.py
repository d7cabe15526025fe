"""What a subscription must be, whoever changes it: the API's serializers, the admin's form and the Python services
(`subscription_create`, `subscription_update`) all ask `problems`, so no door lets a combination in that another
refuses.

A subscription is read as a mapping of its fields: `current` (what is stored; empty for a new one) overlaid with
`changes`. Checks that concern only fields a change leaves alone are not repeated (a stored filter is not parsed
again because the endpoint moved)."""

from collections.abc import Mapping

from delivery.rules.filters import policy as filters

OAUTH_CREDENTIALS = ("oauth_token_url", "oauth_client_id", "oauth_client_secret")
# What a subscription's owner (or tenant) may set, the one list every door reads: the services take these and
# nothing else (`subscribing.subscription_update` refuses any other name), the API's create passes them on.
CREDENTIALS = ("client_certificate", "client_key", *OAUTH_CREDENTIALS, "oauth_scope")
STREAM_OPTIONS = ("filter_policy_scope", "event_types", "ordered_delivery", "max_events_per_batch",
                  "preferred_batch_size_kb", "delivery_headers", "send_trace_context")
UPDATABLE = ("endpoint", "delivery_policy", "filter_policy", "raw_message_delivery", "signature_scheme",
             *CREDENTIALS, *STREAM_OPTIONS)
RAW_AND_BATCHES = "batches are CloudEvents batches; they cannot be combined with raw_message_delivery"
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
                      "max_events_per_batch", "delivery_headers", *OAUTH_CREDENTIALS)
    return {name: getattr(subscription, name, None) for name in names}
