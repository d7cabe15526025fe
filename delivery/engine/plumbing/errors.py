"""The one error type services raise; the API turns it into a clean 4xx (delivery/web/api/errors.py)."""


class ApplicationError(Exception):
    """Raised by services; the API turns it into a clean 4xx."""

    def __init__(self, message: str, *, status_code: int = 400, field: str | None = None, extra: dict | None = None,
                 retry_after: int | None = None):
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.field = field
        self.extra = extra or {}
        self.retry_after = retry_after  # seconds: the API's Retry-After (a quota's window)

    def as_payload(self) -> dict:
        if self.field:
            return {self.field: [self.message], **self.extra}
        return {"detail": self.message, **self.extra}

    @classmethod
    def of_problems(cls, found: dict[str, str]) -> "ApplicationError":
        """A 400 naming every field of `found` ({field: reason}), the first as its message."""
        (field, reason), *others = found.items()
        return cls(reason, field=field, extra={name: [text] for name, text in others})
