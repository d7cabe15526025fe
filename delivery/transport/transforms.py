"""Transformations run by the transport, on threads of their own divided in shares (docs/transformations.md).

A send whose request has a `Rendering` (rules/wire.py: a subscription's transformation, an event version's
down-converters) runs its steps before it takes a send slot: on one of HERALD_TRANSFORM_THREADS threads, each with
its own sandbox (sandbox.py), never on the event loop or the pump's thread. The threads are divided like the name
lookups' (`shared_threads.SharedThreads`: max-min fair across owners, then across each owner's shares, a reserve for
an owner with none running), so a tenant whose handler runs up to its time limit on every delivery holds at most
its share of them and another's deliveries are transformed meanwhile.

What comes back is the signed request to send, or a result that ends the try without one: `cancelled` (the handler
set `cancel`) or `transformation_failed` (a limit, an error, an answer Herald cannot send), each with its reason.
"""

import asyncio
import threading
import time

from delivery.conf import herald
from delivery.rules.vocabulary import ErrorClass
from delivery.rules.wire import OutgoingRequest, Rendering
from delivery.transport.posting import SendResult
from delivery.transport.sandbox import Limits, Outcome, Sandbox
from delivery.transport.shared_threads import SharedThreads


def limits() -> Limits:
    """The sandbox's limits, from settings."""
    return Limits(timeout_ms=int(herald.TRANSFORM_TIMEOUT_MS), memory_mb=int(herald.TRANSFORM_MEMORY_MB),
                  code_bytes=int(herald.TRANSFORM_CODE_MAX_BYTES),
                  output_bytes=int(herald.TRANSFORM_OUTPUT_MAX_BYTES))


def webhook(event_type: str, payload, method: str = "POST", url: str = "") -> dict:
    """What `handler(webhook)` is given (Svix's shape; `url` may be read, not changed)."""
    return {"eventType": event_type, "payload": payload, "method": method, "url": url, "cancel": False}


def apply(sandbox: Sandbox, rendering: Rendering, url: str = "") -> Outcome:
    """`rendering`'s steps in order on one sandbox: each down-converter, then the subscription's handler. A step
    that fails ends it, its reason naming the step."""
    current = Outcome(payload=rendering.payload, method="POST")
    for name, code in rendering.steps:
        given = webhook(rendering.event_type, current.payload, current.method, url)
        current = sandbox.run(code, given, now_ms=rendering.now_ms)
        if not current.ok:
            return Outcome(error=current.error, line=current.line, step=name)
        if current.cancel:
            break
    return current


def trial(code: str, given: dict, *, now_ms: int | None = None) -> Outcome:
    """One run of `code` on `given` in a fresh sandbox, thrown away after (the test-run of an editor or the API)."""
    sandbox = Sandbox(limits())
    try:
        return sandbox.run(code, given, now_ms=int(time.time() * 1000) if now_ms is None else now_ms)
    finally:
        sandbox.discard()


class Transforms:
    """A process's transformation threads, in shares."""

    def __init__(self, *, threads: int):
        self.threads = SharedThreads(threads, name="herald-transform")
        self.local = threading.local()

    def _apply(self, rendering: Rendering, url: str) -> Outcome:
        sandbox = getattr(self.local, "sandbox", None)
        if sandbox is None or sandbox.limits != limits():
            if sandbox is not None:
                sandbox.discard()
            sandbox = self.local.sandbox = Sandbox(limits())
        return apply(sandbox, rendering, url)

    async def rendered(self, request: OutgoingRequest, share) -> OutgoingRequest | SendResult:
        """The request to send for `request` (its rendering run), or the result that ends its try without one."""
        rendering = request.rendering
        began = time.time()
        try:
            done = await self.threads.start(share, self._apply, rendering, request.url)
            outcome = await asyncio.shield(done)
        except Exception as exc:  # the sandbox itself failed: Herald's, not the code's
            return SendResult(status=None, duration_ms=int((time.time() - began) * 1000), started_at=began,
                              error_class=ErrorClass.INTERNAL, error_detail=f"the transformation could not run: "
                                                                            f"{type(exc).__name__}")
        ended = {"status": None, "duration_ms": int((time.time() - began) * 1000), "started_at": began}
        if not outcome.ok:
            return SendResult(**ended, error_class=ErrorClass.TRANSFORMATION_FAILED, error_detail=outcome.reason())
        if outcome.cancel:
            return SendResult(**ended, error_class=ErrorClass.CANCELLED,
                              error_detail="cancelled by the subscription's transformation: nothing was sent")
        try:
            return rendering.finish(outcome.payload, outcome.method)
        except (TypeError, ValueError) as exc:
            return SendResult(**ended, error_class=ErrorClass.TRANSFORMATION_FAILED,
                              error_detail=f"transformation_failed: its payload cannot be sent ({exc})"[:1024])

    def close(self) -> None:
        self.threads.close()
