"""The sandbox's own process: what V8 can stop only by ending its process ends the child, never the process that
asked; a built-in that runs past the time limit is killed at the deadline; memory outside the isolate's heap is
bounded; the next call gets a new child."""

import os

import pytest

from delivery.transport import transforms
from delivery.transport.sandbox_host import SandboxProcess


@pytest.fixture
def process():
    process = SandboxProcess()
    yield process
    process.close()


def run(process, code):
    return transforms.call(process, (("", code),), "order.created", {"id": 1}, url="https://hooks.example/")


def test_a_fatal_error_of_v8_ends_the_child_only(process):
    assert run(process, "function handler(w) { return w; }").ok
    first = process.child.pid
    crashed = run(process, 'function handler(w) { "x".repeat(2 ** 28).split(""); return w; }')
    assert "ended the sandbox's process" in crashed.error and os.getpid()  # this process goes on
    again = run(process, "function handler(w) { w.payload = 2; return w; }")
    assert again.ok and again.payload == 2 and process.child.pid != first


def test_a_built_in_past_the_time_limit_is_killed_at_the_deadline(process, settings):
    settings.HERALD_TRANSFORM_TIMEOUT_MS = 50
    assert run(process, "function handler(w) { return w; }").ok  # started
    slow = run(process, 'function handler(w) { "\\u00e9".repeat(2 ** 26).normalize("NFD"); return w; }')
    assert slow.error == "timed out after 50 ms"  # (seconds of work for V8 alone: ended by V8 or by the deadline)
    assert run(process, "function handler(w) { return w; }").ok
    first = process.child.pid
    late = process.call({"op": "run", "steps": [["", "function handler(w) { return w; }"]], "event_type": "x",
                         "payload": 1, "now_ms": 0}, transforms.limits(), 0.0)  # an answer due at once: past it
    assert late.error == "timed out after 50 ms" and process.child is None  # the child killed at the deadline
    assert run(process, "function handler(w) { return w; }").ok and process.child.pid != first


def test_memory_outside_the_heap_is_bounded(process):
    huge = run(process, "function handler(w) { new Uint8Array(2 ** 32).fill(7); return w; }")
    assert not huge.ok and ("Array buffer allocation failed" in huge.error or "ended the sandbox" in huge.error)
    assert run(process, "function handler(w) { return w; }").ok


def test_what_one_share_leaves_outside_the_heap_is_not_counted_against_the_next(process, settings):
    settings.HERALD_TRANSFORM_TIMEOUT_MS = 5000  # (filling 448 MB takes its time)
    hog = ("function handler(w) { let kept = []; for (let i = 0; i < 14; i++) kept.push(new Uint8Array(2 ** 25)"
           ".fill(1)); kept = null; return w; }")
    for _ in range(2):
        assert transforms.call(process, (("", hog),), "x", 1, share=(1, 0)).ok
    ordinary = 'function handler(w) { w.payload = "ab".repeat(1e6).split("").length; return w; }'
    assert transforms.call(process, (("", ordinary),), "x", 1, share=(2, 0)).payload == 2_000_000


def test_the_child_has_a_fixed_locale_and_time_zone_whatever_the_hosts(process, monkeypatch):
    monkeypatch.setenv("LC_ALL", "fr_FR.UTF-8")
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    shown = run(process, "function handler(w) { w.payload = [(1234.5).toLocaleString('en'), "
                         "new Date(0).getHours()]; return w; }")
    assert shown.payload == ["1,234.5", 0]
