"""The transformations' sandbox: each limit, what a handler may not do (I/O, a clock, randomness, state kept between
calls, changing the intrinsics), the errors with their lines, and code fed at random that never raises out of it."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.transport.sandbox import Limits, Sandbox, check

WEBHOOK = {"eventType": "order.created", "payload": {"id": 7}, "method": "POST", "url": "https://shop.example/hooks",
           "cancel": False}
PUBLISHED_MS = 1_764_288_000_000  # 2025-11-28T00:00:00Z


@pytest.fixture(scope="module")
def sandbox():
    sandbox = Sandbox(Limits())
    yield sandbox
    sandbox.discard()


def run(sandbox, code, webhook=WEBHOOK):
    return sandbox.run(code, webhook, now_ms=PUBLISHED_MS)


def test_a_handler_reads_the_url_and_may_give_it_back(sandbox):
    assert run(sandbox, "function handler(w) { w.payload = w.url; w.url = w.url; return w; }").payload == WEBHOOK["url"]


def test_a_handler_changes_the_payload_the_method_or_cancels(sandbox):
    changed = run(sandbox, "function handler(w) { w.payload = {text: `order ${w.payload.id}`}; w.method = 'PUT'; "
                           "return w; }")
    assert changed.ok and changed.payload == {"text": "order 7"} and changed.method == "PUT" and not changed.cancel
    assert run(sandbox, "function handler(w) { w.cancel = true; return w; }").cancel


@pytest.mark.parametrize(("code", "error"), [
    ("function handler(w) { w.method = 'GET'; return w; }", "method must be one of POST, PUT, not 'GET'"),
    ("function handler(w) { w.cancel = 'yes'; return w; }", "cancel must be true or false"),
    ("function handler(w) { delete w.payload; return w; }", "the webhook returned has no payload"),
    ("async function handler(w) { return w; }", "returned a Promise"),
    ("function handler(w) { return 3; }", "must return the webhook"),
    ("function handler(w) { w.url = 'https://elsewhere.example/'; return w; }", "cannot change the URL"),
    ("const x = 1;", "the code defines no function handler(webhook)"),
    ("function handler(w) { w.payload = 10n; return w; }", "BigInt"),
])
def test_what_cannot_be_sent_is_a_reason(sandbox, code, error):
    outcome = run(sandbox, code)
    assert not outcome.ok and error in outcome.error
    assert outcome.reason().startswith("transformation_failed: ")


def test_errors_name_the_line_of_the_code(sandbox):
    thrown = run(sandbox, "function handler(w) {\n  const a = w.payload;\n  return a.b.c;\n}")
    assert thrown.line == 3 and thrown.error.startswith("TypeError: Cannot read properties of undefined")
    assert thrown.reason() == f"transformation_failed: line 3: {thrown.error}"
    syntax = run(sandbox, "function handler(w) {\n  return w;\n}}")  # (saved code compiled when it was saved)
    assert syntax.error.startswith("SyntaxError")
    compiled = check("function handler(w) {\n\n  return w +;\n}", Limits())
    assert compiled.line == 3 and compiled.error.startswith("SyntaxError")
    assert check("function handler(w) { return w; }", Limits()).ok
    assert check("var x;", Limits()).error == "the code defines no function handler(webhook)"


def test_each_call_sees_the_same_world_whatever_the_calls_before_did(sandbox):
    counter = "let n = 0; function handler(w) { n += 1; w.payload = n; return w; }"
    assert [run(sandbox, counter).payload for _ in range(3)] == [1, 1, 1]
    for attack in ("Object.prototype.polluted = 1", "Array.prototype.map = null", "globalThis.kept = 1",
                   "JSON.stringify = () => '{}'", "Date.now = () => 1", "Math.random = () => 4"):
        outcome = run(sandbox, f"function handler(w) {{ {attack}; return w; }}")
        assert not outcome.ok and "TypeError" in outcome.error, attack
    probe = run(sandbox, "function handler(w) { w.payload = [({}).polluted, typeof globalThis.kept, "
                         "[1].map(x => x + 1)]; return w; }")
    assert probe.payload == [None, "undefined", [2]]


def test_no_clock_no_randomness_no_timers_no_io(sandbox):
    clock = run(sandbox, "function handler(w) { w.payload = [Date.now(), new Date().toISOString(), "
                         "new Date(0).getTime()]; return w; }")
    assert clock.payload == [PUBLISHED_MS, "2025-11-28T00:00:00.000Z", 0]  # the event's time, on every try
    assert "Math.random is not available" in run(sandbox, "function handler(w) { Math.random(); }").error
    absent = run(sandbox, "function handler(w) { w.payload = [typeof setTimeout, typeof WeakRef, "
                          "typeof FinalizationRegistry, typeof WebAssembly, typeof SharedArrayBuffer, "
                          "typeof Atomics.waitAsync, typeof require, typeof fetch, typeof process]; return w; }")
    assert set(absent.payload) == {"undefined"}


def test_the_time_limit_ends_a_loop_and_work_left_behind(sandbox):
    limits = Limits(timeout_ms=40)
    sandbox = Sandbox(limits)
    assert run(sandbox, "function handler(w) { while (true) {} }").error == "timed out after 40 ms"
    left = "function handler(w) { Promise.resolve().then(() => { while (true) {} }); return w; }"
    assert run(sandbox, left).error == "timed out after 40 ms"  # charged to the call that left it
    assert run(sandbox, "function handler(w) { return w; }").ok  # the next call has a fresh isolate
    sandbox.discard()


def test_the_memory_limit(sandbox):
    sandbox = Sandbox(Limits(timeout_ms=5000, memory_mb=16))
    hog = "function handler(w) { const kept = []; while (true) kept.push(new Array(100000).fill(w)); }"
    assert run(sandbox, hog).error == "used more than 16 MB of memory"
    assert run(sandbox, "function handler(w) { return w; }").ok
    sandbox.discard()


def test_the_code_and_output_size_limits_and_deep_recursion():
    sandbox = Sandbox(Limits(code_bytes=100, output_bytes=1000))
    assert run(sandbox, "function handler(w) { return w; }" + " " * 100).error == "the code is larger than 100 bytes"
    assert check("//" + "x" * 200, Limits(code_bytes=100)).error == "the code is larger than 100 bytes"
    big = run(sandbox, "function handler(w) { w.payload = 'x'.repeat(2000); return w; }")
    assert "larger than 1000 bytes" in big.error
    deep = run(sandbox, "function handler(w) { const f = n => f(n + 1); f(0); }")
    assert "Maximum call stack size exceeded" in deep.error
    sandbox.discard()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(code=st.text(max_size=200), payload=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10))
def test_whatever_code_and_payload_a_tenant_gives_the_sandbox_answers_an_outcome(sandbox, code, payload):
    for text in (code, "function handler(w) {" + code + "\n; return w; }"):
        outcome = run(sandbox, text, {**WEBHOOK, "payload": payload})
        assert outcome.ok or outcome.error
        assert check(text, Limits()).ok in (True, False)


def test_one_call_sees_nothing_of_another_calls_data(sandbox):
    victim = "function handler(w) { w.payload = /sk_live_(\\w+)/.exec(w.payload.token)[1]; return w; }"
    assert run(sandbox, victim, {**WEBHOOK, "payload": {"token": "sk_live_SECRET"}}).payload == "SECRET"
    spy = run(sandbox, "function handler(w) { w.payload = [RegExp.lastMatch, RegExp.$1, RegExp.input, "
                       "typeof __TimerManager, typeof __timer_manager]; return w; }")
    assert spy.payload == [None, None, None, "undefined", "undefined"]
    for attack in ("Object.getPrototypeOf([].values().map(x => x)).next = null",
                   "Object.getPrototypeOf(Iterator.from({next() {}})).next = null",
                   "Object.getPrototypeOf(new Intl.Segmenter().segment('x')).containing = null",
                   "Object.getOwnPropertyDescriptor(new Error(), 'stack').get.kept = 1"):
        outcome = run(sandbox, f"function handler(w) {{ {attack}; return w; }}")
        assert "TypeError" in outcome.error, attack


def test_no_real_time_through_temporal_or_intl(sandbox):
    clock = run(sandbox, "function handler(w) { w.payload = [typeof Temporal, new Intl.DateTimeFormat('en', "
                         "{timeZone: 'UTC', dateStyle: 'short'}).format(), "
                         "new Intl.DateTimeFormat('en', {timeZone: 'UTC'}).formatToParts()[4].value]; return w; }")
    assert clock.payload == ["undefined", "11/28/25", "2025"]


def test_code_cannot_close_its_function_and_go_on_outside_it(sandbox):
    escape = ('function handler(w) { return w; }\nreturn handler; }), "{}", 0, 1e9); let kept = 1; '
              '((s) => s)(JSON.stringify({payload: 1}), (function () {')
    assert "SyntaxError" in run(sandbox, escape).error
    assert "SyntaxError" in check(escape, Limits()).error


def test_what_is_sent_is_measured_in_bytes_and_must_be_unicode_and_shallow():
    sandbox = Sandbox(Limits(output_bytes=1000))
    euros = run(sandbox, "function handler(w) { w.payload = '€'.repeat(400); return w; }")  # 400 units, 1,200 bytes
    assert euros.error == "the webhook returned is larger than 1000 bytes"
    lone = run(sandbox, "function handler(w) { w.payload = '\\ud800'; return w; }")
    assert "not valid Unicode" in lone.error
    deep = run(sandbox, "function handler(w) { let p = 1; for (let i = 0; i < 100; i++) p = [p]; "
                        "w.payload = p; return w; }")
    assert "nested deeper than 64" in deep.error
    sandbox.discard()


def test_nothing_of_temporal_or_mini_racers_globals_is_kept_between_calls(sandbox):
    assert run(sandbox, "function handler(w) { w.payload = typeof Date.prototype.toTemporalInstant; return w; }"
               ).payload == "undefined"
    counter = ("function handler(w) { const g = (0, eval)('globalThis'); "
               "Function('if (typeof __TimerManager !== \"number\") __TimerManager = 0; __TimerManager += 1')(); "
               "w.payload = Function('return __TimerManager')(); return w; }")
    assert [run(sandbox, counter).payload for _ in range(3)] == [1, 1, 1]
