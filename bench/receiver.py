"""A fast keep-alive HTTP/1.1 receiver for benchmarks (asyncio). By path:

    /fast/...   200 at once          /slow/...   200 after 200 ms          /hang/...   never answers
    /three/...  200 after 3 s (a healthy endpoint that takes its time)
    /late-token/...   an OAuth2 token answer after 9 s, living 30 s (so never cached)

It logs `arrival-time webhook-id path` of every request to LOG (if given), so the benchmark can measure publish →
receipt, and answers `GET /count` with how many requests it has seen.

    python bench/receiver.py PORT [LOG]
"""

import asyncio
import socket
import sys
import time

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"
SLOW_SECONDS = 0.2
LATE_TOKEN_SECONDS = 9
TOKEN = b'{"access_token": "bench", "expires_in": 30}'
LATE_TOKEN = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: application/json\r\n\r\n%s" % (
    len(TOKEN), TOKEN)
seen = 0


def answer_count() -> bytes:
    body = str(seen).encode()
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, log):
    global seen
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            arrived = time.time()
            length, webhook_id = 0, b"-"
            lines = head.split(b"\r\n")
            for line in lines[1:]:
                name = line[:15].lower()
                if name == b"content-length:":
                    length = int(line[15:].strip())
                elif name[:11] == b"webhook-id:":
                    webhook_id = line[11:].strip()
            if length:
                await reader.readexactly(length)
            path = lines[0].split(b" ")[1]
            if path == b"/count":
                writer.write(answer_count())
                continue
            seen += 1
            if log is not None:
                log.write(b"%.6f %s %s\n" % (arrived, webhook_id, path))
            if path.startswith(b"/hang"):
                await asyncio.sleep(3600)
            elif path.startswith(b"/late-token"):
                await asyncio.sleep(LATE_TOKEN_SECONDS)
                writer.write(LATE_TOKEN)
                continue
            elif path.startswith(b"/slow"):
                await asyncio.sleep(SLOW_SECONDS)
            elif path.startswith(b"/three"):
                await asyncio.sleep(3)
            writer.write(OK)
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main(port: int, log_path: str | None):
    log = open(log_path, "ab", buffering=65536) if log_path else None
    server = await asyncio.start_server(lambda r, w: handle(r, w, log), "127.0.0.1", port, reuse_address=True,
                                        backlog=4096)
    for sock in server.sockets:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def flush():
        while log is not None:
            await asyncio.sleep(0.2)
            log.flush()

    asyncio.ensure_future(flush())
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None))
