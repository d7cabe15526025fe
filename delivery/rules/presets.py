"""The built-in delivery policies: SNS's defaults, Workfront's and Event Grid's schedules (plain data)."""

SNS_HEALTHY_DEFAULTS = {
    "minDelayTarget": 20, "maxDelayTarget": 20, "numRetries": 3, "numNoDelayRetries": 0,
    "numMinDelayRetries": 0, "numMaxDelayRetries": 0, "backoffFunction": "linear",
}
WORKFRONT_STEP = 84.8
EVENT_GRID_PERMANENT = [400, 401, 403, 413]

PRESETS: dict[str, dict] = {
    "sns-default": {"healthyRetryPolicy": dict(SNS_HEALTHY_DEFAULTS)},
    "sns-customer-managed": {"healthyRetryPolicy": {
        "minDelayTarget": 10, "maxDelayTarget": 600, "numRetries": 50, "numNoDelayRetries": 0,
        "numMinDelayRetries": 2, "numMaxDelayRetries": 38, "backoffFunction": "exponential"}},
    # Retry n at ((2^n) - 1) * 84.8 s after the first failure: the gap before retry n is 2^(n-1) * 84.8 s.
    "workfront": {
        "retrySchedule": {"delays": [round(WORKFRONT_STEP * 2 ** (n - 1), 1) for n in range(1, 12)],
                          "repeatLast": False},
        "retryLimits": {"maxAttempts": 12},
        "jitter": 0,
    },
    "event-grid": {
        "retrySchedule": {"delays": [10, 30, 60, 300, 600, 1800, 3600, 10800, 21600, 43200], "repeatLast": True},
        "retryLimits": {"maxAttempts": 30, "maxAgeSeconds": 86400},
        "jitter": 0.1,
        "responsePolicy": {"permanentFailureCodes": EVENT_GRID_PERMANENT},
    },
    "event-grid-preview": {
        "retrySchedule": {"delays": [10, 30, 60, 300, 600, 1800, 3600], "repeatLast": True},
        "retryLimits": {"maxAgeSeconds": 7200},
        "jitter": 0.1,
        "responsePolicy": {"permanentFailureCodes": EVENT_GRID_PERMANENT},
    },
}
