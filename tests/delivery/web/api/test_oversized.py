"""Oversized request bodies (delivery/web/api/oversized.py): a body declared over DATA_UPLOAD_MAX_MEMORY_SIZE is
answered 413 as JSON before any view runs, after the rest of it is read and dropped (so the client reads the answer),
but not past the drain bound; a body within the limit, or a request declaring no usable length, goes on."""

import io

import pytest
from django.test import RequestFactory

from delivery.web.api import oversized
from delivery.web.api.oversized import OversizedBodyMiddleware
from subscriptions.models import Topic

pytestmark = pytest.mark.django_db


def middleware_answer(length, *, declared=None):
    """(the answer's status and body, or "view" if the request went on; how much of the body was read)."""
    request = RequestFactory().post("/api/topics/", content_type="application/json")
    stream = io.BytesIO(b"x" * length)  # tell(): how much of it was read
    request.META["wsgi.input"] = stream
    request.META["CONTENT_LENGTH"] = str(length) if declared is None else declared
    answer = OversizedBodyMiddleware(lambda request: "view")(request)
    if answer == "view":
        return "view", stream.tell()
    return (answer.status_code, answer.content), stream.tell()


def test_a_body_over_the_limit_is_a_json_413_and_nothing_is_made(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = b'{"name": "' + b"o" * 1000 + b'"}'
    answer = api.generic("POST", "/api/topics/", body, content_type="application/json")
    assert (answer.status_code, answer["Content-Type"], answer.json()) == (
        413, "application/json", {"detail": "The request body is larger than 1000 bytes."})
    assert not Topic.objects.exists()
    assert api.post("/api/topics/", {"name": "orders"}, format="json").status_code == 201


def test_the_rest_of_an_oversized_body_is_read_and_dropped_up_to_the_drain_bound(settings, monkeypatch):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    monkeypatch.setattr(oversized, "DRAIN_LIMIT_BYTES", 300_000)
    monkeypatch.setattr(oversized, "CHUNK", 1000)
    refused = (413, b'{"detail": "The request body is larger than 100 bytes."}')
    assert middleware_answer(250_000) == (refused, 250_000)  # drained, in chunks, to its end
    assert middleware_answer(300_001) == (refused, 0)  # past the bound: answered at once, nothing read


def test_a_body_within_the_limit_or_without_a_usable_length_goes_on(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    assert middleware_answer(100) == ("view", 0)
    assert middleware_answer(500, declared="") == ("view", 0)
    assert middleware_answer(500, declared="many") == ("view", 0)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None  # no limit set
    assert middleware_answer(500) == ("view", 0)


def test_a_stream_shorter_than_it_declared_ends_the_drain(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    refused = (413, b'{"detail": "The request body is larger than 100 bytes."}')
    assert middleware_answer(150, declared="5000") == (refused, 150)
