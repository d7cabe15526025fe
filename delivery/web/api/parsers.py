"""The API's JSON parser: every JSON body is checked once, here, for what could not be stored.

Python's parser turns `1e400` into infinity, decodes `\\u0000` and lone surrogates into strings PostgreSQL rejects,
and recurses on deep nesting; each of these becomes a 400 naming the offending path instead of a 500.
"""

import json

from django.conf import settings
from rest_framework import parsers, status
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.settings import api_settings

from delivery.rules.storable import json_problems


def reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def problems_by_field(problems: list[tuple[str, str]]) -> dict[str, list[str]]:
    """{"payload": ["payload.a[0]: contains a NUL character ..."]}: grouped by the top-level field."""
    grouped: dict[str, list[str]] = {}
    for path, reason in problems:
        field = path.split(".")[0].split("[")[0] or api_settings.NON_FIELD_ERRORS_KEY
        grouped.setdefault(field, []).append(f"{path}: {reason}")
    return grouped


class BodyTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class SafeJSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = parsers.get_encoding(parser_context or {})
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise BodyTooLarge(f"The request body is larger than {limit} bytes.")
        try:
            data = json.loads(raw.decode(encoding), parse_constant=reject_constant)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply") from None
        except ValueError as exc:  # also UnicodeDecodeError
            raise ParseError(f"JSON parse error - {exc}") from None
        problems = json_problems(data)
        if problems:
            raise ValidationError(problems_by_field(problems))
        return data
