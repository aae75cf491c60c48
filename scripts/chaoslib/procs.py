"""The real processes under test: a redis-server and a sluiced, each on loopback, each with its
files in the run's temporary directory, each stopped by its own pid (never by name)."""
import os
import re
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request

from . import resp


# Prefix of every command: the process gets SIGKILL when the chaos process goes away, however
# it ends (PR_SET_PDEATHSIG, set by util-linux's setpriv, not by a preexec_fn: the chaos process
# has threads).
DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL"]


def wait_until(what, predicate, timeout, interval=0.02):
    """Polls predicate() until it is truthy (returns its value) or the deadline passes (raises)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError("chaos: timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestCerts:
    """The certificates of tests/support/make-test-certs, made in `dir` for one row: a CA,
    server.pem (127.0.0.1 and localhost) and the rotated server2.pem."""

    def __init__(self, repo, tmp):
        self.dir = os.path.join(tmp, "certs")
        subprocess.run([os.path.join(repo, "tests", "support", "make-test-certs"), self.dir],
                       check=True, stdout=subprocess.DEVNULL)
        self.ca = self.path("ca.pem")

    def path(self, name):
        return os.path.join(self.dir, name)

    def client_context(self, alpn=None):
        """A client context that trusts the test CA and checks the server's name."""
        ctx = ssl.create_default_context(cafile=self.ca)
        if alpn:
            ctx.set_alpn_protocols(alpn)
        return ctx

    def fingerprint(self, name):
        """The DER bytes of the leaf certificate in `name` (what a client sees as the peer)."""
        with open(self.path(name)) as f:
            return ssl.PEM_cert_to_DER_cert(f.read())


class RedisProc:
    """redis-server on 127.0.0.1:port, its data directory `dir` (AOF there when persistent);
    with `certs`, TLS only (--port 0 --tls-port port, server.pem, clients not asked for a
    certificate)."""

    def __init__(self, tmp, name, extra=(), password=None, persistent=False, certs=None):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir, exist_ok=True)
        self.password = password
        self.certs = certs
        self.ssl_context = certs.client_context() if certs else None
        self.args = ["--bind", "127.0.0.1", "--dir", self.dir, "--save", "", "--daemonize", "no",
                     "--loglevel", "warning", "--enable-debug-command", "yes",
                     "--appendonly", "yes" if persistent else "no"]
        if persistent:
            self.args += ["--appendfsync", "always"]
        if password:
            self.args += ["--requirepass", password]
        self.args += list(extra)
        self.proc = None
        self.port = None
        for _ in range(5):  # a free port can be taken before redis binds it: try another
            if self.start(free_port()):
                return
        raise RuntimeError("chaos: redis-server did not start (log: %s/redis.log)" % self.dir)

    def start(self, port):
        """Starts it on `port` (again, after a kill: the same directory, so the AOF if any)."""
        self.port = port
        log = open(os.path.join(self.dir, "redis.log"), "ab")
        listen = ["--port", str(port)]
        if self.certs:
            listen = ["--port", "0", "--tls-port", str(port),
                      "--tls-cert-file", self.certs.path("server.pem"),
                      "--tls-key-file", self.certs.path("server.key"),
                      "--tls-ca-cert-file", self.certs.ca, "--tls-auth-clients", "no"]
        self.proc = subprocess.Popen(DIE_WITH_PARENT + ["redis-server"] + listen + self.args,
                                     stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        try:
            wait_until("redis-server on port %d" % port,
                       lambda: self.proc.poll() is not None or self.answers(), 10)
        except TimeoutError:
            self.kill()
            return False
        return self.proc.poll() is None

    def answers(self):
        try:
            c = resp.Resp(self.port, self.password, timeout=0.5, ssl_context=self.ssl_context)
            try:
                return c.command("PING") == "PONG"
            finally:
                c.close()
        except (OSError, resp.RedisError):
            return False

    def client(self):
        return resp.Resp(self.port, self.password, ssl_context=self.ssl_context)

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        if self.proc:
            self.proc.wait()

    def url(self, password=None):
        pw = password if password is not None else self.password
        return "%s://%s127.0.0.1:%d" % ("rediss" if self.certs else "redis",
                                         (":%s@" % pw) if pw else "", self.port)

    def sluiced_args(self):
        """What sluiced needs to reach it: the CA of a TLS Redis."""
        return ["--redis-tls-ca", self.certs.ca] if self.certs else []


class SluicedProc:
    """build/bin/sluiced with --http 127.0.0.1:0 (the port is read from its log) and optionally
    --grpc 127.0.0.1:0 (likewise). With `ssl_context` its listeners speak TLS (the --tls-* flags
    are in `extra`): the probes of this class use that context."""

    def __init__(self, binary, tmp, config, store, grpc=False, extra=(), ssl_context=None):
        self.ssl_context = ssl_context
        self.scheme = "https" if ssl_context else "http"
        self.log_path = os.path.join(tmp, "sluiced.log")
        log = open(self.log_path, "ab")
        args = [binary, "--config", config, "--http", "127.0.0.1:0",
                "--grpc", "127.0.0.1:0" if grpc else "off", "--store", store,
                "--threads", "2"] + list(extra)
        self.proc = subprocess.Popen(DIE_WITH_PARENT + args, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        log.close()
        self.stopped_by_us = False
        self.http_port = int(wait_until("sluiced's http port", lambda: self._logged(
            r"http: listening on 127\.0\.0\.1:(\d+)"), 20))
        self.grpc_port = None
        if grpc:
            self.grpc_port = int(wait_until("sluiced's grpc port", lambda: self._logged(
                r"grpc: listening on port (\d+)"), 20))
        wait_until("sluiced /readyz", self.ready, 20)

    def _logged(self, pattern):
        if self.proc.poll() is not None:
            last = ([l for l in self.log().splitlines() if l.strip()] or ["(no log)"])[-1]
            raise RuntimeError("sluiced exited at start (%d): %s" % (self.proc.returncode, last))
        m = re.search(pattern, self.log())
        return m and m.group(1)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def get(self, path, timeout=2):
        try:
            url = "%s://127.0.0.1:%d%s" % (self.scheme, self.http_port, path)
            with urllib.request.urlopen(url, timeout=timeout, context=self.ssl_context) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def ready(self):
        return self.get("/readyz") == 200

    def alive(self):
        return self.proc.poll() is None

    def peak_rss_kib(self):
        """VmHWM: the peak resident set of the process since it started."""
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def stop(self):
        """SIGTERM, then SIGKILL if it has not exited after its grace; returns its exit code."""
        if self.proc.poll() is None:
            self.stopped_by_us = True
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
