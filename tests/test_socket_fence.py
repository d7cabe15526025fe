"""The socket fence itself (tests/fence.py): it refuses and records a connection any code opens by hand, and lets
the transport's guarded sends through. (The fixture in conftest.py raises it around this module and checks, after
each test, that nothing crossed: here the crossing is expected, so the test takes the record itself.)"""

import socket
import urllib.request

import pytest

from delivery.rules.wire import OutgoingRequest
from delivery.transport.sender import send
from tests import fence


def test_the_fence_refuses_a_connection_made_by_hand_and_lets_the_transport_through(receiver):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/x.json", timeout=2)
        crossed = fence.down()
        fence.up()
        assert crossed == [f"127.0.0.1:{port}"]
        assert send(OutgoingRequest(url=receiver.url, body=b"{}"), timeout=5).status == 200
    finally:
        listener.close()
