"""The API's JSON error shape: services' ApplicationError, invalid policies, oversized bodies, outages."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules.policy import PolicyError
from delivery.web.api.authentication import HOW


def api_exception_handler(exc, context):
    if isinstance(exc, ApplicationError):
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
        return Response(exc.as_payload(), status=exc.status_code, headers=headers)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response({"detail": f"The request body is larger than {limit} bytes."},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, PolicyError):
        return Response({"delivery_policy": exc.as_dict()}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError)):
        return Response({"detail": "Redis is unavailable; nothing was changed. Try again shortly."},
                        status=503, headers={"Retry-After": "5"})
    if isinstance(exc, (OperationalError, InterfaceError)):
        return Response({"detail": "The database is unavailable; nothing was changed. Try again shortly."},
                        status=503, headers={"Retry-After": "5"})
    if isinstance(exc, exceptions.UnsupportedMediaType):
        sent = context["request"].content_type.split(";")[0] or "none"
        return Response({"detail": f"Send the body as JSON with 'Content-Type: application/json' (this request's "
                                   f"Content-Type is {sent!r}; curl -d without -H 'Content-Type: application/json' "
                                   f"sends a form)."}, status=status.HTTP_415_UNSUPPORTED_MEDIA_TYPE)
    response = exception_handler(exc, context)
    if isinstance(exc, exceptions.NotAuthenticated) and response is not None:
        response.data = {"detail": f"{exc.detail} {HOW}"}
    return response
