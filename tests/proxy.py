"""A forwarding HTTP proxy on 127.0.0.1 for tests: CONNECT tunnels (HTTPS) and absolute-form requests (HTTP), one
request per connection, recording every target it was asked for. `refuse` answers 403 instead."""

import socket
import threading
from urllib.parse import urlsplit


class Proxy:
    def __init__(self):
        self.targets: list[str] = []  # "CONNECT 127.0.0.1:443" or "POST http://127.0.0.1:8080/hook"
        self.refuse = False
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket):
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    return
                head += chunk
            head, _, rest = head.partition(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, target, version = request_line.split(" ")
            self.targets.append(f"{method} {target}")
            if self.refuse:
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream = socket.create_connection((host.strip("[]"), int(port)))
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:
                parts = urlsplit(target)
                upstream = socket.create_connection((parts.hostname, parts.port or 80))
                kept = [line for line in header_lines if not line.lower().startswith(("connection:", "proxy-"))]
                path = parts.path + (f"?{parts.query}" if parts.query else "")
                forwarded = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""])
                upstream.sendall(forwarded.encode("latin-1") + rest)
            with upstream:
                self._pipe(client, upstream)

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket):
        def copy(source, sink):
            try:
                while chunk := source.recv(65536):
                    sink.sendall(chunk)
            except OSError:
                pass
            finally:
                for sock in (sink, source):
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        other = threading.Thread(target=copy, args=(b, a), daemon=True)
        other.start()
        copy(a, b)
        other.join(10)

    def close(self):
        self.server.close()
