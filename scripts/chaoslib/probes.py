"""The measuring clients, threads of the chaos process: a good client (its own key, a limit it
never reaches: latency, errors, degraded flags) and a quota client (keys whose limit it exhausts:
every admission it sees is counted against the configured limit, independently of sluiced).
Each paces itself to a fixed rate and records every decision it gets."""
import http.client
import json
import threading
import time

DOMAIN = "chaos"


def check_body(descriptors):
    return json.dumps({"domain": DOMAIN, "descriptors": descriptors}).encode()


class Decision:
    __slots__ = ("sent", "done", "status", "degraded", "key")

    def __init__(self, sent, done, status, degraded, key):
        self.sent, self.done, self.status = sent, done, status
        self.degraded, self.key = degraded, key


class Probe(threading.Thread):
    """POSTs /v1/check at `rate` per second; `key_of(i)` names the descriptor value of the i-th
    request. A connection is reused for `reuse` requests (then a new one, as real clients do),
    and replaced after any error. status 0 = no HTTP answer (refused, reset, timed out). With
    `ssl_context`, HTTPS. `connections` counts the connections it opened."""

    def __init__(self, port, rule_key, key_of, rate, reuse=50, timeout=2.0, ssl_context=None):
        super().__init__(daemon=True)
        self.port, self.rule_key, self.key_of = port, rule_key, key_of
        self.interval = 1.0 / rate
        self.reuse, self.timeout = reuse, timeout
        self.ssl_context = ssl_context
        self.connections = 0
        self.peers = []  # over TLS: the certificate (DER) each new connection was shown
        self.decisions = []
        self.stopping = threading.Event()
        self.active = threading.Event()  # cleared: send nothing (a quiet spell)
        self.active.set()
        self.idle = threading.Event()    # set by the thread while it is quiet

    def run(self):
        conn, used, i = None, 0, 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            if not self.active.is_set():
                self.idle.set()
                self.active.wait(0.05)
                next_at = time.monotonic()
                continue
            self.idle.clear()
            key = self.key_of(i)
            body = check_body([{"entries": [{"key": self.rule_key, "value": key}]}])
            sent = time.monotonic()
            status, degraded = 0, False
            try:
                if conn is None or used >= self.reuse:
                    if conn is not None:
                        conn.close()
                    conn, used = self._connect(), 0
                conn.request("POST", "/v1/check", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                used += 1
                if used == 1 and self.ssl_context is not None and conn.sock is not None:
                    self.peers.append(conn.sock.getpeercert(binary_form=True))
                status = r.status
                if status in (200, 429):
                    degraded = any(s.get("degraded") for s in json.loads(data)["statuses"])
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException, ValueError, KeyError):
                if conn is not None:
                    conn.close()
                conn = None
            self.decisions.append(Decision(sent, time.monotonic(), status, degraded, key))
            i += 1
            # Pacing (a fixed offered load), not synchronisation.
            next_at = max(next_at + self.interval, time.monotonic() - 1.0)
            delay = next_at - time.monotonic()
            if delay > 0:
                self.stopping.wait(delay)
        if conn is not None:
            conn.close()

    def _connect(self):
        self.connections += 1
        if self.ssl_context is None:
            return http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=self.timeout,
                                           context=self.ssl_context)

    def failures(self):
        """Requests that got no decision (no answer, or an answer other than 200 or 429)."""
        return sum(1 for d in list(self.decisions) if d.status not in (200, 429))

    def pause(self):
        """Returns once no request is in flight and none will be sent until resume()."""
        self.idle.clear()
        self.active.clear()
        while not self.idle.wait(0.05):
            if not self.is_alive():
                return

    def resume(self):
        self.active.set()

    def count_after(self, t):
        return sum(1 for d in list(self.decisions) if d.sent >= t and d.status in (200, 429))

    def stop(self):
        self.stopping.set()
        self.join()
