"""The fault matrix: what each scenario does to Redis or to sluiced, when its fault starts and
when it ends. `begin(run)` starts the fault; `end(run)` ends it and returns the monotonic time
at which it had ended (Redis answering again, the attack stopped, ...)."""
import os
import shutil
import signal
import socket
import sys
import threading
import time

from . import attacks
from .grpc_probe import GrpcProbe
from .probes import Probe
from .procs import wait_until


class Scenario:
    name = ""
    description = ""
    failure_modes = ("open", "closed")  # the failure mode matters: a row for each
    epochs = 1              # how many times Redis starts from empty during the run
    hold = True             # the fault lasts the run's fault time (else: as short as it can)
    redis_extra = ()
    redis_persistent = False
    redis_password = None
    grpc = False
    quiet = False           # the clients send nothing while the fault lasts
    is_attack = False       # an attack on sluiced (its length: the run's attack time)
    store = "redis"         # or "memory": sluiced's own store, no Redis at all
    redis_tls = False       # Redis speaks only TLS (the test certificates), sluiced rediss://
    tls_listeners = False   # sluiced's listeners speak TLS; the measuring clients too
    settle_s = None         # degraded decisions allowed this long after the fault ended
                            # (None: sluiced's reconnect pace, RECONNECT_PACE_S in run.py)

    def sluiced_args(self, run):
        """More sluiced flags (run.tmp and run.certs are ready)."""
        return []

    def probes(self, run):
        """More measuring clients, beside the good and quota ones."""
        return []

    def checks(self, run):
        """The scenario's own pass/fail, once the clients have stopped: what failed, if any."""
        return []

    def begin(self, run):
        pass

    def end(self, run):
        return time.monotonic()


class RedisKilled(Scenario):
    name = "redis-killed"
    description = ("SIGKILL redis-server, keep it down for the fault time, start it again on the "
                   "same port from its append-only file (appendfsync always: no counter is lost); "
                   "the fault ends when it answers PING")
    redis_persistent = True

    def begin(self, run):
        run.redis.proc.kill()
        run.redis.proc.wait()

    def end(self, run):
        if not run.redis.start(run.redis.port):
            raise RuntimeError("chaos: redis-server did not start again")
        return time.monotonic()


class RedisTlsKilled(RedisKilled):
    name = "redis-tls-killed"
    description = ("redis-killed with a Redis that speaks only TLS (--tls-port, the "
                   "certificates of tests/support/make-test-certs; sluiced: rediss:// and "
                   "--redis-tls-ca): every reconnection is a new TLS handshake, verified. Every "
                   "decision sent during the outage that is marked degraded follows the failure "
                   "mode (open: 200, "
                   "closed: 429), some are; every decision sent 5 s after Redis answers again "
                   "is exact")
    redis_tls = True
    # On a loaded 2-core machine (CI beside other jobs) a reconnection, TLS handshake included,
    # can take far more than the 25 ms pace: the row asks for exact decisions within a generous
    # deadline instead.
    settle_s = 5.0

    def sluiced_args(self, run):
        # Generous Redis timeouts for the same reason: with the default 50 ms a starved machine
        # times out commands of a healthy Redis, which are degraded decisions that say nothing
        # of TLS. A killed Redis refuses at once: the outage needs no timeout to be seen.
        return ["--redis-command-timeout-ms", "1000", "--redis-connect-timeout-ms", "2000"]

    def checks(self, run):
        during = [d for p in run.probes for d in p.decisions
                  if run.t_fs <= d.sent < run.t_fe and d.status in (200, 429)]
        want = 200 if run.mode == "open" else 429
        wrong = sum(1 for d in during if d.degraded and d.status != want)
        bad = [] if any(d.degraded for d in during) else [
            "no decision during the outage was marked degraded"]
        if wrong:
            bad.append("%d degraded decisions during the outage answered other than fail_%s" % (
                wrong, run.mode))
        return bad


class RedisRestartedIdle(Scenario):
    name = "redis-restarted-idle"
    description = ("no traffic: the clients stop; SIGKILL redis-server and start it again at "
                   "once from its append-only file (no counter lost); the clients send again "
                   "once it has answered PING for the fault time. Every pooled connection "
                   "sluiced holds is then dead, and no request has told it so")
    redis_persistent = True
    quiet = True
    hold = False

    def begin(self, run):
        run.redis.proc.kill()
        run.redis.proc.wait()
        if not run.redis.start(run.redis.port):
            raise RuntimeError("chaos: redis-server did not start again")

    def end(self, run):
        time.sleep(run.fault_s)  # Redis has been back this long when the next request comes
        return time.monotonic()


class RedisPaused(Scenario):
    name = "redis-paused"
    description = "SIGSTOP redis-server for the fault time (a hung server), then SIGCONT"

    def begin(self, run):
        run.redis.signal(signal.SIGSTOP)

    def end(self, run):
        run.redis.signal(signal.SIGCONT)
        return time.monotonic()


class RedisRestartedEmpty(Scenario):
    name = "redis-restarted-empty"
    description = ("SHUTDOWN NOSAVE and start again at once on the same port with no data: every "
                   "counter is gone, so the limit admits its quota once more (counted: 2 epochs); "
                   "the fault ends when it answers PING")
    epochs = 2
    hold = False

    def begin(self, run):
        c = run.redis.client()
        try:
            c.command("SHUTDOWN", "NOSAVE")
        except (OSError, ConnectionError):
            pass  # it closes the connection as it exits
        run.redis.proc.wait()

    def end(self, run):
        if not run.redis.start(run.redis.port):
            raise RuntimeError("chaos: redis-server did not start again")
        return time.monotonic()


class DebugSleep(Scenario):
    name = "redis-debug-sleep"
    description = ("DEBUG SLEEP for the fault time from another client: Redis answers nothing "
                   "meanwhile; the fault ends when that command returns")

    def begin(self, run):
        self.done = None
        c = run.redis.client()

        def sleep():
            c.sock.settimeout(run.fault_s + 30)
            c.command("DEBUG", "SLEEP", "%.3f" % run.fault_s)
            self.done = time.monotonic()
            c.close()

        self.thread = threading.Thread(target=sleep, daemon=True)
        self.thread.start()

    def end(self, run):
        self.thread.join()
        return self.done


class ClientKill(Scenario):
    name = "redis-client-kill"
    description = ("CLIENT KILL TYPE normal (every client connection but the killer's) every "
                   "100 ms for the fault time; the fault ends with the last kill")
    hold = False

    def begin(self, run):
        c = run.redis.client()
        deadline = time.monotonic() + run.fault_s
        while True:
            c.command("CLIENT", "KILL", "TYPE", "normal")
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)  # the fault's cadence
        c.close()


class Evicting(Scenario):
    name = "redis-evicting"
    description = ("Redis with maxmemory 3mb and allkeys-lru from the start; for the fault time "
                   "a client writes 1 KiB junk keys into it (not through sluiced), so it evicts; "
                   "the fault ends when the writer stops and maxmemory is lifted")
    redis_extra = ("--maxmemory", "3mb", "--maxmemory-policy", "allkeys-lru")

    def begin(self, run):
        self.attack = attacks.Attack(attacks.redis_filler, (run.redis.port, run.redis.password))

    def end(self, run):
        self.attack.stop()
        c = run.redis.client()
        c.command("CONFIG", "SET", "maxmemory", "0")
        c.close()
        return time.monotonic()


class WrongPassword(Scenario):
    name = "redis-wrong-password"
    description = ("Redis with requirepass; the password is changed (CONFIG SET requirepass) and "
                   "every client disconnected, so sluiced's password is wrong when it reconnects; "
                   "the fault ends when the old password is set again")
    redis_password = "chaos-secret"

    def begin(self, run):
        c = run.redis.client()
        c.command("CONFIG", "SET", "requirepass", "rotated-elsewhere")
        c.command("CLIENT", "KILL", "TYPE", "normal")
        self.control = c  # still authenticated: it ends the fault

    def end(self, run):
        self.control.command("CONFIG", "SET", "requirepass", self.__class__.redis_password)
        self.control.close()
        return time.monotonic()


class AttackScenario(Scenario):
    is_attack = True
    """A client attack on sluiced itself; Redis stays healthy. The failure mode matters only if
    Redis fails, so one row (fail_open)."""
    failure_modes = ("open",)
    procs = 1

    def args(self, run):
        return (run.sluiced.http_port,)

    def begin(self, run):
        self.attack = attacks.Attack(self.target, self.args(run), self.procs)

    def end(self, run):
        run.attack_volume = self.attack.stop()
        return time.monotonic()


class Slowloris(AttackScenario):
    name = "slowloris"
    description = ("1100 HTTP connections (over the 1024 connection cap), each trickling one "
                   "header line a second and never finishing its request; reopened when closed")
    target = staticmethod(attacks.slowloris)

    def args(self, run):
        return (run.sluiced.http_port, 1100)


class ConnectionFlood(AttackScenario):
    name = "connection-flood"
    description = ("2 processes opening and closing TCP connections to the HTTP port as fast as "
                   "they can")
    target = staticmethod(attacks.connection_churn)
    procs = 2


class TlsAttack:
    """Mixed into an attack: sluiced's listeners speak TLS (the test pair), and so do the
    measuring clients and the attacker."""
    tls_listeners = True

    def sluiced_args(self, run):
        # Redis with generous timeouts, as in redis-tls-killed: the handshakes take the starved
        # machine's CPU from Redis too, and a command of a healthy Redis timed out at 50 ms is a
        # degraded decision that says nothing of the listener under attack.
        return ["--tls-cert", run.certs.path("chain.pem"), "--tls-key",
                run.certs.path("server.key"), "--redis-command-timeout-ms", "1000",
                "--redis-connect-timeout-ms", "2000"]


class SlowlorisTls(TlsAttack, Slowloris):
    name = "slowloris-tls"
    description = ("slowloris over TLS: each of the 1100 connections makes its TLS handshake "
                   "first (blocking, one at a time), then trickles its header lines")
    target = staticmethod(attacks.slowloris_tls)

    def args(self, run):
        return (run.sluiced.http_port, 1100, run.certs.ca)


class ConnectionFloodTls(TlsAttack, ConnectionFlood):
    name = "connection-flood-tls"
    description = ("2 processes opening TLS connections to the HTTP port as fast as they can, "
                   "each through its handshake, then closing it: a handshake flood")
    target = staticmethod(attacks.connection_churn_tls)

    def args(self, run):
        return (run.sluiced.http_port, run.certs.ca)


class KeyFlood(AttackScenario):
    name = "key-flood"
    description = ("2 processes, each a keep-alive connection with 64 pipelined checks at a time, "
                   "every check a new value of a limited key (a new counter in Redis)")
    target = staticmethod(attacks.key_flood)
    procs = 2


class OverrideFlood(AttackScenario):
    name = "override-flood"
    description = ("as key-flood, and every descriptor carries its own limit, "
                   "`{\"requests_per_unit\": (n % 1024) + 1, \"unit\": \"day\"}`")
    target = staticmethod(attacks.override_flood)
    procs = 2


class KeyFloodMemory(KeyFlood):
    store = "memory"
    description = "key-flood against sluiced with its memory store (no Redis)"


class OverrideFloodMemory(OverrideFlood):
    store = "memory"
    description = ("override-flood against sluiced with its memory store (no Redis): each new "
                   "rate is a new limiter in sluiced itself (issue 11, items 1 and 3)")


class GrpcStreamFlood(AttackScenario):
    name = "grpc-stream-flood"
    description = ("raw HTTP/2 (frames written by the script): 10 connections, each opening up to "
                   "5000 (quick: 1000) ShouldRateLimit calls with a zero receive window, held 2 s, "
                   "then closed; rounds")
    grpc = True
    target = staticmethod(attacks.grpc_stream_flood)

    def args(self, run):
        return (run.sluiced.grpc_port, 10, 1000 if run.quick else 5000)


class CertRotated(Scenario):
    name = "cert-rotated"
    description = ("TLS on HTTP and gRPC (memory store); beside the good and quota clients, a "
                   "keep-alive and a new-connection-per-request client on each port. The served "
                   "pair is replaced by rename (cert, then key) with the rotated one (server2), "
                   "until new connections on both ports are shown it; then renamed back with a "
                   "SIGHUP at once, until they are shown the first again. Fails on any failed "
                   "request and on a keep-alive connection that had to be replaced")
    store = "memory"
    failure_modes = ("open",)
    grpc = True
    tls_listeners = True
    hold = False

    def sluiced_args(self, run):
        served = os.path.join(run.tmp, "served")
        os.makedirs(served)
        self.cert, self.key = os.path.join(served, "cert.pem"), os.path.join(served, "key.pem")
        self._install(run, "server.pem", "server.key")
        return ["--tls-cert", self.cert, "--tls-key", self.key]

    def probes(self, run):
        http_ctx, grpc_ctx = run.certs.client_context(), run.certs.client_context(["h2"])
        http, grpc = run.sluiced.http_port, run.sluiced.grpc_port
        self.kept = [Probe(http, "good", lambda i: "kept", 40, reuse=1 << 62, timeout=10,
                           ssl_context=http_ctx),
                     GrpcProbe(grpc, grpc_ctx, "good", 40, reuse=1 << 62)]
        self.fresh = [Probe(http, "good", lambda i: "fresh", 15, reuse=1, timeout=10,
                            ssl_context=http_ctx),
                      GrpcProbe(grpc, grpc_ctx, "good", 15, reuse=1)]
        return self.kept + self.fresh

    def _install(self, run, cert, key):
        """Writes the pair beside the served files, then renames it over them: cert, then key
        (a watcher may see the cert alone, which does not match the key: the old pair stays)."""
        with open(self.cert + ".new", "w") as f:
            for name in (cert, "ca.pem"):  # the leaf and its chain, as chain.pem is made
                with open(run.certs.path(name)) as part:
                    f.write(part.read())
        shutil.copy(run.certs.path(key), self.key + ".new")
        os.rename(self.cert + ".new", self.cert)
        os.rename(self.key + ".new", self.key)

    def _served(self, run):
        """The certificates a new connection to each port is shown (HTTP, gRPC)."""
        seen = []
        for port, alpn in ((run.sluiced.http_port, None), (run.sluiced.grpc_port, ["h2"])):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                    with run.certs.client_context(alpn).wrap_socket(
                            raw, server_hostname="localhost") as s:
                        seen.append(s.getpeercert(binary_form=True))
            except OSError:
                seen.append(None)
        return seen

    def _rotate(self, run, cert, key, sighup):
        want = run.certs.fingerprint(cert)
        t = time.monotonic()
        self._install(run, cert, key)
        if sighup:
            run.sluiced.proc.send_signal(signal.SIGHUP)
        wait_until("new connections shown %s" % cert,
                   lambda: self._served(run) == [want, want], 30, interval=0.05)
        return time.monotonic() - t

    def begin(self, run):
        self.by_watcher_s = self._rotate(run, "server2.pem", "server2.key", sighup=False)
        # Served long enough for the new-connection clients to be shown it a few times.
        rotated = run.certs.fingerprint("server2.pem")
        wait_until("new-connection clients shown the rotated pair",
                   lambda: all(p.peers.count(rotated) >= 3 for p in self.fresh), 30,
                   interval=0.05)
        self.by_sighup_s = self._rotate(run, "server.pem", "server.key", sighup=True)

    def checks(self, run):
        bad = []
        for p in run.probes:
            if p.failures():
                bad.append("%d of %d requests failed (%s)" % (
                    p.failures(), len(p.decisions), type(p).__name__))
        for p in self.kept:
            if p.connections != 1:
                bad.append("a keep-alive %s opened %d connections" % (
                    type(p).__name__, p.connections))
        first, rotated = run.certs.fingerprint("server.pem"), run.certs.fingerprint("server2.pem")
        for p in self.fresh:
            if rotated not in p.peers or p.peers[-1] != first:
                bad.append("the new connections of a %s were not shown the rotated pair, then "
                           "the first again" % type(p).__name__)
        for p in self.kept:
            if p.peers != [first]:
                bad.append("a keep-alive %s was shown %d certificates" % (
                    type(p).__name__, len(p.peers)))
        print("chaos: cert-rotated: shown the rotated pair after %.2f s (file watcher), the "
              "first again after %.2f s (rename + SIGHUP); %d keep-alive and %d new-connection "
              "requests, %d failed" % (
                  self.by_watcher_s, self.by_sighup_s,
                  sum(len(p.decisions) for p in self.kept),
                  sum(len(p.decisions) for p in self.fresh),
                  sum(p.failures() for p in self.kept + self.fresh)),
              file=sys.stderr, flush=True)
        return bad


ALL = [RedisKilled(), RedisRestartedIdle(), RedisPaused(), RedisRestartedEmpty(), DebugSleep(),
       ClientKill(), Evicting(), WrongPassword(), RedisTlsKilled(), CertRotated(), Slowloris(),
       SlowlorisTls(), ConnectionFlood(), ConnectionFloodTls(), KeyFlood(), KeyFloodMemory(),
       OverrideFlood(), OverrideFloodMemory(), GrpcStreamFlood()]
