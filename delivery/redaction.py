"""Credentials never reach a log line, whoever writes it (docs/security.md, "Secrets in logs").

Herald's app installs `RedactingRecord` as the process's log record factory when Django starts it (web, workers,
scheduler, a host project's processes alike), so every record, from Herald, Django's request logger ("Not Found:
/portal/<token>/…"), gunicorn, RQ or the host's own code, renders its message, its traceback and its stack with the
credentials Herald issues or forwards replaced by `[redacted]`:

- portal links: the token in `/portal/<token>/`;
- tenant API keys (`htk_…`), signing secrets and keys (`whsec_…`, `whsk_…`);
- `Authorization` values (`Bearer …`, `Token …`, `Basic …`);
- confirmation tokens (64 hex digits, wherever they stand; SHA-256 digests look the same and go with them) and
  other `token=` / `"token": "…"` pairs (query strings, JSON, form bodies), client secrets, passwords.

The record keeps its template and arguments (grouping by message in an error tracker still works); only what it
renders is redacted. `RedactingFilter` does the same for a handler configured by hand.
"""

import logging
import re
from urllib.parse import unquote

REDACTED = "[redacted]"
_START = r"(?<![A-Za-z0-9])"  # not inside a longer word (`\b` misses `x_htk_…` and `%3Dhtk_…`)
_PATTERNS = [
    # a portal token is signed (`<value>:<time>:<signature>`): a segment without a colon is a file or a page
    (re.compile(r"(/portal(?:/|%2F))[^/\s?#\"'<>%:]*:[^/\s?#\"'<>%]+", re.IGNORECASE), rf"\g<1>{REDACTED}"),
    (re.compile(r"(%2Fportal(?:/|%2F))[^/\s?#\"'<>%:]*:[^/\s?#\"'<>%]+", re.IGNORECASE), rf"\g<1>{REDACTED}"),
    (re.compile(r"(htk_|whsec_|whsk_)[A-Za-z0-9+/=_-]+"), rf"\g<1>{REDACTED}"),
    (re.compile(_START + r"(Bearer|Basic)(\s+)\"?[A-Za-z0-9._~+/=:,;-]{6,}\"?", re.IGNORECASE),
     rf"\g<1>\g<2>{REDACTED}"),
    (re.compile(_START + r"(Token)(\s+)[A-Za-z0-9._~+/=:-]{20,}", re.IGNORECASE), rf"\g<1>\g<2>{REDACTED}"),  # DRF's
    (re.compile(r"((?:access_|refresh_|id_|confirmation_)?token|client_secret|secret|password|validationCode|"
                r"validationResponse)(\"?'?\s*(?:[:=]|%3D)\s*\"?'?)(?!\[redacted\])[^\s\"'&}]+", re.IGNORECASE),
     rf"\g<1>\g<2>{REDACTED}"),
    (re.compile(_START + r"[0-9a-f]{64}(?![A-Za-z0-9])"), REDACTED),  # a confirmation token (SHA-256 digests alike)
    (re.compile(r"(://)[^/\s:@]*:[^/\s@]+@"), rf"\g<1>{REDACTED}@"),  # [user]:password in a URL
]


def redact(text: str) -> str:
    """`text` with every credential Herald knows the shape of replaced by [redacted]."""
    if not text:
        return text
    if "%" in text:  # a percent-encoded credential (`/%70ortal/<token>/` reaches the portal too): the line is
        decoded = unquote(text)  # written decoded where decoding shows one
        redacted = _sub(decoded)
        if redacted != decoded:
            return redacted
    return _sub(text)


def _sub(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactingRecord(logging.LogRecord):
    """A record whose message, traceback text and stack are redacted as they are rendered."""

    def getMessage(self) -> str:
        return redact(super().getMessage())

    @property
    def exc_text(self):  # Formatter.format caches the formatted traceback here, then prints it
        return self.__dict__.get("_exc_text")

    @exc_text.setter
    def exc_text(self, value):
        self.__dict__["_exc_text"] = redact(value) if isinstance(value, str) else value

    @property
    def stack_info(self):
        return self.__dict__.get("_stack_info")

    @stack_info.setter
    def stack_info(self, value):
        self.__dict__["_stack_info"] = redact(value) if isinstance(value, str) else value


class RedactingFilter(logging.Filter):
    """For a handler set up outside Django: renders the record's message redacted (and keeps the line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record, RedactingRecord):
            record.msg, record.args = redact(record.getMessage()), None
        return True


_classes: dict[type, type] = {logging.LogRecord: RedactingRecord}


def _redacting(cls: type) -> type:
    """RedactingRecord's behaviour on another library's record class (a factory set before Herald's)."""
    if cls not in _classes:
        _classes[cls] = type(f"Redacting{cls.__name__}", (RedactingRecord, cls), {})
    return _classes[cls]


def install() -> None:
    """Make every record of this process a RedactingRecord (idempotent; keeps a factory another library set)."""
    current = logging.getLogRecordFactory()
    if getattr(current, "herald_redacting", False):
        return

    def factory(*args, **kwargs):
        record = current(*args, **kwargs)
        if not isinstance(record, RedactingRecord):
            record.__class__ = _redacting(type(record))
            record.exc_text, record.stack_info = record.__dict__.pop("exc_text", None), \
                record.__dict__.pop("stack_info", None)
        return record

    factory.herald_redacting = True
    logging.setLogRecordFactory(factory)
