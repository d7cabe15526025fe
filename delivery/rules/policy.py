"""Delivery policies: parse and validate the policy JSON into a frozen, comparable object (pure; no Django).

A policy document accepts AWS SNS HTTP/S delivery policies verbatim plus Herald's extensions (see docs/policies.md).
Parsing reports every error at once as (field path, reason) pairs and never stores half a policy.
"""

import copy
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from delivery.rules.backoff import BACKOFF_FUNCTIONS, sns_retry_delays
from delivery.rules.header_text import control_problem
from delivery.rules.policy_fields import Checker
from delivery.rules.presets import PRESETS, SNS_HEALTHY_DEFAULTS

SNS_MAX_TOTAL_RETRY_SECONDS = 3600
RETRY_AFTER_CAP_SECONDS = 3600
SNS_CONTENT_TYPES = (
    "application/atom+xml", "application/json", "application/octet-stream", "application/soap+xml",
    "application/x-www-form-urlencoded", "application/xhtml+xml", "application/xml", "text/css", "text/csv",
    "text/html", "text/plain", "text/xml",
)
TOP_LEVEL_KEYS = ("preset", "healthyRetryPolicy", "retrySchedule", "retryLimits", "jitter", "throttlePolicy",
                  "requestPolicy", "responsePolicy", "redrivePolicy", "sicklyRetryPolicy", "guaranteed")


class PolicyError(ValueError):
    def __init__(self, errors: list[tuple[str, str]]):
        self.errors = errors
        super().__init__("; ".join(f"{path}: {reason}" for path, reason in errors))

    def as_dict(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for path, reason in self.errors:
            out.setdefault(path, []).append(reason)
        return out


@dataclass(frozen=True)
class DeliveryPolicy:
    """An effective policy: every field explicit. `document` is its canonical JSON form."""

    delays: tuple[float, ...]
    repeat_last: bool
    max_attempts: int | None
    max_age_seconds: float | None
    jitter: float
    max_receives_per_second: int | None
    content_type: str | None
    timeout_seconds: float
    permanent_failure_codes: frozenset[int]
    dead_letter: bool
    document_json: str  # canonical JSON, kept as text so the dataclass stays hashable and comparable

    @property
    def document(self) -> dict:
        return json.loads(self.document_json)

    def retry_delay(self, retry_number: int) -> float | None:
        """Base delay (no jitter) before retry `retry_number` (1-based), or None when the schedule has ended."""
        if retry_number < 1:
            raise ValueError("retry numbers start at 1")
        if self.max_attempts is not None and retry_number + 1 > self.max_attempts:
            return None
        if retry_number <= len(self.delays):
            return self.delays[retry_number - 1]
        if self.repeat_last and self.delays:
            return self.delays[-1]
        return None

    def outlived(self, start: datetime, at: datetime) -> bool:
        """Is `at` past the time-to-live (`maxAgeSeconds`) of an attempt budget that began at `start`? The one
        time-to-live check: before a send, when scheduling a retry, and (through `lifetime_seconds`) for held
        deliveries."""
        return self.max_age_seconds is not None and at > start + timedelta(seconds=self.max_age_seconds)

    @property
    def lifetime_seconds(self) -> float:
        """How long after publishing a delivery may still be attempted: the time-to-live if set, else as long
        as the whole retry schedule takes. Held deliveries are dead-lettered after it."""
        if self.max_age_seconds is not None:
            return self.max_age_seconds
        return self.schedule(limit=1001)[-1]["offset"]

    def schedule(self, limit: int = 200) -> list[dict]:
        """Attempts without jitter: number, delay before it, offset from the first attempt (the preview)."""
        rows = [{"attempt": 1, "delay": 0.0, "offset": 0.0}]
        offset = 0.0
        while len(rows) < limit:
            delay = self.retry_delay(len(rows))
            if delay is None:
                break
            offset += delay
            if self.max_age_seconds is not None and offset > self.max_age_seconds:
                break
            rows.append({"attempt": len(rows) + 1, "delay": round(delay, 3), "offset": round(offset, 3)})
        return rows

    def schedule_end(self, rows: list[dict]) -> str:
        """What ends the schedule `schedule()` produced, in words (the time-to-live often ends it well before the
        maximum number of attempts)."""
        last = rows[-1]["attempt"]
        delay = self.retry_delay(last)
        if delay is None:
            if self.max_attempts is not None and last >= self.max_attempts:
                return f"ends after attempt {last}: the maximum of {self.max_attempts} attempts"
            return f"ends after attempt {last}: the retry schedule has no more delays"
        if self.max_age_seconds is not None and rows[-1]["offset"] + delay > self.max_age_seconds:
            of = f" (of at most {self.max_attempts})" if self.max_attempts else ""
            return (f"ends after attempt {last}{of}: attempt {last + 1} would come after the time-to-live of "
                    f"{self.max_age_seconds:g} s")
        return f"shown up to attempt {last}; it goes on"

    def __repr__(self):
        return f"DeliveryPolicy({self.document_json})"


def _merge(base: dict, override: dict) -> dict:
    merged = copy.deepcopy(base)
    if "retrySchedule" in override:
        merged.pop("healthyRetryPolicy", None)
    if "healthyRetryPolicy" in override:
        merged.pop("retrySchedule", None)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _healthy(check: Checker, doc: dict, user_doc: dict) -> list[float]:
    """SNS's retry phases; the 3,600 s total cap holds for user-written policies (presets are Herald's own)."""
    keys = tuple(SNS_HEALTHY_DEFAULTS)
    section = check.section(doc, "healthyRetryPolicy", keys)
    p = "healthyRetryPolicy"
    max_delay = check.integer(section, p, "maxDelayTarget", 20, 1, SNS_MAX_TOTAL_RETRY_SECONDS)
    min_delay = check.integer(section, p, "minDelayTarget", 20, 1)
    if isinstance(min_delay, int) and isinstance(max_delay, int) and min_delay > max_delay:
        check.fail(f"{p}.minDelayTarget", "must not exceed maxDelayTarget")
    retries = check.integer(section, p, "numRetries", 3, 0, 100)
    phases = {k: check.integer(section, p, k, 0, 0)
              for k in ("numNoDelayRetries", "numMinDelayRetries", "numMaxDelayRetries")}
    function = section.get("backoffFunction", "linear")
    if not isinstance(function, str) or function not in BACKOFF_FUNCTIONS:
        check.fail(f"{p}.backoffFunction", f"must be one of {', '.join(BACKOFF_FUNCTIONS)}")
        function = "linear"
    if sum(phases.values()) > retries:
        check.fail(f"{p}.numRetries", "must be at least numNoDelayRetries + numMinDelayRetries + numMaxDelayRetries")
        return []
    if check.errors:
        return []
    delays = sns_retry_delays(min_delay=min_delay, max_delay=max_delay, num_retries=retries,
                              num_no_delay=phases["numNoDelayRetries"], num_min_delay=phases["numMinDelayRetries"],
                              num_max_delay=phases["numMaxDelayRetries"], function=function)
    preset_own = PRESETS.get(doc.get("preset"), {}).get("healthyRetryPolicy")
    customized = "healthyRetryPolicy" in user_doc and {**SNS_HEALTHY_DEFAULTS, **section} != preset_own
    if customized and sum(delays) > SNS_MAX_TOTAL_RETRY_SECONDS:
        check.fail(p, f"total retry time is {sum(delays):.0f} s; SNS allows at most {SNS_MAX_TOTAL_RETRY_SECONDS} s")
    return delays


def _retry_schedule(check: Checker, doc: dict) -> tuple[list[float], bool]:
    section = check.section(doc, "retrySchedule", ("delays", "repeatLast"))
    delays = section.get("delays")
    if not isinstance(delays, list) or not delays:
        check.fail("retrySchedule.delays", "must be a non-empty list of delays in seconds")
        return [], False
    if len(delays) > 100:
        check.fail("retrySchedule.delays", "must have at most 100 entries")
    for index, delay in enumerate(delays):
        if isinstance(delay, bool) or not isinstance(delay, (int, float)):
            check.fail(f"retrySchedule.delays[{index}]", "must be a number")
        elif not 0 <= delay <= 604800:
            check.fail(f"retrySchedule.delays[{index}]", "must be between 0 and 604800 seconds")
    repeat_last = section.get("repeatLast", False)
    if not isinstance(repeat_last, bool):
        check.fail("retrySchedule.repeatLast", "must be true or false")
    return [float(d) for d in delays if isinstance(d, (int, float)) and not isinstance(d, bool)], repeat_last is True


def resolve(document) -> dict:
    """The full document: the named preset (default `sns-default`) with the given keys winning."""
    if not isinstance(document, dict):
        raise PolicyError([("delivery_policy", "must be a JSON object or a preset name")])
    preset = document.get("preset", "sns-default")
    if not isinstance(preset, str) or preset not in PRESETS:
        raise PolicyError([("preset", f"unknown preset; choose one of {', '.join(PRESETS)}")])
    if "healthyRetryPolicy" in document and "retrySchedule" in document:
        raise PolicyError([("retrySchedule", "cannot be combined with healthyRetryPolicy; choose one")])
    merged = _merge(PRESETS[preset], {k: v for k, v in document.items() if k != "preset"})
    merged["preset"] = preset
    return merged


def parse(document) -> DeliveryPolicy:
    """Validate a policy document (or a preset name) and return the effective policy, or raise PolicyError."""
    if isinstance(document, str):
        document = {"preset": document}
    return parse_resolved(resolve(document), written=document if isinstance(document, dict) else {})


def parse_resolved(doc: dict, *, written: dict) -> DeliveryPolicy:
    """A full document (its preset's sections already in it, as `resolve` or `policy_levels.merged` make it),
    validated; `written` holds the sections a user wrote (SNS's 3,600 s cap is theirs, not the presets')."""
    doc, user_doc = copy.deepcopy(doc), written
    check = Checker()
    for unknown in sorted(set(doc) - set(TOP_LEVEL_KEYS)):
        check.fail(unknown, "unknown field")
    if "retrySchedule" in doc:
        delays, repeat_last = _retry_schedule(check, doc)
    else:
        delays, repeat_last = _healthy(check, doc, user_doc), False
    max_attempts, max_age = _retry_limits(check, doc, repeat_last)
    jitter = check.number(doc, "", "jitter", 0, 0, 0.5)
    throttle = check.section(doc, "throttlePolicy", ("maxReceivesPerSecond",))
    rate = check.integer(throttle, "throttlePolicy", "maxReceivesPerSecond", None, 1, 100_000)
    content_type, timeout = _request(check, doc)
    codes = _permanent_failure_codes(check, doc)
    redrive = check.section(doc, "redrivePolicy", ("deadLetter", "deadLetterTargetArn"))
    dead_letter = redrive.get("deadLetter", True)
    if not isinstance(dead_letter, bool):
        check.fail("redrivePolicy.deadLetter", "must be true or false")
    if check.errors:
        raise PolicyError(check.errors)
    if "healthyRetryPolicy" in doc:
        doc["healthyRetryPolicy"] = {**SNS_HEALTHY_DEFAULTS, **doc["healthyRetryPolicy"]}
    return DeliveryPolicy(
        delays=tuple(delays), repeat_last=repeat_last,
        max_attempts=max_attempts if max_attempts is not None else (None if repeat_last else len(delays) + 1),
        max_age_seconds=max_age, jitter=float(jitter), max_receives_per_second=rate,
        content_type=content_type, timeout_seconds=float(timeout),
        permanent_failure_codes=frozenset(codes), dead_letter=dead_letter,
        document_json=json.dumps(doc, sort_keys=True, separators=(",", ":")),
    )


def _retry_limits(check: Checker, doc: dict, repeat_last: bool) -> tuple[int | None, float | None]:
    """(maxAttempts, maxAgeSeconds); a repeating schedule needs one of them to end."""
    limits = check.section(doc, "retryLimits", ("maxAttempts", "maxAgeSeconds"))
    max_attempts = check.integer(limits, "retryLimits", "maxAttempts", None, 1, 1000)
    max_age = check.number(limits, "retryLimits", "maxAgeSeconds", None, 1, 86400 * 30)
    if "healthyRetryPolicy" not in doc and max_attempts is None and max_age is None and repeat_last:
        check.fail("retryLimits", "a repeating retrySchedule needs maxAttempts or maxAgeSeconds")
    return max_attempts, max_age


def _request(check: Checker, doc: dict) -> tuple[str | None, float]:
    """(headerContentType, timeoutSeconds): a content type is one of SNS's, sent as the Content-Type header."""
    request = check.section(doc, "requestPolicy", ("headerContentType", "timeoutSeconds"))
    content_type = request.get("headerContentType")
    if content_type is not None and not isinstance(content_type, str):
        check.fail("requestPolicy.headerContentType", "must be a string")
        content_type = None
    elif content_type is not None and control_problem(content_type, tab=True):  # sent as the Content-Type header
        check.fail("requestPolicy.headerContentType", control_problem(content_type, tab=True))
        content_type = None
    elif content_type is not None and content_type.split(";")[0].strip() not in SNS_CONTENT_TYPES:
        check.fail("requestPolicy.headerContentType", f"must be one of {', '.join(SNS_CONTENT_TYPES)}")
    return content_type, check.number(request, "requestPolicy", "timeoutSeconds", 30, 1, 60)


def _permanent_failure_codes(check: Checker, doc: dict) -> list[int]:
    response = check.section(doc, "responsePolicy", ("permanentFailureCodes",))
    codes = response.get("permanentFailureCodes", [])
    if not isinstance(codes, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in codes):
        check.fail("responsePolicy.permanentFailureCodes", "must be a list of HTTP status codes")
        codes = []
    for code in codes:
        if not 300 <= code <= 599:
            check.fail("responsePolicy.permanentFailureCodes", f"{code} is not a 3xx, 4xx or 5xx status")
    return codes
