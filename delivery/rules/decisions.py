"""What happens after an attempt (pure; no Django): succeed, retry at T, dead-letter, or drop."""

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from delivery.rules.policy import RETRY_AFTER_CAP_SECONDS, DeliveryPolicy
from delivery.rules.vocabulary import Action, AttemptOutcome, DeadLetterReason, ErrorClass

SUCCEED, RETRY, DEAD_LETTER, DROP, CANCEL = Action.SUCCEED, Action.RETRY, Action.DEAD_LETTER, Action.DROP, Action.CANCEL
# Tries the subscription's transformation ended before a request: not the endpoint's answer and not retried.
TRANSFORMED_AWAY = frozenset({ErrorClass.TRANSFORMATION_FAILED, ErrorClass.CANCELLED})
# Answers whose Retry-After is honoured (within the policy's bounds and at most RETRY_AFTER_CAP_SECONDS): Standard
# Webhooks' sender rules treat 429, 502 and 504 as the receiver asking to be throttled, and name 503's Retry-After.
THROTTLING_STATUSES = frozenset({429, 502, 503, 504})
MIN_HERALD_RETRY_SECONDS = 1.0  # the least a try Herald ended waits before the next
MIN_HERALD_LIFETIME_SECONDS = 60.0  # tries Herald ended go on at least this long (a policy of one attempt has none)
MAX_RETRY_AFTER_CHARS = 64  # an HTTP-date is 29; anything longer is not a Retry-After


@dataclass(frozen=True)
class Answer:
    """What a try came back with: the endpoint's status (None: no answer), the error class, its Retry-After."""

    status: int | None
    error_class: str = ""
    retry_after: float | None = None  # seconds, from the answer's Retry-After header


@dataclass(frozen=True)
class Decision:
    action: str
    attempt_outcome: str  # success | retryable_failure | permanent_failure (what the Attempt row records)
    next_attempt_at: datetime | None = None
    reason: str = ""  # dead-letter reason
    freeze_endpoint: bool = False
    counted: bool = True  # False: the try was Herald's own failure (cut_short) and spends none of the budget


def parse_retry_after(value, now: datetime) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date; None if absent or unreadable. Total: whatever
    a receiver sent (Unicode digits such as "²", which `str.isdigit` accepts and `float` refuses, huge numbers, NUL,
    dates past the calendar) is a number or None, never an exception."""
    if not isinstance(value, str) or not value or len(value) > MAX_RETRY_AFTER_CHARS:
        return None
    value = value.strip(" \t")
    if value.isascii() and value.isdigit():
        return min(float(value), float(RETRY_AFTER_CAP_SECONDS))
    try:
        moment = parsedate_to_datetime(value)
        if moment.tzinfo is None:
            return None
        return max(0.0, min((moment - now).total_seconds(), float(RETRY_AFTER_CAP_SECONDS)))
    except Exception:  # email.utils raises TypeError, ValueError, IndexError or OverflowError on odd dates
        return None


def jittered(delay: float, jitter: float, rng: random.Random) -> float:
    if not jitter or not delay:
        return delay
    return delay * rng.uniform(1 - jitter, 1 + jitter)


def give_up(policy: DeliveryPolicy, reason: str, outcome: str, freeze: bool = False) -> Decision:
    action = DEAD_LETTER if policy.dead_letter else DROP
    return Decision(action=action, attempt_outcome=outcome, reason=reason, freeze_endpoint=freeze)


def decide(
    policy: DeliveryPolicy,
    *,
    attempt_number: int,
    published_at: datetime,
    now: datetime,
    rng: random.Random,
    answer: Answer,
) -> Decision:
    """Decide after attempt `attempt_number` (1-based) came back with `answer` at `now`."""
    status = answer.status
    if answer.error_class == ErrorClass.CANCELLED:
        return Decision(action=CANCEL, attempt_outcome=AttemptOutcome.CANCELLED, reason=DeadLetterReason.CANCELLED,
                        counted=False)
    if answer.error_class == ErrorClass.TRANSFORMATION_FAILED:  # deterministic: another try would fail the same way
        return give_up(policy, DeadLetterReason.TRANSFORMATION_FAILED, AttemptOutcome.PERMANENT_FAILURE)
    if answer.error_class == ErrorClass.CUT_SHORT:
        return ended_by_herald(policy, attempt_number=attempt_number, published_at=published_at, now=now, rng=rng)
    if status is not None and 200 <= status < 300:
        return Decision(action=SUCCEED, attempt_outcome=AttemptOutcome.SUCCESS)
    if status == 410:
        return give_up(policy, DeadLetterReason.PERMANENT_FAILURE, AttemptOutcome.PERMANENT_FAILURE, freeze=True)
    if status is not None and status in policy.permanent_failure_codes:
        return give_up(policy, DeadLetterReason.PERMANENT_FAILURE, AttemptOutcome.PERMANENT_FAILURE)
    delay = policy.retry_delay(attempt_number)
    if delay is None:
        return give_up(policy, DeadLetterReason.MAX_ATTEMPTS, AttemptOutcome.RETRYABLE_FAILURE)
    delay = jittered(delay, policy.jitter, rng)
    if status in THROTTLING_STATUSES and answer.retry_after is not None:
        delay = max(delay, min(answer.retry_after, RETRY_AFTER_CAP_SECONDS))
    at = now + timedelta(seconds=delay)
    if policy.outlived(published_at, at):
        return give_up(policy, DeadLetterReason.TTL_EXPIRED, AttemptOutcome.RETRYABLE_FAILURE)
    return Decision(action=RETRY, attempt_outcome=AttemptOutcome.RETRYABLE_FAILURE, next_attempt_at=at)


def ended_by_herald(policy: DeliveryPolicy, *, attempt_number: int, published_at: datetime, now: datetime,
                    rng: random.Random) -> Decision:
    """Herald ended the try itself (`cut_short`: its share held the most of a process's stalled sends). Not the
    endpoint's failure and not one of the delivery's attempts: it is tried again after the delay its policy gives
    the attempt it was (at least a second). What ends it is its lifetime: the time-to-live, or as long as its whole
    retry schedule takes when the policy has none (a delivery whose sends Herald keeps ending is not retried
    forever)."""
    delay = policy.retry_delay(attempt_number)
    if delay is None and attempt_number > 1:
        delay = policy.retry_delay(attempt_number - 1)
    at = now + timedelta(seconds=max(MIN_HERALD_RETRY_SECONDS, jittered(delay or 0.0, policy.jitter, rng)))
    if at > published_at + timedelta(seconds=max(policy.lifetime_seconds, MIN_HERALD_LIFETIME_SECONDS)):
        return give_up(policy, DeadLetterReason.TTL_EXPIRED, AttemptOutcome.RETRYABLE_FAILURE)
    return Decision(action=RETRY, attempt_outcome=AttemptOutcome.RETRYABLE_FAILURE, next_attempt_at=at, counted=False)
