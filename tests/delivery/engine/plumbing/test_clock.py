"""The engine's clock is the database's: a host whose clock is off by seconds still schedules by PostgreSQL's."""

from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from delivery.engine.plumbing import clock

pytestmark = pytest.mark.django_db(transaction=True)


def database_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


@pytest.fixture
def fresh_clock(monkeypatch):
    monkeypatch.setattr(clock, "_next_measure", 0.0)
    monkeypatch.setattr(clock, "_offset", timedelta(0))
    yield
    clock._next_measure = 0.0


@pytest.mark.parametrize("skew", [-4.0, 3.0])
def test_a_skewed_host_schedules_by_the_database_clock(fresh_clock, monkeypatch, skew):
    real_time, real_now = clock.time.time, timezone.now
    monkeypatch.setattr(clock.time, "time", lambda: real_time() + skew)  # this host's clock, off by `skew`
    monkeypatch.setattr(clock.timezone, "now", lambda: real_now() + timedelta(seconds=skew))
    before = database_now()
    measured = clock.now()
    after = database_now()
    assert before - timedelta(milliseconds=50) <= measured <= after + timedelta(milliseconds=50)
    assert abs(clock.offset().total_seconds() + skew) < 0.05


def test_the_last_offset_is_kept_while_the_database_is_away(fresh_clock, monkeypatch):
    clock.now()
    monkeypatch.setattr(clock, "_offset", timedelta(seconds=2))  # as last measured
    monkeypatch.setattr(clock, "_next_measure", 0.0)  # due for a measurement, which fails

    class Away:
        vendor = "postgresql"

        def cursor(self):
            raise OperationalError("connection refused")

    monkeypatch.setattr(clock, "connection", Away())
    assert abs((clock.now() - timezone.now()).total_seconds() - 2) < 0.05
    assert clock._next_measure - clock.time.monotonic() <= clock.RETRY_SECONDS  # and measures again soon
