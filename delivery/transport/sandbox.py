"""Transformations' JavaScript sandbox (docs/transformations.md): V8 through mini-racer, one isolate per thread
that uses it, each call a pure function of its input.

A call runs `handler(webhook)` from code a tenant wrote. What it may not do, and how:
- I/O: V8 alone has none (no network, files, processes, timers: mini-racer's `setTimeout` is removed);
- differ between tries: `Math.random` throws, `Date.now()` and `new Date()` are the event's publish time, and the
  intrinsics and the global object are frozen before any code runs, so nothing a call does (a global, a prototype
  changed, a closure kept) is seen by the next; each call evaluates the code afresh in a strict function scope;
- work on after it returned: promise jobs left behind run within the same call's time limit, and weak references'
  callbacks (WeakRef, FinalizationRegistry) are removed;
- cost more than its limits: a CPU-time limit per call (V8 is terminated past it: `timed_eval`), a memory limit on
  the isolate's heap, a size limit on the code and on what it returns (`Limits`).

Every call answers an `Outcome`: the webhook returned, or the reason it could not be (with the code's line when
the error has one). Nothing raises out of `Sandbox.run`. An isolate that hit a limit is thrown away; the next call
gets a new one.
"""

import asyncio
import json
import re
import threading
import time
from dataclasses import dataclass

import py_mini_racer as js_errors
from py_mini_racer import MiniRacer, mini_racer

from delivery.transport.sandbox_prelude import PRELUDE

METHODS = ("POST", "PUT")
NO_HANDLER = "the code defines no function handler(webhook)"
CODE_NAME = "handler.js"  # how the tenant's code is named in stack traces (its line numbers are read from them)
# Where the code's first line is in a trace: the second line of the check's script; the third of the function a run
# compiles (after `function anonymous(` and `) {`).
CHECK_LINE_OFFSET, RUN_LINE_OFFSET = 1, 2
_LONE_SURROGATE = re.compile(r"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F]")  # an odd number of backslashes, then \uD800-\uDFFF
# A frame in the code (a runtime error), or where a script that did not parse stopped (a syntax error).
_LINE = re.compile(re.escape(CODE_NAME) + r":(\d+)|^<anonymous>:(\d+):")


def webhook(event_type: str, payload, method: str = "POST", url: str = "") -> dict:
    """What `handler(webhook)` is given (Svix's shape; `url` may be read, not changed)."""
    return {"eventType": event_type, "payload": payload, "method": method, "url": url, "cancel": False}


@dataclass(frozen=True)
class Limits:
    timeout_ms: int = 50
    memory_mb: int = 64
    code_bytes: int = 65_536
    output_bytes: int = 262_144


@dataclass(frozen=True)
class Outcome:
    """What one call gave: the webhook's `payload`, `method` and `cancel`, or `error` (and its `line` in the code)."""

    payload: object = None
    method: str = "POST"
    cancel: bool = False
    error: str = ""
    line: int | None = None
    step: str = ""  # which code failed, where several run one after another (a version's down-converter)
    internal: bool = False  # the sandbox could not run it (Herald's failure, not the code's)

    @property
    def ok(self) -> bool:
        return not self.error

    def reason(self) -> str:
        """The error as a delivery records it: `transformation_failed: line 3: TypeError: …` (after the step's name,
        `down-converter of 2026-06-01: `, for a version's)."""
        where = f"line {self.line}: " if self.line else ""
        step = f"{self.step}: " if self.step else ""
        return f"transformation_failed: {step}{where}{self.error}"


def source(code: str, webhook: dict, now_ms: int, max_output: int) -> str:
    """The script one call evaluates: the prelude's runner given the code and the webhook as JSON string literals
    (the runner compiles the code as a function body of its own, so nothing it declares outlives the call)."""
    return (f"__herald_run({json.dumps(code)}, {json.dumps(json.dumps(webhook, ensure_ascii=False))}, "
            f"{int(now_ms)}, {int(max_output)})")


def _line(text: str, code: str, offset: int = RUN_LINE_OFFSET) -> int | None:
    """The code's line an error names (its first frame in the code), within the code's lines."""
    found = _LINE.search(text)
    line = int(found.group(1) or found.group(2)) - offset if found else 0
    return min(line, code.count("\n") + 1) if line >= 1 else None  # (line 0: Herald's call of the handler)


def _message(text: str) -> str:
    """The error's own words from mini-racer's report (`<where>: SyntaxError: …`, then the source and a stack)."""
    first = text.strip().splitlines()[0] if text.strip() else "the code failed"
    first = re.sub(r"^\S*:\d+: ", "", first)
    return first[:300]


_callbacks: asyncio.AbstractEventLoop | None = None
_callbacks_lock = threading.Lock()


def callback_loop() -> asyncio.AbstractEventLoop:
    """The one event loop (on a thread of its own) that mini-racer reports every isolate's results on. It outlives
    the isolates, so that what an isolate thrown away after a limit still reports finds it running (a loop of each
    isolate's own would be closed with it)."""
    global _callbacks
    with _callbacks_lock:
        if _callbacks is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="herald-sandbox-callbacks", daemon=True).start()
            _callbacks = loop
    return _callbacks


class CpuSpent(Exception):
    """A call used its CPU time (or, as a backstop, WALL_FACTOR times it in elapsed time)."""


WALL_FACTOR = 20  # a call also ends after this many times its CPU time has elapsed (a machine too busy to run it)
WATCH_SECONDS = 0.002  # how often a call's CPU time is looked at


def timed_eval(context: MiniRacer, code: str, cpu_seconds: float):
    """`context.eval(code)`, ended (CpuSpent) once it has used `cpu_seconds` of CPU time: the process's, as V8 runs
    on threads of its own and nothing else runs in the sandbox's process meanwhile (sandbox_host.py), so a loaded
    machine that delays a call does not spend its budget. Elapsed time bounds it too, at WALL_FACTOR times."""
    async def watched():
        task = asyncio.ensure_future(context.eval_cancelable(code))
        began, until = time.process_time(), time.monotonic() + max(1.0, WALL_FACTOR * cpu_seconds)
        while True:
            done, _ = await asyncio.wait({task}, timeout=WATCH_SECONDS)
            if done:
                return task.result()
            if time.process_time() - began > cpu_seconds or time.monotonic() > until:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
                raise CpuSpent
    return asyncio.run_coroutine_threadsafe(watched(), callback_loop()).result()


class Sandbox:
    """One V8 isolate with the prelude, used by one thread at a time. `run` never raises."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.context: MiniRacer | None = None
        self.opened = None  # the context manager that made `context`

    def _context(self) -> MiniRacer:
        if self.context is None:
            opened = mini_racer(callback_loop())
            context = opened.__enter__()
            try:
                context.set_hard_memory_limit(self.limits.memory_mb * 1024 * 1024)
                context.eval(PRELUDE)
                # The runner's first call compiles it and warms the engine: done here, not in a tenant's time.
                context.eval(source("function handler(webhook) { return webhook; }", {"payload": {}}, 0, 1024))
            except BaseException:
                opened.__exit__(None, None, None)
                raise
            self.context, self.opened = context, opened
        return self.context

    def discard(self) -> None:
        opened, self.context, self.opened = self.opened, None, None
        if opened is not None:
            try:
                opened.__exit__(None, None, None)
            except Exception:  # an isolate that hit a limit may not close cleanly; it is dropped either way
                pass

    def run(self, code: str, webhook: dict, *, now_ms: int) -> Outcome:
        """`handler(webhook)` of `code`, within the limits; `now_ms`: what the code's clock says (the event's time)."""
        limits = self.limits
        if len(code.encode("utf-8", "surrogatepass")) > limits.code_bytes:
            return Outcome(error=f"the code is larger than {limits.code_bytes} bytes")
        try:
            script = source(code, webhook, now_ms, limits.output_bytes)
            context = self._context()
            began = time.process_time()
            text = timed_eval(context, script, limits.timeout_ms / 1000)
            left = max(0.001, limits.timeout_ms / 1000 - (time.process_time() - began))
            timed_eval(context, "0", left)  # promise jobs left behind run within this call's time
        except (CpuSpent, js_errors.JSTimeoutException):
            self.discard()
            return Outcome(error=f"timed out after {limits.timeout_ms} ms")
        except js_errors.JSOOMException:
            self.discard()
            return Outcome(error=f"used more than {limits.memory_mb} MB of memory")
        except js_errors.JSEvalException as exc:
            if self.context is not None and self.context.was_hard_memory_limit_reached():
                self.discard()
                return Outcome(error=f"used more than {limits.memory_mb} MB of memory")
            return Outcome(error=_message(str(exc)), line=_line(str(exc), code))
        except RecursionError:
            return Outcome(error="the webhook is nested too deeply to be given to the handler")
        except Exception as exc:  # mini-racer itself failed (a conversion, a terminated isolate): this call fails
            self.discard()
            return Outcome(error=f"the sandbox failed: {type(exc).__name__}")
        return read(text, limits.output_bytes)


def read(text, max_output: int) -> Outcome:
    """The runner's JSON answer as an Outcome, or the reason it is not a webhook Herald can send (its size counted
    in UTF-8 bytes, as it is sent)."""
    try:
        if len(text.encode("utf-8")) > max_output:
            return Outcome(error=f"the webhook returned is larger than {max_output} bytes")
        if _LONE_SURROGATE.search(text):  # (JSON.stringify writes a lone surrogate as an escape)
            raise UnicodeEncodeError("utf-8", text, 0, 1, "a lone surrogate")
        answer = json.loads(text)
    except UnicodeEncodeError:
        return Outcome(error="the webhook returned holds text that is not valid Unicode (a lone surrogate)")
    except (TypeError, ValueError, RecursionError, AttributeError):
        return Outcome(error="the handler's answer could not be read")
    method = answer.get("method", "POST")
    if method not in METHODS:
        return Outcome(error=f"method must be one of {', '.join(METHODS)}, not {str(method)[:40]!r}")
    cancel = answer.get("cancel", False)
    if not isinstance(cancel, bool):
        return Outcome(error="cancel must be true or false")
    if "payload" not in answer and not cancel:
        return Outcome(error="the webhook returned has no payload")
    return Outcome(payload=answer.get("payload"), method=method, cancel=cancel)


def check(code: str, limits: Limits) -> Outcome:
    """Whether `code` compiles and defines handler(webhook), without calling it (a save's check; a fresh isolate,
    thrown away): parsed first as a script that runs nothing (where a syntax error has its line), then compiled and
    its top level run exactly as a run does (a body of its own, which cannot close its function and go on outside
    it)."""
    if len(code.encode("utf-8", "surrogatepass")) > limits.code_bytes:
        return Outcome(error=f"the code is larger than {limits.code_bytes} bytes")
    parsed_only = '(function () {"use strict";\n' + code + f"\n}});\n//# sourceURL={CODE_NAME}"
    sandbox = Sandbox(limits)
    try:
        timed_eval(sandbox._context(), parsed_only, limits.timeout_ms / 1000)
        timed_eval(sandbox._context(), f"__herald_compiles({json.dumps(code)})", limits.timeout_ms / 1000)
    except (CpuSpent, js_errors.JSTimeoutException):
        return Outcome(error=f"timed out after {limits.timeout_ms} ms")
    except js_errors.JSOOMException:
        return Outcome(error=f"used more than {limits.memory_mb} MB of memory")
    except js_errors.JSEvalException as exc:
        if NO_HANDLER in str(exc):
            return Outcome(error=NO_HANDLER)
        offset = CHECK_LINE_OFFSET if isinstance(exc, js_errors.JSParseException) else RUN_LINE_OFFSET
        return Outcome(error=_message(str(exc)), line=_line(str(exc), code, offset))
    except Exception as exc:
        return Outcome(error=f"the sandbox failed: {type(exc).__name__}")
    finally:
        sandbox.discard()
    return Outcome()
