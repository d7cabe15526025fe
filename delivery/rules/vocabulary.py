"""Herald's words for where a delivery stands and how a try went, defined once (pure; no Django).

The models use them as their choices, the rules and the engine compare against them, the API and the admin show
them. Each is a `StrEnum`, so a member equals its stored text (`DeliveryStatus.PENDING == "pending"`).
"""

from enum import StrEnum

from subscriptions.states import choices  # noqa: F401 (the models' choices of these vocabularies)


class DeliveryStatus(StrEnum):
    PENDING = "pending"  # due at `next_attempt_at`, or held (no due time) while paused or its endpoint is unhealthy
    IN_FLIGHT = "in_flight"  # claimed by a job under a lease
    WAITING = "waiting"  # ordered delivery: waits for the previous message of its ordering key to finish
    SUCCEEDED = "succeeded"
    DEAD_LETTERED = "dead_lettered"
    DROPPED = "dropped"  # exhausted with `redrivePolicy.deadLetter: false`
    CANCELLED = "cancelled"  # its subscription's transformation cancelled it: ended without a request


TEST_EVENT_TYPE = "herald.test"  # a test event's type: sent to one subscription by hand, left out of replays

TERMINAL = (DeliveryStatus.SUCCEEDED, DeliveryStatus.DEAD_LETTERED, DeliveryStatus.DROPPED, DeliveryStatus.CANCELLED)
UNFINISHED = (DeliveryStatus.PENDING, DeliveryStatus.IN_FLIGHT, DeliveryStatus.WAITING)


class FanoutOutcome(StrEnum):
    """What publishing decided for one subscription of the topic (the API's `fanout[].outcome`)."""

    DELIVERY = "delivery_created"
    PAUSED = "paused"  # a delivery, held until the subscription resumes
    AWAITING_CONFIRMATION = "held_for_confirmation"  # a delivery, held until a changed endpoint confirms
    FILTERED_OUT = "filtered_out"
    NOT_CONFIRMED = "not_confirmed"
    SUBSCRIBED_AFTER = "subscribed_after_publish"
    NOT_ADDRESSED = "not_addressed"  # another tenant's subscription: the message was published for someone else
    PENDING = "fan_out_pending"  # a large fan-out's job has not written it yet
    UNRECORDED = "not_recorded"  # published before decisions were recorded


class DeadLetterReason(StrEnum):
    MAX_ATTEMPTS = "max_attempts"
    TTL_EXPIRED = "ttl_expired"
    PERMANENT_FAILURE = "permanent_failure"
    ENDPOINT_FROZEN = "endpoint_frozen"
    TRANSFORMATION_FAILED = "transformation_failed"  # its subscription's transformation failed: not retried
    CANCELLED = "cancelled"  # its subscription's transformation cancelled it
    MANUAL = "manual"


class Action(StrEnum):
    """What the policy decides after a try."""

    SUCCEED = "succeed"
    RETRY = "retry"
    DEAD_LETTER = "dead_letter"
    DROP = "drop"
    CANCEL = "cancel"  # its transformation cancelled it: ended, no request


class AttemptOutcome(StrEnum):
    SUCCESS = "success"
    RETRYABLE_FAILURE = "retryable_failure"
    PERMANENT_FAILURE = "permanent_failure"
    CANCELLED = "cancelled"  # the subscription's transformation cancelled it: nothing was sent


class ErrorClass(StrEnum):
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    DNS = "dns"
    TLS = "tls"
    BLOCKED_ADDRESS = "blocked_address"
    HTTP_STATUS = "http_status"
    REDIRECT = "redirect"
    INVALID_RESPONSE = "invalid_response"  # the answer was not valid HTTP (a broken status line, a NUL in a header)
    LEASE_EXPIRED = "lease_expired"  # its worker died or stalled mid-try; the request may have been sent
    UNRECORDABLE = "unrecordable"  # the answer could not be stored; recorded without it
    TOKEN = "token"  # no OAuth2 access token could be obtained from the subscription's token URL; nothing was sent
    INTERNAL = "internal"  # Herald failed before sending
    CUT_SHORT = "cut_short"  # Herald ended the send (its share held the most stalled sends): not the endpoint's fault
    TRANSFORMATION_FAILED = "transformation_failed"  # the subscription's transformation failed; nothing was sent
    CANCELLED = "cancelled"  # the subscription's transformation cancelled the send; nothing was sent


class AttemptQueue(StrEnum):
    """Where a try came from: the RQ queues (named in settings.RQ_QUEUES) plus manual retries and probes."""

    DELIVERIES = "deliveries"
    RETRIES = "retries"
    MANUAL = "manual"
    PROBE = "probe"
