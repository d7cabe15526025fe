"""The API's JSON parser (delivery/web/api/parsers.py): what PostgreSQL could not store, or Python could not read
safely, is a 400 naming where it is, never a 500; JSON's non-numbers are refused; a body past the limit is a 413
even without a Content-Length."""

import io

import pytest
from rest_framework.exceptions import ParseError

from delivery.models import Message
from delivery.web.api.parsers import BodyTooLarge, SafeJSONParser, problems_by_field
from tests.delivery.web.api.calls import create_topic

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


@pytest.fixture
def publish_raw(api):
    url = f"/api/topics/{create_topic(api)['id']}/publish/"

    def post(body: bytes):
        answer = api.generic("POST", url, body, content_type="application/json")
        return answer.status_code, answer.json()

    return post


@pytest.mark.parametrize("body,answer", [
    (b'{"payload": {"text": "a\\u0000b"}}',
     {"payload": ["payload.text: contains a NUL character (\\u0000), which cannot be stored"]}),
    (b'{"payload": "\\ud800"}',
     {"payload": ["payload: contains a lone surrogate (e.g. \\ud800), which is not valid Unicode"]}),
    (b'{"payload": [1, -1e400], "attributes": {"n": 1e400}}',
     {"payload": ["payload[1]: must be a finite number"], "attributes": ["attributes.n: must be a finite number"]}),
])
def test_what_could_not_be_stored_is_named_by_its_path_under_its_field(publish_raw, body, answer):
    assert publish_raw(body) == (400, answer)
    assert Message.objects.count() == 0


@pytest.mark.parametrize("body,detail", [
    (b'{"payload": NaN}', "JSON parse error - NaN is not valid JSON"),
    (b'{"payload": Infinity}', "JSON parse error - Infinity is not valid JSON"),
    (b'{"payload": -Infinity}', "JSON parse error - -Infinity is not valid JSON"),
    (b'{"payload": ', "JSON parse error - Expecting value: line 1 column 13 (char 12)"),
    (b'\xff{}', "JSON parse error - 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
    (b'{"payload": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "JSON parse error - the document is nested too deeply"),
])
def test_what_is_not_json_or_too_deep_to_read_is_a_parse_error(publish_raw, body, detail):
    assert publish_raw(body) == (400, {"detail": detail})
    assert Message.objects.count() == 0


def test_a_body_within_the_rules_is_read_as_json(publish_raw):
    status, answer = publish_raw(b'{"payload": {"deep": [[[1.5, "\\u00e9"]]]}}')
    assert status == 202
    assert Message.objects.get(id=answer["message_id"]).payload == {"deep": [[[1.5, "é"]]]}


def test_problems_are_grouped_by_their_top_level_field():
    assert problems_by_field([("payload.a[0]", "first"), ("attributes.k", "second"), ("payload", "third"),
                              ("", "whole")]) == {
        "payload": ["payload.a[0]: first", "payload: third"], "attributes": ["attributes.k: second"],
        "non_field_errors": [": whole"]}


def test_a_stream_past_the_limit_is_too_large_whatever_it_declared(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 16
    parser = SafeJSONParser()
    assert parser.parse(io.BytesIO(b'{"a": [1, 2, 3]}'), parser_context={}) == {"a": [1, 2, 3]}  # 16 bytes
    with pytest.raises(BodyTooLarge) as refused:
        parser.parse(io.BytesIO(b'{"a": [1, 2, 3, 4]}'), parser_context={})
    assert (refused.value.status_code, str(refused.value.detail)) == (413, "The request body is larger than 16 bytes.")
    with pytest.raises(ParseError):
        parser.parse(None, parser_context={})  # no body at all: not JSON
