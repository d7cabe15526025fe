"""What the portal's tests share: Acme's portal link (Alice's shop, tests/delivery/web/api/shop.py), the headers
every portal answer carries, and the words a page shows once an action is done."""

import re
from urllib.parse import urlsplit

import pytest

from delivery.engine.accounts import tenancy
from subscriptions.models import Tenant

DONE = re.compile(r'<p class="notice" role="status" data-done>(.*?)</p>', re.S)


@pytest.fixture
def link(shop):
    return tenancy.portal_link(Tenant.objects.get(external_id="acme"))


def portal_headers(response) -> None:
    assert response["Cache-Control"] == "no-store", response.status_code
    assert "frame-ancestors" in response["Content-Security-Policy"]
    assert response["Referrer-Policy"] == "no-referrer"


def path_of(link: str) -> str:
    """`/portal/<token>/`: where the portal's redirects point (on the host the browser is on)."""
    return urlsplit(link).path


def words_shown(page) -> list[str]:
    """The notices saying what the last action did (none, or one)."""
    return DONE.findall(page.content.decode())
