"""docs/transformations.md's handlers, run: each JavaScript block runs in the sandbox on the event the text names
after it, and gives the body of the JSON block that follows (docs/transformations.md; tests/test_docs.py counts
the blocks run here)."""

import json
import re

import pytest

from delivery.transport import transforms
from tests.conftest import ROOT

DOC = (ROOT / "docs" / "transformations.md").read_text()
BLOCK = re.compile(r"```(javascript|json)\n(.*?)```", re.S)
EVENT = re.compile(r"On (?:the event )?`(\{.*?\})`(?: of type `([\w.]+)`)?", re.S)


def examples() -> list[tuple[str, dict, str, object]]:
    """(code, event, event type, body) for each handler the page shows with its result."""
    found, blocks = [], list(BLOCK.finditer(DOC))
    for block, after in zip(blocks, blocks[1:], strict=False):
        if block.group(1) == "javascript" and after.group(1) == "json":
            event = EVENT.search(DOC, block.end(), after.start())
            assert event, f"no event named between the handler at {block.start()} and its body"
            found.append((block.group(2), json.loads(event.group(1)), event.group(2) or "order.created",
                          json.loads(after.group(2))))
    return found


def test_the_page_shows_handlers_with_their_results():
    assert len(examples()) == 2


@pytest.mark.parametrize(("code", "event", "event_type", "body"), examples())
def test_each_handler_on_the_page_gives_the_body_shown(code, event, event_type, body):
    outcome = transforms.trial(code, transforms.webhook(event_type, event, url="https://hooks.example/"), now_ms=0)
    assert outcome.ok and not outcome.cancel and outcome.payload == body
