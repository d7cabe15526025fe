"""The `herald_outbox` pytest fixture (delivery/testing.py), registered for every project that installs Herald.

pytest loads plugins before Django is set up, so this module imports nothing of Herald's at its top; the fixture
imports the outbox when a test asks for it (the one import inside a function in Herald, allowed by
tests/test_structure.py for this reason)."""

import pytest


@pytest.fixture
def herald_outbox():
    """The events published during the test, in order (see `delivery.testing.capture_events`)."""
    from delivery.testing import capture_events

    with capture_events() as outbox:
        yield outbox
