"""A measuring gRPC client over TLS (ALPN h2), a thread of the chaos process like the HTTP probes:
ShouldRateLimit calls at a fixed rate, one at a time, on a connection reused for `reuse` calls.
HTTP/2 by hand (the frames of attacks.py), standard library only: a call counts as answered when
its response message (a RateLimitResponse, overall_code OK or OVER_LIMIT) and the end of its
stream arrive; anything else (a reset, a closed connection, a trailers-only error, a timeout) is a
failed call (status 0)."""
import socket
import threading
import time

from . import attacks
from .probes import DOMAIN, Decision

END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def _header_block(port):
    return (b"\x83\x87"  # :method POST, :scheme https (static table 3 and 7)
            + attacks._literal(4, b"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
            + attacks._literal(1, b"localhost:%d" % port)
            + attacks._literal(0, b"application/grpc", b"content-type")
            + attacks._literal(0, b"trailers", b"te"))


def _request(key, value):
    entry = attacks._field(1, key.encode()) + attacks._field(2, value.encode())
    msg = attacks._field(1, DOMAIN.encode()) + attacks._field(2, attacks._field(1, entry))
    return b"\x00" + len(msg).to_bytes(4, "big") + msg


class H2TlsConn:
    def __init__(self, port, ssl_context, timeout):
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        # A call is written as one record but a WINDOW_UPDATE or SETTINGS ack follows it: with
        # Nagle, the next call would wait for the server's delayed ACK (40 ms).
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.sock = ssl_context.wrap_socket(raw, server_hostname="localhost")
        except OSError:
            raw.close()
            raise
        if self.sock.selected_alpn_protocol() != "h2":
            self.sock.close()
            raise ConnectionError("ALPN %r, not h2" % self.sock.selected_alpn_protocol())
        self.peer = self.sock.getpeercert(binary_form=True)
        self.block = _header_block(port)
        self.buf = b""
        self.next_stream = 1
        self.sock.sendall(attacks.H2_PREFACE + attacks._frame(attacks.SETTINGS, 0, 0))

    def _frame(self):
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        length = int.from_bytes(self.buf[:3], "big")
        kind, flags = self.buf[3], self.buf[4]
        stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
        payload, self.buf = self.buf[9:9 + length], self.buf[9 + length:]
        return kind, flags, stream, payload

    def call(self, key, value):
        """One call; returns 200 (OK), 429 (OVER_LIMIT) or raises."""
        sid = self.next_stream
        self.next_stream += 2
        self.sock.sendall(attacks._frame(attacks.HEADERS, END_HEADERS, sid, self.block) +
                          attacks._frame(attacks.DATA, END_STREAM, sid, _request(key, value)))
        data = b""
        while True:
            kind, flags, stream, payload = self._frame()
            out = b""
            if kind == attacks.SETTINGS and not flags & ACK:
                out = attacks._frame(attacks.SETTINGS, ACK, 0)
            elif kind == attacks.PING and not flags & ACK:
                out = attacks._frame(attacks.PING, ACK, 0, payload)
            elif kind == attacks.GOAWAY:
                raise ConnectionError("GOAWAY")
            elif stream == sid and kind == attacks.RST_STREAM:
                raise ConnectionError("RST_STREAM")
            elif stream == sid and kind == attacks.DATA:
                data += payload
                if payload:  # give the connection's window back (the stream ends anyway)
                    out = attacks._frame(attacks.WINDOW_UPDATE, 0, 0,
                                         len(payload).to_bytes(4, "big"))
            if out:
                self.sock.sendall(out)
            if stream == sid and kind in (attacks.HEADERS, attacks.DATA) and flags & END_STREAM:
                break
        # The message: 5 bytes of gRPC framing, then RateLimitResponse; field 1 overall_code.
        if len(data) < 7 or data[5] != 0x08 or data[6] not in (1, 2):
            raise ConnectionError("no RateLimitResponse (a trailers-only error)")
        return 200 if data[6] == 1 else 429

    def close(self):
        self.sock.close()


class GrpcProbe(threading.Thread):
    """ShouldRateLimit at `rate` per second over TLS, `reuse` calls per connection. Records a
    Decision per call (status 0 for a failed one); `connections` counts connections opened and
    `peers` the server certificates (DER) they were shown, in order."""

    def __init__(self, port, ssl_context, rule_key, rate, reuse, timeout=10.0):
        super().__init__(daemon=True)
        self.port, self.ssl_context, self.rule_key = port, ssl_context, rule_key
        self.interval, self.reuse, self.timeout = 1.0 / rate, reuse, timeout
        self.decisions = []
        self.connections = 0
        self.peers = []
        self.stopping = threading.Event()

    def run(self):
        conn, used, i = None, 0, 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            sent, status, value = time.monotonic(), 0, "r%d" % i
            try:
                if conn is None or used >= self.reuse:
                    if conn is not None:
                        conn.close()
                    conn, used = None, 0
                    self.connections += 1
                    conn = H2TlsConn(self.port, self.ssl_context, self.timeout)
                    self.peers.append(conn.peer)
                status = conn.call(self.rule_key, value)
                used += 1
            except (OSError, ConnectionError, ValueError):
                if conn is not None:
                    conn.close()
                conn = None
            self.decisions.append(Decision(sent, time.monotonic(), status, False, value))
            i += 1
            # Pacing (a fixed offered load), not synchronisation.
            next_at = max(next_at + self.interval, time.monotonic() - 1.0)
            delay = next_at - time.monotonic()
            if delay > 0:
                self.stopping.wait(delay)
        if conn is not None:
            conn.close()

    def count_after(self, t):
        return sum(1 for d in list(self.decisions) if d.sent >= t and d.status in (200, 429))

    def failures(self):
        return sum(1 for d in list(self.decisions) if d.status not in (200, 429))

    def stop(self):
        self.stopping.set()
        self.join()
