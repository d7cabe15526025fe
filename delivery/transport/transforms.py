"""Transformations run by the transport, on threads of their own divided in shares (docs/transformations.md).

A send whose request has a `Rendering` (rules/wire.py: a subscription's transformation, an event version's
down-converters) runs its steps before it takes a send slot: on one of HERALD_TRANSFORM_THREADS threads, never on
the event loop or the pump's thread, each thread with a sandbox process of its own (sandbox_host.py). The threads
are divided like the name lookups' (`shared_threads.SharedThreads`: max-min fair across owners, then across each
owner's shares, a reserve for an owner with none running, and a freed thread to the waiting share running the
fewest), so a tenant whose handler runs to its time limit on every delivery holds at most its share of them and
another's deliveries are transformed meanwhile. A send whose start window passes while it waits for a thread is not
transformed nor sent (not an attempt, due again).

What comes back is the signed request to send, or a result that ends the try without one: `cancelled` (the handler
set `cancel`) or `transformation_failed` (a limit, an error, an answer Herald cannot send), each with its reason.

Web requests (a save's check, a test-run, an upgrade's preview) use one sandbox process of their own process, one
call at a time (`check`, `trial`, `run_steps`).
"""

import asyncio
import threading
import time
from dataclasses import replace

from delivery.conf import herald
from delivery.rules.vocabulary import ErrorClass
from delivery.rules.wire import OutgoingRequest, Rendering
from delivery.transport.posting import SendResult
from delivery.transport.sandbox import WALL_FACTOR, Limits, Outcome, webhook  # noqa: F401 (webhook: the doors')
from delivery.transport.sandbox_host import GRACE_SECONDS, SandboxProcess
from delivery.transport.shared_threads import SharedThreads

CARRIED = ("traceparent", "tracestate")  # headers added to a request after it was built (its trace), kept


def limits() -> Limits:
    """The sandbox's limits, from settings."""
    return Limits(timeout_ms=int(herald.TRANSFORM_TIMEOUT_MS), memory_mb=int(herald.TRANSFORM_MEMORY_MB),
                  code_bytes=int(herald.TRANSFORM_CODE_MAX_BYTES),
                  output_bytes=int(herald.TRANSFORM_OUTPUT_MAX_BYTES))


def call(process: SandboxProcess, steps, event_type: str, payload, *, url: str = "", now_ms: int = 0,
         share=None) -> Outcome:
    """`steps` ((name, code), in order) on `payload` in `process`'s child, within their time limits."""
    sandbox_limits = limits()
    request = {"op": "run", "steps": [list(step) for step in steps], "event_type": event_type, "payload": payload,
               "url": url, "now_ms": int(now_ms), "share": list(share) if share else None}
    return process.call(request, sandbox_limits, elapsed_bound(sandbox_limits, len(steps)))


def elapsed_bound(sandbox_limits: Limits, steps: int) -> float:
    """How long the caller waits for `steps` calls: each is two evaluations, each ended by the child at its CPU time
    or, failing that, at WALL_FACTOR times it (sandbox.timed_eval); past this the child is killed."""
    return steps * 2 * max(1.0, WALL_FACTOR * sandbox_limits.timeout_ms / 1000) + GRACE_SECONDS


_web = SandboxProcess()
_web_lock = threading.Lock()


def check(code: str) -> Outcome:
    """Whether `code` compiles and defines handler(webhook) (a save's check), in this process's sandbox process."""
    sandbox_limits = limits()
    with _web_lock:
        return _web.call({"op": "check", "code": code}, sandbox_limits, elapsed_bound(sandbox_limits, 1))


def run_steps(steps, event_type: str, payload, *, url: str = "", now_ms: int | None = None, share=None) -> Outcome:
    """`steps` run once on `payload` in this process's sandbox process (a test-run, a preview), on `share`'s
    isolate (the (owner, tenant) whose code or event it is): nothing is sent."""
    with _web_lock:
        return call(_web, steps, event_type, payload, url=url,
                    now_ms=int(time.time() * 1000) if now_ms is None else now_ms, share=share)


def trial(code: str, given: dict, *, now_ms: int | None = None, share=None) -> Outcome:
    """One run of `code` on the webhook `given` (a test-run): refused as at save if it does not compile."""
    compiled = check(code)
    if not compiled.ok:
        return compiled
    return run_steps((("", code),), given.get("eventType", ""), given.get("payload"), url=given.get("url", ""),
                     now_ms=now_ms, share=share)


class Transforms:
    """A process's transformation threads, in shares, each with its sandbox process."""

    def __init__(self, *, threads: int):
        self.threads = SharedThreads(threads, name="herald-transform")
        self.local = threading.local()
        self.processes: list[SandboxProcess] = []  # every thread's, to close
        self.lock = threading.Lock()

    def _apply(self, rendering: Rendering, url: str, share) -> Outcome:
        process = getattr(self.local, "process", None)
        if process is None:
            process = self.local.process = SandboxProcess()
            with self.lock:
                self.processes.append(process)
        return call(process, rendering.steps, rendering.event_type, rendering.payload, url=url,
                    now_ms=rendering.now_ms, share=share)

    async def rendered(self, request: OutgoingRequest, share, start_by: float | None = None
                       ) -> OutgoingRequest | SendResult | None:
        """The request to send for `request` (its rendering run), the result that ends its try without one, or
        None when its start window passed while it waited for a thread (not sent, not an attempt)."""
        rendering = request.rendering
        began = time.time()
        wait = None if start_by is None else max(0.0, start_by - time.monotonic())
        try:
            async with asyncio.timeout(wait):
                await self.threads.wait_for_room(share)
        except TimeoutError:
            return None
        if start_by is not None and time.monotonic() > start_by:
            return None
        done = self.threads.run(share, self._apply, rendering, request.url, share)
        try:
            outcome = await asyncio.shield(done)
        except Exception as exc:  # the thread itself failed: Herald's, not the code's
            return SendResult(status=None, duration_ms=int((time.time() - began) * 1000), started_at=began,
                              error_class=ErrorClass.INTERNAL,
                              error_detail=f"the transformation could not run: {type(exc).__name__}")
        ended = {"status": None, "duration_ms": int((time.time() - began) * 1000), "started_at": began}
        if outcome.internal:  # Herald's failure: retried by the policy, not counted against the endpoint
            return SendResult(**ended, error_class=ErrorClass.INTERNAL,
                              error_detail=f"the transformation could not run: {outcome.error}")
        if not outcome.ok:
            return SendResult(**ended, error_class=ErrorClass.TRANSFORMATION_FAILED, error_detail=outcome.reason())
        if outcome.cancel:
            return SendResult(**ended, error_class=ErrorClass.CANCELLED,
                              error_detail="cancelled by the subscription's transformation: nothing was sent")
        try:
            built = rendering.finish(outcome.payload, outcome.method)
        except Exception as exc:  # a payload JSON cannot carry (however deep or odd): the code's answer, refused
            return SendResult(**ended, error_class=ErrorClass.TRANSFORMATION_FAILED,
                              error_detail=f"transformation_failed: its payload cannot be sent ({type(exc).__name__})")
        carried = {name: request.headers[name] for name in CARRIED if name in request.headers}
        return replace(built, headers={**built.headers, **carried}) if carried else built

    def close(self) -> None:
        self.threads.close()
        with self.lock:
            processes, self.processes = self.processes, []
        for process in processes:
            process.close()
