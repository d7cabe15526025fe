"""Endpoint circuit breaking, Workfront's rules (pure; no Django; `now` passed in).

active → disabled: in the rate window, attempts > min_attempts and failure rate > disable_rate; or consecutive
    failures reach disable_consecutive.
→ frozen: consecutive failures exceed freeze_consecutive and the last success is older than freeze_silence (or
    never was); or consecutive failures reach freeze_absolute; or a `410 Gone`.
disabled → active: a successful probe. frozen → active: only by hand.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from subscriptions.states import EndpointState

ACTIVE, DISABLED, FROZEN = EndpointState.ACTIVE, EndpointState.DISABLED, EndpointState.FROZEN


@dataclass(frozen=True)
class Thresholds:
    disable_failure_rate: float = 0.70
    disable_min_attempts: int = 100
    disable_consecutive_failures: int = 2000
    freeze_consecutive_failures: int = 2000
    freeze_silence_seconds: float = 259_200
    freeze_absolute_failures: int = 50_000


@dataclass(frozen=True)
class Health:
    state: str
    consecutive_failures: int
    window_attempts: int
    window_failures: int
    last_success_at: datetime | None


@dataclass(frozen=True)
class Transition:
    to_state: str
    reason: str


def next_state(health: Health, limits: Thresholds, now: datetime, *, gone: bool = False,
               probe_succeeded: bool = False) -> Transition | None:
    """The transition the counters call for after new results, or None to stay."""
    if health.state == FROZEN:
        return None  # only an operator lifts a freeze
    if gone:
        return Transition(FROZEN, "the endpoint answered 410 Gone")
    consecutive = health.consecutive_failures
    if consecutive >= limits.freeze_absolute_failures:
        return Transition(FROZEN, f"{consecutive} consecutive failures")
    silent = health.last_success_at is None or now - health.last_success_at > timedelta(
        seconds=limits.freeze_silence_seconds)
    if consecutive > limits.freeze_consecutive_failures and silent:
        since = "never succeeded" if health.last_success_at is None else (
            f"no success since {health.last_success_at.isoformat()}")
        return Transition(FROZEN, f"{consecutive} consecutive failures and {since}")
    if health.state == DISABLED:
        if probe_succeeded:
            return Transition(ACTIVE, "a probe succeeded")
        return None
    if consecutive >= limits.disable_consecutive_failures:
        return Transition(DISABLED, f"{consecutive} consecutive failures")
    attempts, failures = health.window_attempts, health.window_failures
    if attempts > limits.disable_min_attempts and failures > limits.disable_failure_rate * attempts:
        return Transition(DISABLED, f"{failures} of {attempts} attempts failed in the rate window "
                                    f"({failures / attempts:.1%})")
    return None
