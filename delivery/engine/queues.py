"""Putting work on the RQ queues: batches of delivery ids, after the transaction commits."""

import logging
import uuid

import django_rq
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from delivery.engine import jobs, transitions
from delivery.engine.wakeup import wake_dispatcher
from delivery.models import Delivery
from delivery.rules.vocabulary import AttemptQueue

log = logging.getLogger(__name__)
DELIVERIES, RETRIES = AttemptQueue.DELIVERIES, AttemptQueue.RETRIES


def chunks(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start:start + size]


def assign_jobs(delivery_ids: list[int], queue_name: str) -> list[tuple[str, list[int]]]:
    """Split ids into batches, each with a fresh job id, and remember the job id on the rows."""
    batches = [(uuid.uuid4().hex, batch) for batch in chunks(delivery_ids, settings.HERALD_BATCH_SIZE)]
    now = timezone.now()
    for job_id, batch in batches:
        Delivery.objects.filter(id__in=batch).update(**transitions.enqueued(job_id, now=now))
    return batches


def push(batches: list[tuple[str, list[int]]], queue_name: str, label: str | None = None) -> None:
    """Enqueue now. A Redis failure is logged, not raised: the reconciler re-enqueues work that has no job.
    `label` is what the attempts record as their queue (e.g. `manual`); it defaults to the queue's name."""
    queue = django_rq.get_queue(queue_name)
    try:
        with queue.connection.pipeline() as pipe:
            prepared = [
                queue.prepare_data(jobs.deliver, args=(ids, str(label or queue_name)), job_id=job_id,
                                   timeout=settings.HERALD_JOB_TIMEOUT_SECONDS, result_ttl=0, failure_ttl=86400)
                for job_id, ids in batches
            ]
            queue.enqueue_many(prepared, pipeline=pipe)
            pipe.execute()
    except Exception:  # Redis down or flushed mid-way: nothing is lost, the rows stay pending and due
        log.exception("could not enqueue %d delivery batches on %s; the reconciler will retry", len(batches),
                      queue_name)


def backlogged(queue_name: str) -> bool:
    """Is the queue already long? Then new work is better batched by the dispatcher than queued one job each."""
    try:
        return django_rq.get_queue(queue_name).count >= settings.HERALD_DIRECT_ENQUEUE_BACKLOG
    except Exception:  # Redis unreachable: leave the rows to the dispatcher and the reconciler
        return True


def enqueue_after_commit(delivery_ids: list[int], queue_name: str, *, batch_under_backlog: bool = False,
                         label: str | None = None) -> None:
    """Call inside the transaction that made the rows due; the jobs go out once it commits.

    With `batch_under_backlog` (publishing), rows are left to the dispatcher while the queue is long: it gathers
    them into full batches, which is what lets a worker approach the HTTP client's ceiling under load. When the
    queue is short they are queued at once, for the lowest latency.
    """
    if not delivery_ids:
        return
    if batch_under_backlog and backlogged(queue_name):
        transaction.on_commit(wake_dispatcher)
        return
    batches = assign_jobs(delivery_ids, queue_name)
    transaction.on_commit(lambda: push(batches, queue_name, label))
