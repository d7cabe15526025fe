"""JSON log lines (HERALD_LOG_FORMAT=json): one object per line, with a record's structured fields at the top level."""

import json
import logging
from datetime import UTC, datetime

from delivery.redaction import redact


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
                 "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        entry.update(getattr(record, "herald", None) or {})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return redact(json.dumps(entry, default=str))
