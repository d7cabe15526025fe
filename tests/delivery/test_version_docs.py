"""docs/versions.md's down-converter, run: registered as the second version of customer.created, it brings the
page's 2026-06-01 payload down to 2026-01-01 and gives the payload the page shows (tests/test_docs.py counts the
blocks run here)."""

import json
import re

import pytest

from delivery.engine.accounts.event_types import event_type_create, event_version_create
from delivery.rules import event_versions
from delivery.transport import transforms
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db
DOC = (ROOT / "docs" / "versions.md").read_text()


def test_the_pages_down_converter_gives_the_payload_shown(user):
    code = re.search(r"```javascript\n(.*?)```", DOC, re.S).group(1)
    before = json.loads(re.search(r"A payload of `2026-06-01`, `(\{.*?\})`", DOC, re.S).group(1))
    after = json.loads(re.search(r"```json\n(.*?)```", DOC, re.S).group(1))
    customer = event_type_create(owner=user, name="customer.created")
    event_version_create(event_type=customer, name="2026-01-01")
    event_version_create(event_type=customer, name="2026-06-01", down_converter=code)
    versions = [event_versions.Version(v.name, v.down_converter) for v in customer.versions.all()]
    steps = event_versions.down_steps(versions, "2026-06-01", event_versions.received(["2026-01-01", "2026-06-01"],
                                                                                     "2026-01-01"))
    outcome = transforms.run_steps(steps, "customer.created", before)
    assert outcome.ok and outcome.payload == after
