#!/usr/bin/env python3
"""Hostile peers for bench/hostile.sh, on 127.0.0.1 only: HTTP/2 servers that misbehave in one way
each (raw frames, no HTTP/2 library, which would refuse to misbehave) and Prometheus endpoints
that would take a scraper's memory or time. Prints one JSON line with the ports, then serves until
killed. Every loop is bounded: a flood is a fixed number of frames per connection."""

import json
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


SETTINGS = frame(4, 0, 0)
# :method GET, :scheme http, :path /, :authority x (HPACK), for PUSH_PROMISE header blocks.
PUSH_BLOCK = bytes([0x82, 0x86, 0x84, 0x01, 0x01, ord("x")])
PUSH_FRAMES = 300_000

H2_MODES = {
    "goaway": SETTINGS + frame(7, 0, 0, struct.pack(">II", 0, 0)),
    "garbage": b"\x00\xff\x13garbage that is not a frame at all\r\n\r\n" * 4,
    "oversized": SETTINGS + b"\xff\xff\xff\x00\x00\x00\x00\x00\x01",
    "data0": SETTINGS + frame(0, 0, 0, b"hello"),
    "badsettings": frame(4, 0, 0, struct.pack(">HI", 4, 0xFFFFFFFF)),
    "http1": b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    "push": SETTINGS,
}


def h2_conn(conn, mode):
    try:
        conn.settimeout(10)
        got = b""
        while len(got) < 24:
            chunk = conn.recv(4096)
            if not chunk:
                return
            got += chunk
        if not got.startswith(b"PRI"):
            return
        conn.sendall(H2_MODES[mode])
        if mode == "push":
            # Promised streams 2, 4, ... on the client's stream 1, a fixed number of them.
            batch = b"".join(
                frame(5, 4, 1, struct.pack(">I", 2 * (i + 1)) + PUSH_BLOCK) for i in range(1000)
            )
            for _ in range(PUSH_FRAMES // 1000):
                conn.sendall(batch)
        while conn.recv(65536):
            pass
    except OSError:
        pass
    finally:
        conn.close()


def h2_server(mode):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(128)

    def accept():
        while True:
            c, _ = s.accept()
            threading.Thread(target=h2_conn, args=(c, mode), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return s.getsockname()[1]


def many_series():
    return "".join(f"x_{i}{{l=\"{i}\"}} 1\n" for i in range(600_000)).encode()


def huge_histogram(scale):
    lines = ["# TYPE h histogram\n"]
    lines += [f"h_bucket{{le=\"{i}\"}} {i * scale}\n" for i in range(1, 400_001)]
    lines.append(f"h_bucket{{le=\"+Inf\"}} {400_000 * scale}\nh_count {400_000 * scale}\n")
    return "".join(lines).encode()


BODIES = {
    "many": [many_series()],
    "names": ["".join(f"gen_{n}_{i} 1\n" for i in range(50_000)).encode() for n in range(20)],
    "buckets": [huge_histogram(n + 1) for n in range(4)],
    "nan": [
        f"# TYPE x histogram\nx_bucket{{le=\"NaN\"}} {n}\nx_bucket{{le=\"1\"}} NaN\nx_bucket{{le=\"+Inf\"}} {n}\n".encode()
        for n in range(20)
    ],
}
SCRAPES = {k: 0 for k in BODIES}


class Metrics(BaseHTTPRequestHandler):
    def do_GET(self):
        mode = self.path.strip("/").split("/")[0]
        if mode not in BODIES:
            self.send_response(404)
            self.end_headers()
            return
        n = SCRAPES[mode]
        SCRAPES[mode] = n + 1
        body = BODIES[mode][n % len(BODIES[mode])]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    ports = {f"h2_{m}": h2_server(m) for m in H2_MODES}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    ports["metrics"] = httpd.server_address[1]
    print(json.dumps(ports), flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
