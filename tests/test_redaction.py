"""delivery/redaction.py and the JSON log format: every shape of credential Herald knows, in the forms a log line
can carry it (encoded, escaped, glued to another word)."""

import json
import logging
import sys

import pytest

from delivery import redaction
from delivery.logformat import JSONFormatter
from delivery.redaction import RedactingRecord, redact

TOKEN64 = "a" * 64


@pytest.mark.parametrize("text, secret", [
    ("Not Found: /portal/WzEsMCwx:1x:abc/endpoints/3/", "WzEsMCwx:1x:abc"),
    ('"GET /portal%2FWzEsMCwx:1x:abc/ HTTP/1.1" 404', "WzEsMCwx:1x:abc"),
    ('"GET /%70ortal/WzEsMCwx:1x:abc/ HTTP/1.1" 404', "WzEsMCwx:1x:abc"),
    ("key%3Dhtk_AbC-dEf_123456", "AbC-dEf_123456"),
    ("x_htk_AbC-dEf_123456", "AbC-dEf_123456"),
    ("whsec_MTIzNDU2Nzg5MDEyMzQ1Njc4OTA=", "MTIzNDU2Nzg5MDEyMzQ1Njc4OTA="),
    ("Authorization: Bearer eyJhbGciOi.abc.def", "eyJhbGciOi.abc.def"),
    ('Authorization: Bearer "abc,def"', "abc,def"),
    ("authorization: token " + "b" * 40, "b" * 40),
    ("confirm?token%3D" + TOKEN64, TOKEN64),
    ("line\n" + TOKEN64, TOKEN64),
    ('{"access_token": "SECRET1abc"}', "SECRET1abc"),
    ("access_token=ab,cd;ef&x=1", "ab,cd;ef"),
    ('password="SECRET3"', "SECRET3"),
    ("https://user:pa55word@hooks.example/x", "pa55word"),
    ("redis://:pa55word@redis.internal:6379/0", "pa55word"),
])
def test_a_credential_is_redacted_in_every_form(text, secret):
    assert secret not in redact(text) and "[redacted]" in redact(text)


def test_ordinary_text_is_left_alone():
    for text in ("GET /api/topics/orders%20eu/ 200", "a token bucket refilled", "Token expired", "sha 1234",
                 "basic auth failed", "a Bearer token is required", "templates/herald/portal/base.html"):
        assert redact(text) == text


def test_the_json_format_redacts_before_it_escapes():
    record = RedactingRecord("t", logging.ERROR, __file__, 1, "failed %s", ("now",), None)
    try:
        raise ValueError('x {"access_token": "SECRET1abc"}\nhtk_SECRET2 password="SECRET3"')
    except ValueError:
        record.exc_info = sys.exc_info()
    record.herald = {"resp": '{"token": "SECRET4"}', "n": 3}
    line = JSONFormatter().format(record)
    assert json.loads(line)["n"] == 3 and json.loads(line)["message"] == "failed now"
    assert [secret for secret in ("SECRET1abc", "SECRET2", "SECRET3", "SECRET4") if secret in line] == []


def test_a_record_class_of_another_library_is_redacted_too():
    class Theirs(logging.LogRecord):
        pass

    previous = logging.getLogRecordFactory()
    logging.setLogRecordFactory(Theirs)
    try:
        redaction.install()
        record = logging.getLogger("theirs").makeRecord("theirs", logging.INFO, __file__, 1, "key %s",
                                                        ("htk_AbCdEf123",), None)
    finally:
        logging.setLogRecordFactory(previous)
    assert isinstance(record, Theirs) and record.getMessage() == "key htk_[redacted]"
