"""The collector in Herald's long-lived processes (delivery/heap.py): the heap start-up built is frozen, the young
generation collected less often, in the worker and in each web worker."""

import subprocess
import sys

import pytest
from django_rq import get_queue

from delivery import heap
from delivery.engine.sending import worker as worker_module
from delivery.engine.sending.worker import HeraldWorker

# Each in a process of its own: the test process's collector is left as it is.
SETTLED = """
import gc
{start}
before = gc.get_freeze_count()
{settle}
print(before, gc.get_freeze_count(), gc.get_threshold()[0])
"""


def frozen_and_young(start: str, settle: str) -> tuple[int, int, int]:
    code = SETTLED.format(start=start, settle=settle)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    before, after, young = map(int, out.split()[-3:])
    return before, after, young


def test_settling_freezes_what_start_up_built_and_collects_the_young_less_often():
    before, after, young = frozen_and_young("from delivery import heap", "heap.settle()")
    assert before == 0 and after > 1_000  # every object there is, frozen
    assert young == heap.YOUNG_GENERATION > 700


def test_each_web_worker_starts_frozen_and_collects_less_often():
    """gunicorn's hooks as it calls them: pre_fork in the master (whose frozen heap the fork inherits), post_fork
    in each web worker."""
    before, after, young = frozen_and_young("import project.gunicorn as config",
                                            "config.pre_fork(None, None); config.post_fork(None, None)")
    assert before == 0 and after > 10_000
    assert young == heap.YOUNG_GENERATION


def test_the_web_master_imports_the_urlconf_its_workers_would_import_on_their_first_request():
    """Imported before the fork (and frozen with the rest), not in each worker while requests queue behind it."""
    code = ("import sys; import project.gunicorn; "
            "print('project.urls' in sys.modules, 'delivery.web.api.publishing' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[-2:] == ["True", "True"]


def test_a_threshold_set_by_someone_else_is_left_alone():
    _, _, young = frozen_and_young("import gc; gc.set_threshold(1234); from delivery import heap", "heap.settle()")
    assert young == 1234


@pytest.mark.django_db(transaction=True)
def test_the_worker_settles_its_heap_before_its_first_job(redis_conn, monkeypatch):
    settled = []
    monkeypatch.setattr(worker_module.heap, "settle", lambda: settled.append(True))
    HeraldWorker([get_queue("deliveries")], connection=redis_conn).work(burst=True)
    assert settled == [True]
