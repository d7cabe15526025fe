"""A fast keep-alive HTTP/1.1 receiver for benchmarks (asyncio; answers 200 to every request, counts them).

    python bench/receiver.py PORT
"""

import asyncio
import socket
import sys

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:].strip())
            if length:
                await reader.readexactly(length)
            writer.write(RESPONSE)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int):
    server = await asyncio.start_server(handle, "127.0.0.1", port, reuse_address=True)
    for sock in server.sockets:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
