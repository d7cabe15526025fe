"""SNS healthyRetryPolicy phases and backoff functions (pure).

The formulas are those of the one public SNS-compatible implementation (Comcast CMB), with i = 1..N over the N
backoff retries; N = 1 gives the minimum delay.
"""

import math

BACKOFF_FUNCTIONS = ("linear", "arithmetic", "geometric", "exponential")


def backoff_delays(function: str, minimum: float, maximum: float, count: int) -> list[float]:
    if count <= 0:
        return []
    if count == 1 or maximum == minimum:
        return [float(minimum)] * count
    span, last = maximum - minimum, count - 1
    delays = []
    for i in range(1, count + 1):
        if function == "linear":
            delay = minimum + span * (i - 1) / last
        elif function == "arithmetic":
            delay = minimum + span * (i - 1) ** 2 / last**2
        elif function == "geometric":
            x = (span + 1) ** (1 / last)
            delay = x ** (i - 1) + minimum - 1
        elif function == "exponential":
            a = span / (math.e**last - 1)
            delay = a * math.e ** (i - 1) + minimum - a
        else:
            raise ValueError(f"unknown backoff function {function!r}")
        delays.append(delay)
    delays[0], delays[-1] = float(minimum), float(maximum)  # exact ends, whatever floating point did between
    return delays


def sns_retry_delays(
    *,
    min_delay: float,
    max_delay: float,
    num_retries: int,
    num_no_delay: int,
    num_min_delay: int,
    num_max_delay: int,
    function: str,
) -> list[float]:
    """Delays before each retry, in SNS phase order: no-delay, pre-backoff, backoff, post-backoff."""
    num_backoff = num_retries - num_no_delay - num_min_delay - num_max_delay
    return (
        [0.0] * num_no_delay
        + [float(min_delay)] * num_min_delay
        + backoff_delays(function, min_delay, max_delay, num_backoff)
        + [float(max_delay)] * num_max_delay
    )


def human(seconds: float) -> str:
    """A delay or an offset as schedules show it (the console, docs/policies.md's tables): seconds under two
    minutes, minutes under two hours, then hours."""
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
