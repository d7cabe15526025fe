"""Signatures and the wire format, checked against the independent standardwebhooks package."""

import json
from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook

from delivery.rules import signing, wire

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SECOND = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk="
T = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def envelope(**changes):
    base = dict(message_id="msg_1", topic_name="orders", event_type="order.created", subject="orders/1",
                published_at=T, payload={"n": 1}, payload_is_text=False, subscription_id=7,
                url="http://127.0.0.1/hook", raw=False, secrets=(SECRET,), user_agent="Herald/test")
    base.update(changes)
    return wire.Envelope(**base)


def test_signature_verifies_with_standardwebhooks():
    request = wire.build_request(envelope(), attempt_number=3, now=T)
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert signing.verify(SECRET, "msg_1", int(T.timestamp()), request.body, headers["webhook-signature"])


def test_structured_cloudevent_body():
    request = wire.build_request(envelope(), attempt_number=3, now=T)
    assert json.loads(request.body) == {
        "specversion": "1.0", "id": "msg_1", "source": "/topics/orders", "type": "order.created",
        "subject": "orders/1", "time": "2026-03-04T05:06:07Z", "datacontenttype": "application/json",
        "data": {"n": 1},
    }
    assert request.headers["herald-attempt"] == "3"
    assert request.headers["herald-subscription"] == "7"
    assert request.headers["webhook-id"] == "msg_1"
    assert request.headers["webhook-timestamp"] == str(int(T.timestamp()))


def test_rotation_sends_both_signatures_and_either_secret_verifies():
    request = wire.build_request(envelope(secrets=(SECOND, SECRET)), attempt_number=1, now=T)
    header = request.headers["webhook-signature"]
    assert len(header.split(" ")) == 2
    for secret in (SECRET, SECOND):
        assert signing.verify(secret, "msg_1", int(T.timestamp()), request.body, header)
    assert not signing.verify("whsec_" + "A" * 44, "msg_1", int(T.timestamp()), request.body, header)


def test_raw_text_payload_and_percent_encoded_ce_headers():
    request = wire.build_request(envelope(raw=True, payload="héllo", payload_is_text=True, subject="a b%"),
                                 attempt_number=1, now=T)
    assert request.body == "héllo".encode()
    assert request.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert request.headers["ce-subject"] == "a%20b%25"
    assert request.headers["ce-time"] == "2026-03-04T05:06:07Z"


def test_raw_delivery_uses_the_request_policy_content_type():
    request = wire.build_request(envelope(raw=True, content_type="text/xml"), attempt_number=1, now=T)
    assert request.headers["Content-Type"] == "text/xml"
    assert request.body == b'{"n":1}'


def test_signature_matches_the_standardwebhooks_reference():
    request = wire.build_request(envelope(), attempt_number=1, now=T)
    reference = Webhook(SECRET).sign("msg_1", T, request.body.decode())
    assert request.headers["webhook-signature"] == reference
