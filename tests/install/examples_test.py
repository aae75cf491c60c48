#!/usr/bin/env python3
"""examples/cpp, as built in the tree, run and checked.

  examples_test.py --in-process BIN [--service BIN --retry BIN --sluiced BIN]

in_process_limiter's decisions against the token bucket worked by hand; service_with_sluiced and
http_retry_client against a sluiced this script starts on a free loopback port (and stops), with
the limits below.
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

TIMEOUT = 60

# The in-process example's token bucket: 5 tokens a second, capacity 10, every key full at
# first. 12 requests at t=0: 10 pass, the bucket is empty and one token takes 1/5 s = 200 ms.
# Another key has its own full bucket: 1 passes, 9 left. 500 ms later alice has 2.5 tokens: 2
# of 3 pass; the half token left needs 100 ms more to make one.
IN_PROCESS_EXPECTED = [
    "api_key=alice: 10 of 12 allowed, 0 left, retry after 200 ms",
    "api_key=bob: 1 of 1 allowed, 9 left, retry after 0 ms",
    "api_key=alice: 2 of 3 allowed, 0 left, retry after 100 ms",
]

CONFIG = """
domain: api
descriptors:
  - key: api_key
    value: service
    rate_limit: {name: per_service, unit: minute, requests_per_unit: 3}
  - key: api_key
    rate_limit: {name: per_key, unit: second, requests_per_unit: 10, burst: 5}
"""
RATE, BURST = 10, 5  # the per_key limit above, which http_retry_client's keys meet


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(cmd, expect_rc=0):
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if r.returncode != expect_rc:
        fail(f"{os.path.basename(cmd[0])} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout.splitlines()


def check_in_process(binary):
    lines = run([binary])
    if not lines or not lines[0].startswith("limit: token_bucket"):
        fail(f"{binary}: no limit line: {lines}")
    if lines[1:] != IN_PROCESS_EXPECTED:
        fail(f"{binary} decided\n  {lines[1:]}\nexpected\n  {IN_PROCESS_EXPECTED}")
    print(f"ok: {binary}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return False


class Sluiced:
    def __init__(self, binary, work):
        config = os.path.join(work, "examples.yaml")
        with open(config, "w") as f:
            f.write(CONFIG)
        self.port = free_port()
        self.log = open(os.path.join(work, "sluiced.log"), "w+")
        self.proc = subprocess.Popen([binary, "--config", config, "--http",
                                      f"127.0.0.1:{self.port}", "--grpc", "off"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not ready(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                fail(f"sluiced did not become ready:\n{self.log.read()}")
            time.sleep(0.05)  # polling interval; the deadline bounds the wait

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def check_service(binary, port):
    args = [binary, "127.0.0.1", str(port), "api", "api_key", "service", "5"]
    # 3 a minute, a full bucket: 3 pass; the 4th waits for one token, 60/3 = 20 s (rounded up,
    # what Retry-After says); the 5th is the same refused check within that time: the cache's.
    want = ["request 1: 200 (sluiced)", "request 2: 200 (sluiced)", "request 3: 200 (sluiced)",
            "request 4: 429 Retry-After: 20 (sluiced)", "request 5: 429 Retry-After: 20 (cache)",
            "checks: 5, from the cache: 1, by the failure mode: 0, connections: 1"]
    got = run(args)
    if got != want:
        fail(f"service_with_sluiced said\n  {got}\nexpected\n  {want}")
    print("ok: service_with_sluiced against sluiced")
    return args


def check_service_without_sluiced(args):
    got = run(args[:-1] + ["2"])
    want = ["request 1: 200 (failure mode)", "request 2: 200 (failure mode)",
            "checks: 2, from the cache: 0, by the failure mode: 2, connections: 0"]
    if got != want:
        fail(f"service_with_sluiced without sluiced said\n  {got}\nexpected\n  {want}")
    print("ok: service_with_sluiced fails open without sluiced")


def summary(lines):
    """served, 429s, gave up, elapsed ms from http_retry_client's last line."""
    last = lines[-1]
    try:
        parts = dict(p.split(": ") for p in last.split(", "))
        return (int(parts["served"].split()[0]), int(parts["429s"]), int(parts["gave up"]),
                int(parts["elapsed"].split()[0]))
    except (KeyError, ValueError):
        fail(f"http_retry_client's summary: {last!r}")


def check_retry(binary, port):
    n = 15
    # However the client spaces them, sluiced admits at most BURST + RATE * t in t seconds:
    # n admitted take at least (n - BURST) / RATE.
    floor_ms = (n - BURST) * 1000 // RATE
    for key, extra, max_429 in [("paced", [], 2), ("unpaced", ["--no-pacing"], n)]:
        body = ('{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"%s"}]}]}'
                % key)
        served, too_many, gave_up, elapsed = summary(
            run([binary, "127.0.0.1", str(port), "/v1/check", body, str(n), *extra]))
        if served != n or gave_up != 0:
            fail(f"{key}: {served} of {n} served, {gave_up} given up")
        if elapsed < floor_ms - 50:
            fail(f"{key}: {n} served in {elapsed} ms, faster than the limit allows")
        # Pacing from the RateLimit fields keeps the client under the limit: at most a 429 or
        # two from timing noise (without pacing, 10 of 15 back-to-back requests are over).
        if too_many > max_429:
            fail(f"{key}: {too_many} answers 429")
        print(f"ok: http_retry_client {key}: {n} served in {elapsed} ms, {too_many} 429s")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--in-process", required=True)
    p.add_argument("--service")
    p.add_argument("--retry")
    p.add_argument("--sluiced")
    a = p.parse_args()
    check_in_process(a.in_process)
    if not a.sluiced:
        return
    with tempfile.TemporaryDirectory(prefix="sluice-examples-") as work:
        sluiced = Sluiced(a.sluiced, work)
        try:
            service_args = check_service(a.service, sluiced.port)
            check_retry(a.retry, sluiced.port)
        finally:
            sluiced.stop()
        check_service_without_sluiced(service_args)


if __name__ == "__main__":
    main()
