"""plumbing/heartbeat: a process's own heartbeat file, read by `manage.py herald_alive`."""

import os
import time

from delivery import heartbeat


def test_a_process_is_alive_while_it_beats(tmp_path, settings):
    settings.HERALD_HEARTBEAT_DIR = str(tmp_path)
    assert heartbeat.alive("worker", 60) == (False, f"no worker process has beaten in {tmp_path}")
    heartbeat.beat("worker")
    assert heartbeat.alive("worker", 60)[0] is True
    assert heartbeat.alive("worker", 60, now=time.time() + 120) == (
        False, f"worker {os.getpid()} (120 s ago) beat longer than 60 s ago")


def test_the_file_of_a_process_that_is_gone_is_removed(tmp_path, settings):
    settings.HERALD_HEARTBEAT_DIR = str(tmp_path)
    gone = tmp_path / "worker-999999999.beat"
    gone.touch()
    assert heartbeat.alive("worker", 60)[0] is False
    assert not gone.exists()
