"""JSON log lines: one object per line, with a record's structured fields at the top level (an attempt's owner,
tenant, subscription, endpoint host, attempt number, outcome). Herald's own project uses it with
HERALD_LOG_FORMAT=json; a host project names it in its LOGGING (docs/embedding.md, "Logs"). Every value is redacted
before it is encoded (delivery/redaction.py): after encoding, escaped quotes and newlines would hide a credential's
shape."""

import json
import logging
from datetime import UTC, datetime

from delivery.redaction import redact


def _redacted(value):
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _redacted(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(item) for item in value]
    return value if isinstance(value, (int, float, bool)) or value is None else redact(str(value))


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
                 "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        entry.update(getattr(record, "herald", None) or {})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = record.stack_info
        return json.dumps(_redacted(entry))
