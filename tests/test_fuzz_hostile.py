"""Hostile bodies for every write operation of the OpenAPI schema: NUL characters, lone surrogates, numbers past
a double's range, nesting deeper than Python recurses, wrong types for every field. None may answer 5xx.

Schemathesis (test_fuzz_api.py) generates from the schema, positive and negative; its strings are valid Unicode
and its documents shallow, so it never produces what broke Herald before. This test does, on purpose."""

import json
import os

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.models import Delivery
from tests.conftest import client_for

HUGE, DEEP = "\u2603HUGE\u2603", "\u2603DEEP\u2603"
EXAMPLES = int(os.environ.get("HERALD_FUZZ_EXAMPLES") or 30)

text = st.one_of(st.text(max_size=12), st.sampled_from(["\x00", "a\x00b", "\ud800", "x\udfff", "", "workfront",
                                                        "linear", "application/json", "order.created", HUGE, DEEP]))
leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False,
                 allow_infinity=False), text)
values = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
                      max_leaves=10)


def raw_json(document) -> bytes:
    """JSON text with the markers turned into what json.dumps cannot write: 1e400 and 5,000 levels of nesting."""
    encoded = json.dumps(document, ensure_ascii=True)
    marker = lambda s: json.dumps(s, ensure_ascii=True)  # noqa: E731
    encoded = encoded.replace(marker(HUGE), "1e400").replace(marker(DEEP), "[" * 5000 + "]" * 5000)
    return encoded.encode()


def operations() -> list[tuple[str, str, list[str]]]:
    """(method, path, field names) of every JSON write operation, read from the schema the API serves."""

    schema = json.loads(Client(HTTP_HOST="localhost").get("/api/schema/?format=json").content)
    found = []
    for path, ops in schema["paths"].items():
        for method, operation in ops.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if method in ("post", "patch", "put"):
                name = body["$ref"].rsplit("/", 1)[1] if body else None
                fields = list(schema["components"]["schemas"][name]["properties"]) if name else []
                found.append((method, path, fields))
    return found


OPERATIONS = operations()


@pytest.fixture
def owned(db, user, redis_conn):
    """One object of each kind, the user's own, so every `{id}` in a path names something."""
    api = client_for(user)
    topic = api.post("/api/topics/", {"name": "fuzz"}, format="json").json()
    subscription = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "http://127.0.0.1:9/h"},
                            format="json").json()
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    ids = {"topics": topic["id"], "subscriptions": subscription["id"], "deliveries": Delivery.objects.get().id,
           "endpoints": subscription["endpoint_id"]}
    return api, ids


@pytest.mark.django_db
@pytest.mark.parametrize("method,path,fields", OPERATIONS, ids=[f"{m.upper()} {p}" for m, p, _ in OPERATIONS])
@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hostile_bodies_never_answer_5xx(owned, method, path, fields, data):
    api, ids = owned
    url = path.replace("{id}", str(ids.get(path.split("/")[2])))
    chosen = data.draw(st.lists(st.sampled_from(fields + ["unexpected"]), unique=True, max_size=len(fields) + 1)
                       if fields else st.just([]))
    body = {name: data.draw(values) for name in chosen}
    response = api.generic(method.upper(), url, raw_json(body), content_type="application/json")
    assert response.status_code < 500, (method, url, body, response.content[:500])
