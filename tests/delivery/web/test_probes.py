"""web/probes: readiness says what is missing without a log line per call (a probe asks every few seconds)."""

import logging

import pytest
from django.test import Client

from delivery.engine.plumbing import availability
from delivery.web import probes


@pytest.mark.django_db
def test_an_unready_answer_names_what_is_missing_and_logs_nothing_per_call(monkeypatch, caplog):
    monkeypatch.setattr(probes.availability, "unreachable", lambda: [availability.REDIS])
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            answer = Client().get("/readyz", HTTP_HOST="10.1.2.3")
            assert answer.status_code == 503 and answer.json()["missing"] == ["Redis does not answer"]
    assert [record for record in caplog.records if record.name == "django.request"] == []


@pytest.mark.django_db
def test_healthz_answers_whatever_the_host(client):
    assert Client().get("/healthz", HTTP_HOST="10.1.2.3:8000").json()["status"] == "ok"
