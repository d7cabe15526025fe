"""Transformations' JavaScript sandbox (docs/transformations.md): V8 through mini-racer, one isolate per thread
that uses it, each call a pure function of its input.

A call runs `handler(webhook)` from code a tenant wrote. What it may not do, and how:
- I/O: V8 alone has none (no network, files, processes, timers: mini-racer's `setTimeout` is removed);
- differ between tries: `Math.random` throws, `Date.now()` and `new Date()` are the event's publish time, and the
  intrinsics and the global object are frozen before any code runs, so nothing a call does (a global, a prototype
  changed, a closure kept) is seen by the next; each call evaluates the code afresh in a strict function scope;
- work on after it returned: promise jobs left behind run within the same call's time limit, and weak references'
  callbacks (WeakRef, FinalizationRegistry) are removed;
- cost more than its limits: a time limit per call (the isolate's thread is terminated past it), a memory limit on
  the isolate's heap, a size limit on the code and on what it returns (`Limits`).

Every call answers an `Outcome`: the webhook returned, or the reason it could not be (with the code's line when
the error has one). Nothing raises out of `Sandbox.run`. An isolate that hit a limit is thrown away; the next call
gets a new one.
"""

import asyncio
import json
import re
import threading
from dataclasses import dataclass

import py_mini_racer as js_errors
from py_mini_racer import MiniRacer, mini_racer

METHODS = ("POST", "PUT")
CODE_NAME = "handler.js"  # how the tenant's code is named in stack traces (its line numbers are read from them)
# The code sits on the script's second line: a line the tenant sees is the trace's line less this.
LINE_OFFSET = 1
# A frame in the code (a runtime error), or where a script that did not parse stopped (a syntax error).
_LINE = re.compile(re.escape(CODE_NAME) + r":(\d+)|^<anonymous>:(\d+):")

PRELUDE = r"""
(() => {
  "use strict";
  const RealDate = Date;
  let clock = 0;
  function HeraldDate(...args) {
    if (!new.target) return new RealDate(clock).toString();
    return Reflect.construct(RealDate, args.length ? args : [clock], new.target);
  }
  HeraldDate.prototype = RealDate.prototype;
  Object.defineProperty(RealDate.prototype, "constructor", {value: HeraldDate});
  HeraldDate.now = () => clock;
  HeraldDate.parse = RealDate.parse;
  HeraldDate.UTC = RealDate.UTC;
  globalThis.Date = HeraldDate;
  Math.random = function random() {
    throw new Error("Math.random is not available in a transformation: its output must be the same on every try");
  };
  delete Atomics.waitAsync;
  delete Atomics.wait;
  for (const name of ["WeakRef", "FinalizationRegistry", "SharedArrayBuffer", "WebAssembly"]) delete globalThis[name];
  for (const name of ["setTimeout", "clearTimeout", "__timer_manager"]) {
    if (name in globalThis) globalThis[name] = undefined;
  }
  const parse = JSON.parse, stringify = JSON.stringify;
  const isPromise = (value) => value instanceof Promise;
  function run(factory, input, now, maxOutput) {
    clock = now;
    const handler = factory();
    if (typeof handler !== "function") throw new TypeError("the code defines no function handler(webhook)");
    const webhook = parse(input);
    const url = webhook.url;
    let out = handler(webhook);
    if (out === undefined) out = webhook;
    if (isPromise(out)) throw new TypeError("handler(webhook) returned a Promise: it must return the webhook itself");
    if (out === null || typeof out !== "object") throw new TypeError("handler(webhook) must return the webhook");
    if (out.url !== url) throw new TypeError("a transformation cannot change the URL: the endpoint that " +
                                                   "confirmed the subscription is the one that receives");
    const text = stringify({payload: out.payload, method: out.method, cancel: out.cancel});
    if (text.length > maxOutput) throw new RangeError("the webhook returned is larger than " + maxOutput + " bytes");
    return text;
  }
  Object.defineProperty(globalThis, "__herald_run", {value: run});
  const seen = new Set();
  const freeze = (o) => {
    if (o === null || (typeof o !== "object" && typeof o !== "function") || seen.has(o)) return;
    seen.add(o);
    Object.freeze(o);
    for (const key of Reflect.ownKeys(o)) {
      const d = Reflect.getOwnPropertyDescriptor(o, key);
      if ("value" in d) freeze(d.value); else { freeze(d.get); freeze(d.set); }
    }
    freeze(Reflect.getPrototypeOf(o));
  };
  freeze(globalThis);
  // Intrinsics no global names: generators', async functions', iterators', typed arrays'.
  for (const o of [function* () {}, async function () {}, async function* () {}, [][Symbol.iterator](),
                   new Map()[Symbol.iterator](), new Set()[Symbol.iterator](), ""[Symbol.iterator](),
                   "x".matchAll(/x/g), Int8Array, (function* () {})()]) {
    freeze(Reflect.getPrototypeOf(o));
  }
})();
//# sourceURL=herald-prelude.js
"""


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
    """The script one call evaluates: the code in a strict function of its own (so nothing it declares outlives the
    call), handed to the prelude's runner with the webhook as a JSON string literal."""
    return ('__herald_run((function () {"use strict";\n' + code
            + '\n;return typeof handler === "function" ? handler : null;}), '
            + json.dumps(json.dumps(webhook, ensure_ascii=False)) + f", {int(now_ms)}, {int(max_output)})"
            + f"\n//# sourceURL={CODE_NAME}")


def _line(text: str, code: str) -> int | None:
    """The code's line an error names (its first frame in the code), within the code's lines."""
    found = _LINE.search(text)
    line = int(found.group(1) or found.group(2)) - LINE_OFFSET if found else 0
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
        script = source(code, webhook, now_ms, limits.output_bytes)
        try:
            context = self._context()
            text = context.eval(script, timeout_sec=limits.timeout_ms / 1000)
            context.eval("0", timeout_sec=limits.timeout_ms / 1000)  # promise jobs left behind run within this call
        except js_errors.JSTimeoutException:
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
        except Exception as exc:  # mini-racer itself failed (a conversion, a terminated isolate): this call fails
            self.discard()
            return Outcome(error=f"the sandbox failed: {type(exc).__name__}")
        return read(text)


def read(text) -> Outcome:
    """The runner's JSON answer as an Outcome, or the reason it is not a webhook Herald can send."""
    try:
        answer = json.loads(text)
    except (TypeError, ValueError):
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
    thrown away)."""
    if len(code.encode("utf-8", "surrogatepass")) > limits.code_bytes:
        return Outcome(error=f"the code is larger than {limits.code_bytes} bytes")
    script = ('(function () {"use strict";\n' + code + '\n;return typeof handler === "function";})()'
              + f"\n//# sourceURL={CODE_NAME}")
    sandbox = Sandbox(limits)
    try:
        defined = sandbox._context().eval(script, timeout_sec=limits.timeout_ms / 1000)
    except js_errors.JSTimeoutException:
        return Outcome(error=f"timed out after {limits.timeout_ms} ms")
    except js_errors.JSOOMException:
        return Outcome(error=f"used more than {limits.memory_mb} MB of memory")
    except js_errors.JSEvalException as exc:
        return Outcome(error=_message(str(exc)), line=_line(str(exc), code))
    except Exception as exc:
        return Outcome(error=f"the sandbox failed: {type(exc).__name__}")
    finally:
        sandbox.discard()
    return Outcome() if defined is True else Outcome(error="the code defines no function handler(webhook)")
