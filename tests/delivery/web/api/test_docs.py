"""The OpenAPI schema and its pages are served."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_openapi_schema_and_docs_are_served(api):
    schema = api.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/topics/{id}/publish/" in schema.content
    assert api.get("/api/docs/").status_code == 200
