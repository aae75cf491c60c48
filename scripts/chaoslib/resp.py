"""A minimal Redis (RESP2) client for the chaos suite's control connections: the faults are
Redis commands (CONFIG SET, CLIENT KILL, DEBUG SLEEP, ...) sent by a client that is not sluiced."""
import socket


class RedisError(Exception):
    pass


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Resp:
    def __init__(self, port, password=None, timeout=5.0, ssl_context=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if ssl_context is not None:  # a TLS Redis (--tls-port): the control client speaks TLS too
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname="127.0.0.1")
        self.buf = b""
        if password:
            self.command("AUTH", password)

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ConnectionError("bad RESP reply %r" % line)

    def command(self, *args):
        self.sock.sendall(encode(args))
        r = self.reply()
        if isinstance(r, RedisError):
            raise r
        return r

    def pipeline(self, commands):
        """Sends every command, then reads every reply (errors are returned, not raised)."""
        self.sock.sendall(b"".join(encode(c) for c in commands))
        return [self.reply() for _ in commands]


def info_field(port, password, section, field):
    c = Resp(port, password)
    try:
        text = c.command("INFO", section).decode()
    finally:
        c.close()
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return None
