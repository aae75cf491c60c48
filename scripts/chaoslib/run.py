"""One row of the table: a fresh redis-server and sluiced, the measuring clients, the fault,
then the measurements."""
import math
import os
import shutil
import tempfile
import time
import urllib.request

from .procs import RedisProc, SluicedProc, TestCerts, wait_until
from .probes import Probe

# A connection Redis refused (down, or a wrong password) is tried again at most every 25 ms
# (sluiced's reconnect pace, docs/redis.md): a request in the first 25 ms after the fault ended
# may still find its connection waiting. The pass/fail check allows that pace, doubled for the
# round trip; the table counts every degraded decision after the fault all the same.
RECONNECT_PACE_S = 0.05
QUOTA = 10          # per quota key, per day (token bucket: capacity 10, refill 10/day)
QUOTA_KEYS = 20
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = """\
# Written by scripts/chaos: one domain, every limit with failure_mode {mode}.
domain: chaos
descriptors:
  - key: good                 # the good client: a limit it never reaches
    rate_limit: {{unit: second, requests_per_unit: 100000, failure_mode: {mode}}}
  - key: quota                # the quota client: {quota} a day per value, exhausted in seconds
    rate_limit: {{unit: day, requests_per_unit: {quota}, failure_mode: {mode}}}
  - key: flood                # the key floods' values
    rate_limit: {{unit: minute, requests_per_unit: 10, failure_mode: {mode}}}
"""


class Timing:
    def __init__(self, quick):
        self.warm_s = 1.5 if quick else 3.0      # before the fault
        self.fault_s = 1.5 if quick else 5.0     # a Redis fault's length
        self.attack_s = 4.0 if quick else 20.0   # an attack's length
        self.after_s = 1.5 if quick else 5.0     # measured after the fault ended
        self.min_after = 10                      # answered decisions per client after the fault


def p99(values):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, math.ceil(0.99 * len(v)) - 1)]


def run_one(scenario, mode, binary, quick, log_dir):
    timing = Timing(quick)
    tmp = tempfile.mkdtemp(prefix="sluice-chaos-")
    row = {"scenario": scenario.name, "store": scenario.store, "mode": "fail_" + mode}
    redis = sluiced = None
    probes = []

    class Run:
        pass

    run = Run()
    run.tmp, run.quick, run.attack_volume, run.redis, run.sluiced = tmp, quick, None, None, None
    run.mode = mode
    run.fault_s = timing.attack_s if scenario.is_attack else timing.fault_s
    run.certs = None
    try:
        if scenario.redis_tls or scenario.tls_listeners:
            run.certs = TestCerts(REPO, tmp)
        if scenario.store == "redis":
            redis = RedisProc(tmp, "redis", scenario.redis_extra, scenario.redis_password,
                              scenario.redis_persistent,
                              certs=run.certs if scenario.redis_tls else None)
        config = os.path.join(tmp, "chaos.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.format(mode=mode, quota=QUOTA))
        extra = (redis.sluiced_args() if redis else []) + scenario.sluiced_args(run)
        sluiced = SluicedProc(binary, tmp, config, redis.url() if redis else "memory",
                              grpc=scenario.grpc, extra=extra,
                              ssl_context=run.certs.client_context()
                              if scenario.tls_listeners else None)
        run.redis, run.sluiced = redis, sluiced
        ctx = sluiced.ssl_context
        good = Probe(sluiced.http_port, "good", lambda i: "g", rate=100, ssl_context=ctx)
        quota = Probe(sluiced.http_port, "quota", lambda i: "q%d" % (i % QUOTA_KEYS), rate=100,
                      ssl_context=ctx)
        probes = [good, quota] + scenario.probes(run)
        run.probes = probes
        t_start = time.monotonic()
        for p in probes:
            p.start()
        def answered_since(t, seconds):
            if not sluiced.alive():
                raise RuntimeError("sluiced exited during the run")
            return (time.monotonic() >= t + seconds and
                    all(p.count_after(t) >= timing.min_after for p in probes))

        wait_until("decisions before the fault", lambda: answered_since(t_start, timing.warm_s),
                   timing.warm_s + 15)

        if scenario.quiet:
            for p in probes:
                p.pause()
        t_fs = time.monotonic()
        scenario.begin(run)
        if scenario.hold:
            time.sleep(run.fault_s)  # the fault's length (a parameter of the fault, not a wait)
        t_fe = scenario.end(run)
        if scenario.quiet:
            for p in probes:
                p.resume()
        run.t_fs, run.t_fe = t_fs, t_fe
        settle = scenario.settle_s or 0.0  # a scenario's allowance for exact decisions again
        wait_until("decisions after the fault", lambda: answered_since(t_fe + settle,
                                                                         timing.after_s),
                   settle + timing.after_s + 15)
        for p in probes:
            p.stop()
        t_end = time.monotonic()

        row.update(measure(good, quota, t_start, t_fs, t_fe, t_end, scenario.epochs,
                           scenario.settle_s or RECONNECT_PACE_S))
        row["settle_s"] = scenario.settle_s or RECONNECT_PACE_S
        row["fault_s"] = t_fe - t_fs
        row["attack"] = run.attack_volume
        row["alive"] = sluiced.alive()
        row["exit"] = sluiced.proc.returncode
        row["peak_rss_mib"] = (sluiced.peak_rss_kib() or 0) / 1024
        row["eviction_reported"] = eviction_reported(sluiced)
        row["checks"] = scenario.checks(run)
    except Exception as e:  # noqa: BLE001 -- any failure to measure is this row's failure
        row["error"] = (str(e).splitlines() or [type(e).__name__])[0]
        row["alive"] = sluiced.alive() if sluiced else False
        row["exit"] = sluiced.proc.returncode if sluiced else None
        row["peak_rss_mib"] = (sluiced.peak_rss_kib() or 0) / 1024 if sluiced else None
    finally:
        for p in probes:
            if p.is_alive():
                p.stop()
        if sluiced:
            sluiced.stop()
            if log_dir:
                shutil.copy(sluiced.log_path, os.path.join(log_dir, "%s-%s-%s.log" % (
                    scenario.name, scenario.store, row["mode"])))
        if redis:
            redis.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return row


def measure(good, quota, t_start, t_fs, t_fe, t_end, epochs, settle_s):
    decisions = good.decisions + quota.decisions
    answered = [d for d in decisions if d.status in (200, 429)]
    during = [d for d in answered if t_fs <= d.sent < t_fe]
    after = [d for d in answered if d.sent >= t_fe]
    first_ok = min((d.done for d in after if not d.degraded), default=None)
    last_degraded = max((d.done for d in after if d.degraded), default=None)
    good_during = [d for d in good.decisions if t_fs <= d.sent < t_fe]
    good_after = [d for d in good.decisions if d.sent >= t_fe]

    # The oracle: a token bucket of capacity QUOTA refilled QUOTA a day admits at most
    # QUOTA + QUOTA * t / 86400 in t seconds, per Redis lifetime (epoch). Only admissions sluiced
    # did not flag as degraded count: a degraded admission (fail_open) is declared, not silent.
    elapsed = t_end - t_start
    allowed = epochs * QUOTA + math.ceil(QUOTA * elapsed / 86400)
    admitted = {}
    for d in quota.decisions:
        if d.status == 200 and not d.degraded:
            admitted[d.key] = admitted.get(d.key, 0) + 1
    over = sum(max(0, n - allowed) for n in admitted.values())
    return {
        "degraded_during": sum(d.degraded for d in during),
        "degraded_after": sum(d.degraded for d in after),
        "degraded_late": sum(d.degraded for d in after if d.sent >= t_fe + settle_s),
        "decisions_after": len(after),
        "recovery_ms": None if first_ok is None else (first_ok - t_fe) * 1000,
        "last_degraded_ms": None if last_degraded is None else (last_degraded - t_fe) * 1000,
        "admitted": sum(admitted.values()),
        "allowed": allowed * QUOTA_KEYS,
        "over": over,
        "good_p99_ms": p99([(d.done - d.sent) * 1000 for d in good_during
                            if d.status in (200, 429)]),
        "good_errors_during": sum(d.status not in (200, 429) for d in good_during),
        "good_errors_after": sum(d.status not in (200, 429) for d in good_after),
    }


def eviction_reported(sluiced):
    """Whether sluiced's metrics say Redis can evict (or has evicted) its keys (issue 11, item
    2): an over-admission it reports is loud, not silent."""
    try:
        with urllib.request.urlopen("%s://127.0.0.1:%d/metrics" % (
                sluiced.scheme, sluiced.http_port), timeout=2, context=sluiced.ssl_context) as r:
            text = r.read().decode()
    except OSError:
        return False
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("sluice_store_redis_eviction_unsafe",
                    "sluice_store_redis_evicted_keys_total") and float(value or 0) > 0:
            return True
    return False


def verdict(row):
    """The quick mode's pass/fail, as issue 11 states it: any over-admission, any crash, any
    degraded decision once the fault has ended and a request arrives."""
    bad = []
    if not row.get("alive", False):
        bad.append("sluiced exited (%s)" % row["exit"] if row.get("exit") is not None else
                   "not measured: " + row.get("error", "?"))
    elif row.get("error"):
        bad.append("not measured: " + row["error"])
    # Redis evicting sluice's keys over-admits by nature: what must not happen is that it goes
    # unsaid. An over-admission sluiced reports (its eviction metrics) passes; any other fails.
    if row.get("over") and not row.get("eviction_reported"):
        bad.append("over-admitted %d" % row["over"])
    if row.get("degraded_late"):
        bad.append("%d degraded more than %d ms after the fault" % (
            row["degraded_late"], row["settle_s"] * 1000))
    bad += row.get("checks") or []  # the scenario's own checks (a certificate rotation's)
    return bad
