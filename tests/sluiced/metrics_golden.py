#!/usr/bin/env python3
"""The shape of sluiced's /metrics, recorded: names, label sets and `# TYPE` lines.

  metrics_golden.py --sluiced BIN --golden DIR [--update]

The Grafana dashboard and the promtool rules (docs/prometheus/) query these series by name and
label, so a refactor of how the stores report their stats must leave them as they are. For each
setup -- the memory store (also with --state-dir), exact Redis, a leased limit, a batched limit,
a region leasing its part from a global store -- it starts the real sluiced (on redis-servers of its own, on loopback), sends
the same few checks, scrapes /metrics and reduces it to one line per series: the `# TYPE` lines
and each sample's name with its labels (values that vary from run to run -- timings, counts,
the version -- are not recorded). That list must equal DIR/<setup>.txt; --update writes it.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

DEADLINE_S = 30

CONFIG = """domain: golden
descriptors:
  - key: exact
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: shadowed
    rate_limit: {unit: minute, requests_per_unit: 2, mode: shadow}
  - key: inflight
    concurrency: {max_in_flight: 10, permit_ttl: 30s}
  - key: monthly
    rate_limit: {calendar: month, timezone: Europe/Lisbon, timezone_from: tz, requests_per_unit: 9}
"""

LEASED = CONFIG + """  - key: leased
    rate_limit: {unit: hour, requests_per_unit: 600, sync: {mode: leased, lease_ttl: 5s}}
"""

BATCHED = CONFIG + """  - key: batched
    rate_limit: {unit: minute, requests_per_unit: 600, sync: {mode: batched, interval: 100ms}}
"""

REGION = CONFIG + """  - key: regional
    rate_limit:
      name: golden-regional
      unit: second
      requests_per_unit: 100
      algorithm: fixed_window
      scope: global
      regions: {mode: leased, refresh: 200ms, shares: {us: 0.5, eu: 0.5}}
"""

# setup -> (config, needs the region's Redis, needs a global Redis, extra flags; "{workdir}" in
# one is the setup's temporary directory)
SETUPS = {
    "memory": (CONFIG, False, False, []),
    "memory_state_dir": (CONFIG, False, False, ["--state-dir", "{workdir}/state"]),
    "redis_exact": (CONFIG, True, False, []),
    "redis_leased": (LEASED, True, False, []),
    "redis_batched": (BATCHED, True, False, []),
    "region_leased": (REGION, True, True, ["--region", "us"]),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, condition):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"metrics_golden: timed out waiting for {what}")


class Redis:
    def __init__(self, workdir):
        for _ in range(5):  # another process may take the port between pick and bind
            self.port = free_port()
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", workdir],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._answers():
                return
            self.stop()
        raise SystemExit("metrics_golden: redis-server did not start")

    def _answers(self):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                time.sleep(0.05)
        return False

    def address(self):
        return f"redis://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Sluiced:
    def __init__(self, binary, args, workdir):
        self.log_path = os.path.join(workdir, "sluiced.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary, "--http", "127.0.0.1:0", "--grpc", "off"] + args,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.port = wait_until("sluiced to listen", self._port)

    def _port(self):
        if self.proc.poll() is not None:
            raise SystemExit("metrics_golden: sluiced exited:\n" + self.text())
        found = re.search(r"http: listening on 127\.0\.0\.1:(\d+)", self.text())
        return int(found.group(1)) if found else 0

    def text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def check(self, key, value, route="check"):
        body = json.dumps({"domain": "golden",
                           "descriptors": [{"entries": [{"key": key, "value": value}]}]})
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/{route}",
                                         data=body.encode(), method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            return r.read().decode()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
# Label values that are not the shape of the metrics but of this run.
VARYING_LABELS = {"version"}


def shape(text):
    """The sorted set of `# TYPE` lines and `name{label="value",...}` of every sample."""
    lines = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            lines.add(line)
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise SystemExit(f"metrics_golden: not a sample line: {line!r}")
        labels = []
        for name, value in LABEL.findall(m.group(2) or ""):
            labels.append(f'{name}="*"' if name in VARYING_LABELS else f'{name}="{value}"')
        lines.add(m.group(1) + "{" + ",".join(sorted(labels)) + "}")
    return sorted(lines)


def run_setup(binary, name, workdir):
    config_text, regional_redis, global_redis, extra = SETUPS[name]
    config = os.path.join(workdir, "golden.yaml")
    with open(config, "w") as f:
        f.write(config_text)
    servers = []
    sluiced = None
    try:
        args = ["--config", config] + [a.format(workdir=workdir) for a in extra]
        if regional_redis:
            servers.append(Redis(workdir))
            args += ["--store", servers[-1].address()]
        if global_redis:
            servers.append(Redis(workdir))
            args += ["--global-store", servers[-1].address()]
        sluiced = Sluiced(binary, args, workdir)
        keys = [k.split("key:")[1].strip() for k in config_text.splitlines() if "- key:" in k]
        for key in keys:
            for value in ("a", "b"):
                sluiced.check(key, value)
        sluiced.check("exact", "a")
        sluiced.check("inflight", "a", route="acquire")
        for _ in range(6):  # over the exact limit: refusals have series of their own
            sluiced.check("exact", "hot")
        return shape(sluiced.metrics())
    finally:
        if sluiced:
            sluiced.stop()
        for s in servers:
            s.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sluiced", required=True)
    parser.add_argument("--golden", required=True)
    parser.add_argument("--update", action="store_true")
    parser.add_argument("--setup", action="append", help="only these setups")
    opts = parser.parse_args()
    failed = False
    for name in opts.setup or SETUPS:
        workdir = tempfile.mkdtemp(prefix=f"sluice-golden-{name}-")
        try:
            got = run_setup(opts.sluiced, name, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        path = os.path.join(opts.golden, name + ".txt")
        if opts.update:
            with open(path, "w") as f:
                f.write("\n".join(got) + "\n")
            print(f"metrics_golden: wrote {path} ({len(got)} lines)")
            continue
        with open(path) as f:
            want = f.read().splitlines()
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        if missing or extra:
            failed = True
            print(f"metrics_golden: {name}: /metrics differs from {path}")
            for line in missing:
                print(f"  - {line}")
            for line in extra:
                print(f"  + {line}")
        else:
            print(f"metrics_golden: {name}: {len(got)} lines as recorded")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
