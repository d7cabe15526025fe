"""What the portal calls things: the words a customer of the owner reads, not Herald's or SNS's (pure; no Django).

The portal's reader is the owner's customer, who knows its endpoint and the events it chose, not delivery policies,
dead-letter queues or circuit breakers. Each stored state is shown in these words; the stored value stays in the
page's CSS class (`status-dead_lettered`), so styles and tests can still find it.
"""

DELIVERY = {
    "pending": "Waiting to be sent",
    "in_flight": "Sending",
    "waiting": "Waiting for an earlier event",
    "succeeded": "Delivered",
    "dead_lettered": "Failed",
    "dropped": "Failed",
    "cancelled": "Not sent: your transformation cancelled it",
}
RETRYING = "Failed, will retry"  # pending after at least one attempt
WHY_FAILED = {
    "max_attempts": "no attempt succeeded before retries ran out",
    "ttl_expired": "too old to send: it waited longer than events are kept for sending",
    "permanent_failure": "your endpoint's answer means it will never accept it",
    "endpoint_frozen": "your endpoint was frozen",
    "transformation_failed": "your transformation failed on it, so it was not sent",
    "cancelled": "your transformation cancelled it",
    "manual": "stopped by hand",
}
SUBSCRIPTION = {
    "pending_confirmation": "Waiting for your endpoint to confirm",
    "confirmed": "Receiving events",
    "paused": "Paused",
}
ENDPOINT = {
    "active": "Healthy",
    "disabled": "Disabled after repeated failures",
    "frozen": "Frozen: nothing is sent",
}
ATTEMPT = {
    "success": "Delivered",
    "retryable_failure": "Failed",
    "permanent_failure": "Refused",
    "cancelled": "Cancelled by your transformation",
}
ERROR = {
    "timeout": "no answer in time",
    "connection": "could not connect",
    "dns": "the host name was not found",
    "tls": "the TLS connection failed (certificate?)",
    "blocked_address": "the address is not one events may be sent to",
    "http_status": "answered with an error status",
    "redirect": "answered with a redirect, which is not followed",
    "invalid_response": "the answer was not valid HTTP",
    "lease_expired": "interrupted; the request may have reached you",
    "unrecordable": "the answer could not be stored",
    "token": "no access token could be obtained for your endpoint",
    "internal": "failed before anything was sent",
    "cut_short": "no answer yet, so we stopped waiting and will try again; this does not count against you",
    "transformation_failed": "your transformation failed, so nothing was sent",
    "cancelled": "your transformation cancelled it, so nothing was sent",
}


def delivery_status(status: str, attempts: int = 0) -> str:
    if status == "pending" and attempts:
        return RETRYING
    return DELIVERY.get(status, status)


def why_failed(reason: str) -> str:
    return WHY_FAILED.get(reason, reason)


def subscription_status(status: str) -> str:
    return SUBSCRIPTION.get(status, status)


def endpoint_state(state: str) -> str:
    return ENDPOINT.get(state, state)


def attempt_outcome(outcome: str) -> str:
    return ATTEMPT.get(outcome, outcome)


def error(error_class: str) -> str:
    return ERROR.get(error_class, error_class)
