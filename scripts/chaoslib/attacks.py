"""The attackers. Each runs in its own process (so it does not share the measuring clients'
interpreter lock) until `stop` is set, and adds what it sent to `count`."""
import ctypes
import multiprocessing
import os
import resource
import selectors
import socket
import ssl
import time

from . import resp
from .probes import check_body

CTX = multiprocessing.get_context("fork")
LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
PR_SET_PDEATHSIG = 1


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _attacker(parent, target, args):
    # SIGKILL when the chaos process goes away, however it ends, so no attacker outlives it.
    LIBC.prctl(PR_SET_PDEATHSIG, 9)
    if os.getppid() != parent:
        os._exit(0)
    target(*args)


class Attack:
    """Runs `target(*args, worker, stop, count)` in `procs` processes."""

    def __init__(self, target, args, procs=1):
        self.stop_event = CTX.Event()
        self.count = CTX.Value("q", 0)
        self.procs = [CTX.Process(target=_attacker, args=(
            os.getpid(), target, tuple(args) + (i, self.stop_event, self.count)), daemon=True)
            for i in range(procs)]
        for p in self.procs:
            p.start()

    def stop(self):
        self.stop_event.set()
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
        return self.count.value


def _post(body):
    return (b"POST /v1/check HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def _read_responses(sock, buf, n):
    """Reads n HTTP responses (each with Content-Length) from sock; returns the leftover bytes."""
    got = 0
    while got < n:
        head_end = buf.find(b"\r\n\r\n")
        if head_end >= 0:
            head = buf[:head_end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15:head.find(b"\r\n", at) if head.find(b"\r\n", at) > 0
                              else len(head)]) if at >= 0 else 0
            if len(buf) >= head_end + 4 + length:
                buf = buf[head_end + 4 + length:]
                got += 1
                continue
        chunk = sock.recv(262144)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _pipelined(port, body_of, batch, worker, stop, count):
    """Keep-alive connection, `batch` checks written at once, then their answers read."""
    n = worker * 1_000_000_000  # distinct values across worker processes
    sock, buf = None, b""
    while not stop.is_set():
        try:
            if sock is None:
                sock, buf = socket.create_connection(("127.0.0.1", port), timeout=5), b""
            sock.sendall(b"".join(_post(body_of(n + i)) for i in range(batch)))
            buf = _read_responses(sock, buf, batch)
            n += batch
            with count.get_lock():
                count.value += batch
        except OSError:
            if sock is not None:
                sock.close()
            sock = None
            stop.wait(0.05)  # refused or reset: back off a little before the next connection
    if sock is not None:
        sock.close()


def key_flood_body(n):
    return check_body([{"entries": [{"key": "flood", "value": "k%d" % n}]}])


def override_flood_body(n):
    return check_body([{"entries": [{"key": "flood", "value": "o%d" % n}],
                        "limit": {"requests_per_unit": (n % 1024) + 1, "unit": "day"}}])


def key_flood(port, worker, stop, count):
    _pipelined(port, key_flood_body, 64, worker, stop, count)


def override_flood(port, worker, stop, count):
    _pipelined(port, override_flood_body, 64, worker, stop, count)


def _tls_context(ca):
    return ssl.create_default_context(cafile=ca) if ca else None


def slowloris(port, conns, worker, stop, count):
    """Holds `conns` connections, each trickling a request's header lines, one line a second per
    connection, never finishing it; a connection the server closes is opened again."""
    _slowloris(port, conns, None, stop, count)


def slowloris_tls(port, conns, ca, worker, stop, count):
    """slowloris over TLS: each connection makes its handshake (trusting `ca`), then trickles."""
    _slowloris(port, conns, _tls_context(ca), stop, count)


def _open_tls(port, ctx):
    """A TLS connection through its handshake (blocking, 2 s at most), then non-blocking."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=2)
    try:
        s = ctx.wrap_socket(raw, server_hostname="localhost")
    except OSError:
        raw.close()
        raise
    s.setblocking(False)
    return s


def _slowloris(port, conns, ctx, stop, count):
    raise_fd_limit()
    socks = {}
    next_line = {}
    started = set()
    while not stop.is_set():
        now = time.monotonic()
        for i in range(conns):
            s = socks.get(i)
            if s is None:
                if ctx is not None:
                    try:
                        s = _open_tls(port, ctx)
                    except OSError:
                        continue  # refused or cut in its handshake: tried again next pass
                    socks[i], next_line[i] = s, now
                    started.discard(i)
                    with count.get_lock():
                        count.value += 1
                    continue
                try:
                    s = socket.socket()
                    s.setblocking(False)
                    s.connect_ex(("127.0.0.1", port))
                    socks[i], next_line[i] = s, now
                    started.discard(i)
                    with count.get_lock():
                        count.value += 1
                except OSError:
                    s.close()
                    continue
            if now >= next_line[i]:
                line = (b"X-Slow-%d: a\r\n" % int(now) if i in started else
                        b"POST /v1/check HTTP/1.1\r\nHost: x\r\n")
                try:
                    s.send(line)
                    started.add(i)
                    next_line[i] = now + 1.0
                except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    pass
                except OSError:
                    s.close()
                    socks.pop(i)
        # Find the ones the server closed (readable with EOF or a 503) and drop them.
        sel = selectors.DefaultSelector()
        for i, s in socks.items():
            sel.register(s, selectors.EVENT_READ, i)
        for key, _ in sel.select(timeout=0.1):
            try:
                data = key.fileobj.recv(4096)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                continue  # a TLS record that was not data (a session ticket)
            except OSError:
                data = b""
            if not data or data.startswith(b"HTTP/1.1 503"):
                key.fileobj.close()
                socks.pop(key.data, None)
        sel.close()
    for s in socks.values():
        s.close()


def connection_churn(port, worker, stop, count):
    """Opens and closes TCP connections to the HTTP port as fast as it can, sending nothing."""
    raise_fd_limit()
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.close()
            with count.get_lock():
                count.value += 1
        except OSError:
            stop.wait(0.01)


def connection_churn_tls(port, ca, worker, stop, count):
    """Opens TLS connections to the HTTP port as fast as it can, each through its handshake
    (trusting `ca`), then closes them, sending nothing: a handshake flood."""
    raise_fd_limit()
    ctx = _tls_context(ca)
    while not stop.is_set():
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=2)
            try:
                ctx.wrap_socket(raw, server_hostname="localhost").close()
            finally:
                raw.close()
            with count.get_lock():
                count.value += 1
        except OSError:
            stop.wait(0.01)


def redis_filler(port, password, worker, stop, count):
    """Writes 1 KiB junk keys into Redis (not through sluiced), so an evicting Redis must make
    room, possibly by dropping sluiced's counters."""
    c = resp.Resp(port, password)
    n = worker * 1_000_000_000
    value = b"x" * 1024
    while not stop.is_set():
        c.pipeline([("SET", "chaos:junk:%d" % (n + i), value) for i in range(100)])
        n += 100
        with count.get_lock():
            count.value += 100
    c.close()


# --- gRPC ------------------------------------------------------------------------------------
def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


# HTTP/2 by hand (RFC 9113 frames, RFC 7541 header literals without indexing, so one header
# block serves every stream): a library's per-stream bookkeeping (python3-h2's is linear in the
# open streams per new stream) cannot open thousands of streams a second.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8


def _frame(kind, flags, stream, payload=b""):
    return (len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") +
            payload)


def _literal(name_index, value, name=b""):
    """A header field without indexing: a static-table name (index < 15) or a literal name."""
    head = bytes([name_index]) + (bytes([len(name)]) + name if not name_index else b"")
    return head + bytes([len(value)]) + value


def _header_block(port):
    return (b"\x83\x86"  # :method POST, :scheme http (static table 3 and 6)
            + _literal(4, b"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
            + _literal(1, b"127.0.0.1:%d" % port)
            + _literal(0, b"application/grpc", b"content-type")
            + _literal(0, b"trailers", b"te"))


class H2Conn:
    """One client connection that opens calls and never reads their answers (receive window 0)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        # SETTINGS: ENABLE_PUSH 0, INITIAL_WINDOW_SIZE 0.
        self.sock.sendall(H2_PREFACE + _frame(SETTINGS, 0, 0, b"\x00\x02\x00\x00\x00\x00"
                                                              b"\x00\x04\x00\x00\x00\x00"))
        self.buf = b""
        self.window = 65535            # the server's connection receive window for our DATA
        self.max_streams = 2 ** 31
        self.next_stream = 1
        self.open = 0
        self.closed = False

    def pump(self, wait):
        """Reads what the server sent (waiting up to `wait` s for something): settings, window
        updates, pings, resets, goaway."""
        self.sock.settimeout(wait if wait > 0 else 0.0)
        try:
            data = self.sock.recv(1 << 20)
            if not data:
                self.closed = True
                return
            self.buf += data
        except (BlockingIOError, socket.timeout):
            return
        except OSError:
            self.closed = True
            return
        out = []
        while len(self.buf) >= 9:
            length = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + length:
                break
            kind, flags = self.buf[3], self.buf[4]
            stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            payload, self.buf = self.buf[9:9 + length], self.buf[9 + length:]
            if kind == SETTINGS and not flags & 1:
                for i in range(0, len(payload) - 5, 6):
                    ident, value = int.from_bytes(payload[i:i + 2], "big"), int.from_bytes(
                        payload[i + 2:i + 6], "big")
                    if ident == 3:
                        self.max_streams = value
                out.append(_frame(SETTINGS, 1, 0))
            elif kind == PING and not flags & 1:
                out.append(_frame(PING, 1, 0, payload))
            elif kind == WINDOW_UPDATE and stream == 0:
                self.window += int.from_bytes(payload, "big") & 0x7FFFFFFF
            elif kind == RST_STREAM:
                self.open -= 1
            elif kind == GOAWAY:
                self.closed = True
        if out:
            try:
                self.sock.sendall(b"".join(out))
            except OSError:
                self.closed = True

    def open_calls(self, n, header_block, body_of):
        """Opens up to n calls within the server's limits; returns how many it opened."""
        frames, opened = [], 0
        while opened < n and self.open < self.max_streams:
            body = body_of()
            if self.window < len(body):
                break
            frames.append(_frame(HEADERS, 4, self.next_stream, header_block))
            frames.append(_frame(DATA, 1, self.next_stream, body))
            self.window -= len(body)
            self.next_stream += 2
            self.open += 1
            opened += 1
        if frames:
            try:
                self.sock.settimeout(5)
                self.sock.sendall(b"".join(frames))
            except OSError:
                self.closed = True
        return opened

    def close(self):
        self.sock.close()


def rate_limit_request(value):
    """envoy.service.ratelimit.v3.RateLimitRequest{domain, descriptors[{entries[{key, value}]}]}
    in protobuf wire format, framed as a gRPC message."""
    entry = _field(1, b"flood") + _field(2, value.encode())
    msg = _field(1, b"chaos") + _field(2, _field(1, entry))
    return b"\x00" + len(msg).to_bytes(4, "big") + msg


def grpc_stream_flood(port, conns, streams, worker, stop, count):
    """`conns` HTTP/2 connections, each opening `streams` ShouldRateLimit calls with a whole
    request but a zero receive window: the server can never send the answers, so each call
    stays open. Held 2 s, then the connections are closed and it starts again (rounds)."""
    raise_fd_limit()
    block = _header_block(port)
    n = [worker * 1_000_000_000]

    def body():
        n[0] += 1
        return rate_limit_request("g%d" % n[0])

    while not stop.is_set():
        live = []
        for _ in range(conns):
            try:
                live.append(H2Conn(port))
            except OSError:
                pass
        want = {id(c): streams for c in live}
        deadline = time.monotonic() + 5
        while not stop.is_set() and time.monotonic() < deadline:
            busy = False
            for c in live:
                if c.closed or want[id(c)] == 0:
                    continue
                c.pump(0)
                got = c.open_calls(min(want[id(c)], 500), block, body)
                want[id(c)] -= got
                busy = busy or got > 0
                with count.get_lock():
                    count.value += got
            if not busy:
                if all(c.closed or want[id(c)] == 0 for c in live):
                    break
                for c in live:  # blocked on the server's window or stream limit: read
                    if not c.closed and want[id(c)]:
                        c.pump(0.05)
        hold_until = time.monotonic() + 2.0
        while not stop.is_set() and time.monotonic() < hold_until:
            for c in live:
                if not c.closed:
                    c.pump(0)  # answer the server's pings, so it keeps the calls
            stop.wait(0.1)
        for c in live:
            c.close()
