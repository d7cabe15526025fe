"""The transformation threads are in shares: a tenant whose handler runs to its time limit on every delivery holds
at most its part of them, and another tenant's deliveries are transformed meanwhile."""

import asyncio

from delivery.rules.wire import OutgoingRequest, Rendering
from delivery.transport.posting import SendResult
from delivery.transport.transforms import Transforms

SLOW, QUICK = (1, 0), (2, 0)  # two owners' shares


def request(code: str) -> OutgoingRequest:
    rendering = Rendering(event_type="order.created", payload={"id": 1}, steps=(("", code),), now_ms=0,
                          finish=lambda payload, method: OutgoingRequest(url="http://127.0.0.1:9/", body=b"done"))
    return OutgoingRequest(url="http://127.0.0.1:9/", body=b"", rendering=rendering)


def test_a_share_of_slow_handlers_leaves_another_shares_transformations_as_they_were(settings):
    settings.HERALD_TRANSFORM_TIMEOUT_MS = 300
    transforms = Transforms(threads=2)
    finished: list[str] = []

    async def transform(name, share, code):
        result = await transforms.rendered(request(code), share)
        finished.append(name)
        return result

    async def scenario():
        slow = [asyncio.create_task(transform(f"slow{n}", SLOW, "function handler(w) { while (true) {} }"))
                for n in range(6)]
        await asyncio.sleep(0.05)  # the slow share holds what it may of the threads
        quick = await transform("quick", QUICK, "function handler(w) { w.payload = 2; return w; }")
        return quick, await asyncio.gather(*slow)

    try:
        quick, slow = asyncio.run(scenario())
    finally:
        transforms.close()
    assert isinstance(quick, OutgoingRequest) and quick.body == b"done"
    assert finished[0] == "quick"  # before any of the slow share's, each of which runs 300 ms
    assert all(isinstance(r, SendResult) and r.error_detail == "transformation_failed: timed out after 300 ms"
               for r in slow)


def test_the_trace_headers_added_after_the_build_go_along_with_the_transformed_request():
    transforms = Transforms(threads=1)
    traced = OutgoingRequest(url="http://127.0.0.1:9/", body=b"", headers={"traceparent": "00-abc-def-01"},
                             rendering=request("function handler(w) { return w; }").rendering)
    try:
        built = asyncio.run(transforms.rendered(traced, QUICK))
    finally:
        transforms.close()
    assert built.body == b"done" and built.headers["traceparent"] == "00-abc-def-01"


def test_a_send_whose_start_window_passed_while_it_waited_is_not_transformed():
    transforms = Transforms(threads=1)
    try:
        assert asyncio.run(transforms.rendered(request("function handler(w) { return w; }"), QUICK,
                                               start_by=0.0)) is None
    finally:
        transforms.close()
