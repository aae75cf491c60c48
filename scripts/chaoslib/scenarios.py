"""The fault matrix: what each scenario does to Redis or to sluiced, when its fault starts and
when it ends. `begin(run)` starts the fault; `end(run)` ends it and returns the monotonic time
at which it had ended (Redis answering again, the attack stopped, ...)."""
import signal
import threading
import time

from . import attacks


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


ALL = [RedisKilled(), RedisRestartedIdle(), RedisPaused(), RedisRestartedEmpty(), DebugSleep(),
       ClientKill(), Evicting(), WrongPassword(), Slowloris(), ConnectionFlood(), KeyFlood(), KeyFloodMemory(),
       OverrideFlood(), OverrideFloodMemory(), GrpcStreamFlood()]
