"""The sandbox's own process (docs/transformations.md, "The sandbox and its limits").

V8 stops some things only by ending its process: a built-in asked for an impossible size ("x".repeat(2**28).split(""))
aborts it; a single long built-in call (a normalize or a sort of millions of items) runs past any time limit; typed
arrays live outside the isolate's heap limit. So handlers run in a child process (`python -m
delivery.transport.sandbox_host`) with a limit on its memory (RLIMIT_DATA) and the UTC time zone, one per thread
that runs handlers, and the caller waits for each answer until a deadline: past it, or when the child dies, the
child is killed and the call answers why; the next call starts another. Nothing a handler does reaches the worker or
web process that asked.

Within a child, each share (owner, tenant) has an isolate of its own (the last ISOLATES used are kept), so what one
tenant's code leaves in an isolate is never seen by another's.

The protocol: each message is a 4-byte big-endian length and that much JSON, a request from the parent, then an
answer from the child.
"""

import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
from collections import OrderedDict
from pathlib import Path

from delivery.transport.sandbox import Limits, Outcome, Sandbox, check, webhook

ISOLATES = 4  # per child: the shares whose isolates are kept
START_SECONDS = 10.0  # the longest a child may take to start (its V8 up and warm), before any code of a tenant's
GRACE_SECONDS = 1.0  # beyond the calls' own time limits, for the hand-over and the child's own work (a new isolate)
READY = {"ready": True}
# Memory a child may keep between calls beyond what it had when ready: past it after a call, that call's share's
# isolate is thrown away (what its code allocated outside the heap, typed arrays, is not collected otherwise until
# another call of that share, and would be counted against whoever runs next).
KEPT_MB = 128
# The child's environment: nothing of the parent's (its secrets, its locale), a fixed time zone and locale.
ENVIRONMENT = {"TZ": "UTC", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"}


def data_mb() -> float:
    """This process's data segment and private writable mappings (what RLIMIT_DATA bounds), in MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmData:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def process_memory_mb(limits: Limits) -> int:
    """The child's limit on its memory: its isolates' heaps, what lives outside them, and V8's own."""
    return 768 + ISOLATES * limits.memory_mb


# --- the child ----------------------------------------------------------------------------------------------------

def answer(request: dict, isolates: OrderedDict, baseline: float = 0.0) -> dict:
    """One request's answer (never raises): `check` a code, or `run` steps one after another on one share's
    isolate."""
    try:
        limits = Limits(**request["limits"])
        if request["op"] == "check":
            return vars(check(request["code"], limits))
        key = json.dumps(request.get("share"))
        sandbox = isolates.pop(key, None)
        if sandbox is None or sandbox.limits != limits:
            sandbox = Sandbox(limits)
        isolates[key] = sandbox
        while len(isolates) > ISOLATES:
            isolates.popitem(last=False)[1].discard()
        outcome = steps(sandbox, request)
        if data_mb() > baseline + KEPT_MB:
            isolates.pop(key).discard()
        return vars(outcome)
    except Exception as exc:
        return vars(Outcome(error=f"the sandbox could not run it: {type(exc).__name__}", internal=True))


def steps(sandbox: Sandbox, request: dict) -> Outcome:
    """Each (name, code) of the request in order on the webhook the one before left."""
    current = Outcome(payload=request["payload"], method="POST")
    for name, code in request["steps"]:
        given = webhook(request["event_type"], current.payload, current.method, request.get("url", ""))
        current = sandbox.run(code, given, now_ms=request["now_ms"])
        if not current.ok:
            return Outcome(error=current.error, line=current.line, step=name)
        if current.cancel:
            break
    return current


def main() -> None:
    limit = int(sys.argv[1]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to handle
    isolates: OrderedDict = OrderedDict()
    inbox, outbox = sys.stdin.buffer, sys.stdout.buffer
    warm = Sandbox(Limits())  # V8 up and warm before any tenant's code: a start is not counted in a call's time
    warm.run("function handler(webhook) { return webhook; }", {"payload": 1}, now_ms=0)
    warm.discard()
    baseline = data_mb()  # the child's memory once ready
    ready = json.dumps(READY).encode()
    outbox.write(len(ready).to_bytes(4, "big") + ready)
    outbox.flush()
    while True:
        header = inbox.read(4)
        if len(header) < 4:
            return  # the parent is gone or done
        request = json.loads(inbox.read(int.from_bytes(header, "big")))
        body = json.dumps(answer(request, isolates, baseline), ensure_ascii=False).encode("utf-8", "replace")
        outbox.write(len(body).to_bytes(4, "big") + body)
        outbox.flush()


# --- the parent ---------------------------------------------------------------------------------------------------

class SandboxProcess:
    """A child process to run handlers in, used by one thread at a time (`call` never raises)."""

    def __init__(self):
        self.child: subprocess.Popen | None = None

    def _start(self, limits: Limits) -> Outcome | None:
        """A child, started and ready (its V8 warm) within START_SECONDS; why not otherwise (Herald's failure)."""
        environment = {**ENVIRONMENT, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.child = subprocess.Popen([sys.executable, "-m", "delivery.transport.sandbox_host",
                                       str(process_memory_mb(limits))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, env=environment, close_fds=True)
        found = self._read(time.monotonic() + START_SECONDS, limits)
        if isinstance(found, Outcome) or found != json.dumps(READY).encode():
            self.close()
            return Outcome(error="the sandbox's process did not start", internal=True)
        return None

    def call(self, request: dict, limits: Limits, seconds: float) -> Outcome:
        """The child's answer to `request` within `seconds`; the reason otherwise, the child killed."""
        try:
            if self.child is None or self.child.poll() is not None:
                failed = self._start(limits)
                if failed is not None:
                    return failed
            body = json.dumps({**request, "limits": vars(limits)}, ensure_ascii=False).encode("utf-8", "replace")
            self.child.stdin.write(len(body).to_bytes(4, "big") + body)
            self.child.stdin.flush()
            found = self._read(time.monotonic() + seconds, limits)
        except (OSError, ValueError, RecursionError) as exc:
            self.close()
            return Outcome(error=f"the sandbox could not be reached ({type(exc).__name__})", internal=True)
        if isinstance(found, Outcome):
            return found
        try:
            return Outcome(**json.loads(found))
        except (TypeError, ValueError, RecursionError):
            return Outcome(error="the sandbox's answer could not be read", internal=True)

    def _read(self, deadline: float, limits: Limits) -> bytes | Outcome:
        """One message from the child by `deadline` (poll: any descriptor number), at most a few times the largest
        answer a handler may give."""
        out = self.child.stdout.fileno()
        waiting = select.poll()
        waiting.register(out, select.POLLIN)
        data, size = bytearray(), None
        while size is None or len(data) < 4 + size:
            left = deadline - time.monotonic()
            if left <= 0 or not waiting.poll(left * 1000):
                self.close()  # a built-in V8 could not stop in time, or the child is stuck: it goes
                return Outcome(error=f"timed out after {limits.timeout_ms} ms")
            chunk = os.read(out, 1 << 16)
            if not chunk:
                code = self.close()
                return Outcome(error=ended(code))
            data += chunk
            if size is None and len(data) >= 4:
                size = int.from_bytes(data[:4], "big")
                if size > 4 * limits.output_bytes + 65_536:
                    self.close()
                    return Outcome(error="the sandbox's answer was too large", internal=True)
        return bytes(data[4:4 + size])

    def close(self) -> int | None:
        """End the child (killed if it is still running); its exit status."""
        child, self.child = self.child, None
        if child is None:
            return None
        if child.poll() is None:
            child.kill()
        for stream in (child.stdin, child.stdout):
            try:
                stream.close()
            except OSError:
                pass
        return child.wait()


def ended(code: int | None) -> str:
    """Why the child ended in a call, in the words a delivery records."""
    how = f"signal {-code}" if code is not None and code < 0 else f"status {code}"
    return (f"the code ended the sandbox's process ({how}): it asked V8 for more than it can give (a string, an "
            f"array or memory past its limits)")


if __name__ == "__main__":
    main()
