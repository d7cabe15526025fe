"""Purging old attempts, finished deliveries and messages past their topic's retention, in small batches (short
locks only).

On PostgreSQL each batch is one statement: a DELETE of at most BATCH rows chosen by an index read, with what
depends on them (a delivery's attempts) in the same statement. The ORM's delete read every row it deleted, and its
dependants, into Python first, and sent a signal per row: a day of steady traffic made retention one of the
scheduler's largest costs. Nothing of Herald's listens for these models' delete signals; a host project that
does sees none from retention (the admin and the services still delete through the ORM). Elsewhere (SQLite, for
local runs) the ORM deletes, a batch at a time.
"""

from datetime import timedelta

from django.db import connection

from delivery.conf import herald
from delivery.engine.plumbing import clock
from delivery.models import Attempt, Delivery, Exchange, Message
from delivery.rules.vocabulary import TERMINAL
from subscriptions.models import Topic

BATCH = 1000


def purge(now=None) -> dict:
    """Attempts past HERALD_ATTEMPT_RETENTION_DAYS; finished deliveries and messages past their topic's retention
    (`Topic.message_retention_days`, else HERALD_MESSAGE_RETENTION_DAYS). A message is kept while any of its
    deliveries is unfinished. One pass per distinct retention, so the cost follows the rows purged."""
    now = now or clock.now()
    purging = _purge_statements if connection.vendor == "postgresql" else _purge_through_the_orm
    return purging(now)


def _retentions(now):
    """(a topic's message_retention_days, None for the default; the cutoff it makes) per distinct retention."""
    for days in Topic.objects.values_list("message_retention_days", flat=True).distinct():
        yield days or None, now - timedelta(days=days or herald.MESSAGE_RETENTION_DAYS)


# --- PostgreSQL: a statement per batch ----------------------------------------------------------------------------

def _batches(sql: str, params: dict) -> int:
    """Run `sql` (a DELETE of at most %(batch)s rows) until a run deletes fewer; how many it deleted in all. Each
    run is a transaction of its own (outside the caller's, as the scheduler calls it): locks held one batch long."""
    total = 0
    with connection.cursor() as cursor:
        while True:
            cursor.execute(sql, {**params, "batch": BATCH})
            total += cursor.rowcount
            if cursor.rowcount < BATCH:
                return total


def _purge_statements(now) -> dict:
    attempt, delivery, message, exchange, topic = (model._meta.db_table for model in (
        Attempt, Delivery, Message, Exchange, Topic))
    attempts = _batches(
        f"DELETE FROM {attempt} WHERE id IN (SELECT id FROM {attempt} WHERE started_at < %(cutoff)s "
        f"LIMIT %(batch)s)", {"cutoff": now - timedelta(days=herald.ATTEMPT_RETENTION_DAYS)})
    deliveries = messages = 0
    for days, cutoff in _retentions(now):
        kept = "t.message_retention_days IS NULL" if days is None else "t.message_retention_days = %(days)s"
        params = {"cutoff": cutoff, "days": days, "terminal": list(TERMINAL)}
        deliveries += _batches(
            f"""WITH chosen AS (
                    SELECT d.id FROM {delivery} d JOIN {message} m ON m.id = d.message_id
                    JOIN {topic} t ON t.id = m.topic_id
                    WHERE d.status = ANY(%(terminal)s) AND d.finished_at < %(cutoff)s AND {kept} LIMIT %(batch)s),
                gone AS (DELETE FROM {attempt} WHERE delivery_id IN (SELECT id FROM chosen))
                DELETE FROM {delivery} WHERE id IN (SELECT id FROM chosen)""", params)
        messages += _batches(
            f"""DELETE FROM {message} WHERE id IN (
                    SELECT m.id FROM {message} m JOIN {topic} t ON t.id = m.topic_id
                    WHERE {kept} AND m.published_at < %(cutoff)s
                      AND NOT EXISTS (SELECT 1 FROM {delivery} d WHERE d.message_id = m.id) LIMIT %(batch)s)""",
            params)
    # A batch's exchange goes with the last of its attempts (attempts and deliveries are purged in ranges).
    exchanges = _batches(
        f"""DELETE FROM {exchange} WHERE id IN (
                SELECT e.id FROM {exchange} e
                WHERE NOT EXISTS (SELECT 1 FROM {attempt} a WHERE a.exchange_id = e.id) LIMIT %(batch)s)""", {})
    return {"attempts": attempts, "deliveries": deliveries, "messages": messages, "exchanges": exchanges}


# --- elsewhere: the ORM, a batch at a time ------------------------------------------------------------------------

def _in_batches(queryset) -> int:
    total = 0
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:BATCH])
        if not ids:
            return total
        queryset.model.objects.filter(pk__in=ids).delete()
        total += len(ids)


def _purge_through_the_orm(now) -> dict:
    attempts = _in_batches(Attempt.objects.filter(
        started_at__lt=now - timedelta(days=herald.ATTEMPT_RETENTION_DAYS)))
    deliveries = messages = 0
    for days, cutoff in _retentions(now):
        topics = Topic.objects.filter(message_retention_days=days) if days else Topic.objects.filter(
            message_retention_days__isnull=True)
        deliveries += _in_batches(Delivery.objects.filter(
            status__in=TERMINAL, finished_at__lt=cutoff, message__topic__in=topics))
        messages += _in_batches(Message.objects.filter(
            topic__in=topics, published_at__lt=cutoff, deliveries__isnull=True))
    exchanges = _in_batches(Exchange.objects.filter(attempts__isnull=True))
    return {"attempts": attempts, "deliveries": deliveries, "messages": messages, "exchanges": exchanges}
