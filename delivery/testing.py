"""Test helpers for projects that publish with Herald: capture what Herald would deliver, as Django's
`mail.outbox` captures mail, and assert on it without workers, Redis or HTTP.

    from delivery.testing import capture_events

    def test_placing_an_order_announces_it(db):
        with capture_events() as outbox:
            place_order(...)
        assert [event.event_type for event in outbox] == ["order.created"]
        assert outbox[0].payload["total"] == "12.50"

With pytest, the `herald_outbox` fixture does the same for a whole test (installed with the package; in a project
that is not, add `pytest_plugins = ["delivery.pytest_plugin"]` to its conftest.py).

While capturing, publishing still writes messages and deliveries (so the code under test behaves as it will in
production) but asks for no pump and no fan-out job: nothing is sent and Redis is not needed.
"""

from contextlib import contextmanager
from dataclasses import dataclass, field

from delivery.engine.intake import publishing


@dataclass(frozen=True)
class CapturedEvent:
    """One published event, as it was published."""

    topic: str
    event_type: str
    subject: str
    payload: object
    attributes: dict = field(default_factory=dict)
    message_id: str = ""
    deliveries: int = 0  # how many subscriptions it was going to


class Outbox(list):
    """The captured events, in publish order; `of_type("order.created")` filters them."""

    def of_type(self, event_type: str) -> list[CapturedEvent]:
        return [event for event in self if event.event_type == event_type]


@contextmanager
def capture_events():
    outbox = Outbox()

    def observe(message, deliveries):
        outbox.append(CapturedEvent(
            topic=message.topic.name, event_type=message.event_type, subject=message.subject,
            payload=message.payload, attributes=dict(message.attributes), message_id=str(message.id),
            deliveries=deliveries))

    publishing.OBSERVERS.append(observe)
    quiet = publishing.capturing.set(True)
    try:
        yield outbox
    finally:
        publishing.OBSERVERS.remove(observe)
        publishing.capturing.reset(quiet)

