#!/usr/bin/env python3
"""The Debian package `make package` builds (docs/install.md).

  package_test.py --build-dir DIR --version X.Y.Z

Makes the package from the release build with cpack (into a temporary directory: nothing is
compiled again), then checks
  - its metadata and contents (dpkg-deb): one package `sluice`, the files where Debian wants
    them and nothing else, conffiles, maintainer scripts, and Depends covering every shared
    library the binaries need (found independently: readelf's NEEDED, then `dpkg -S`);
  - the unpacked binaries: no RPATH/RUNPATH (nothing pointing into the build tree), `sluice`
    runs, `sluiced` serves the packaged config and reloads it on SIGHUP (what the unit's
    ExecReload sends);
  - installed with dpkg -i (root only, and only when no sluice package is installed already):
    `systemd-analyze verify` accepts the unit without a warning; dpkg -P removes everything.
"""
import argparse
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

TIMEOUT = 120

EXPECTED_FILES = {
    "./usr/bin/sluiced": 0o755,
    "./usr/bin/sluice": 0o755,
    "./etc/sluice/sluice.yaml": 0o644,
    "./etc/default/sluiced": 0o600,
    "./lib/systemd/system/sluiced.service": 0o644,
    "./usr/share/doc/sluice/server.md": 0o644,
    "./usr/share/doc/sluice/configuration.md": 0o644,
    "./usr/share/doc/sluice/install.md": 0o644,
    "./usr/share/doc/sluice/security.md": 0o644,
}
CONFFILES = {"/etc/sluice/sluice.yaml", "/etc/default/sluiced"}


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(cmd, check=True, **kwargs):
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kwargs)
    if check and r.returncode != 0:
        fail(f"{cmd[0]} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def make_package(build_dir, out_dir):
    run(["cpack", "-G", "DEB", "--config", os.path.join(build_dir, "CPackConfig.cmake"),
         "-B", out_dir])
    debs = glob.glob(os.path.join(out_dir, "*.deb"))
    if len(debs) != 1:
        fail(f"cpack made {debs}, not one package")
    return debs[0]


def check_metadata(deb, version):
    field = lambda name: run(["dpkg-deb", "-f", deb, name]).stdout.strip()
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    for name, want in [("Package", "sluice"), ("Version", version), ("Architecture", arch)]:
        if field(name) != want:
            fail(f"{name}: {field(name)!r}, expected {want!r}")
    depends = {d.split()[0] for d in field("Depends").split(", ")}
    print(f"ok: sluice {version} {arch}, Depends {sorted(depends)}")
    return depends


def check_contents(deb):
    listing = run(["dpkg-deb", "-c", deb]).stdout.splitlines()
    files = {}
    for line in listing:
        mode, _, _, _, _, path = line.split(None, 5)
        if not mode.startswith("d"):
            files[path] = mode
    if set(files) != set(EXPECTED_FILES):
        fail(f"package files {sorted(files)}\nexpected {sorted(EXPECTED_FILES)}")
    for path, want in EXPECTED_FILES.items():
        if files[path] != "-" + "".join(
                c if want & (1 << (8 - i)) else "-" for i, c in enumerate("rwxrwxrwx")):
            fail(f"{path} has mode {files[path]}, expected {oct(want)}")
    print("ok: contents and modes")


def check_control(deb, work):
    control = os.path.join(work, "control")
    run(["dpkg-deb", "-e", deb, control])
    with open(os.path.join(control, "conffiles")) as f:
        conffiles = set(f.read().split())
    if conffiles != CONFFILES:
        fail(f"conffiles {conffiles}, expected {CONFFILES}")
    for script in ["postinst", "prerm", "postrm"]:
        path = os.path.join(control, script)
        if not os.access(path, os.X_OK):
            fail(f"{script} is not executable")
        run(["sh", "-n", path])
    print("ok: conffiles and maintainer scripts")


def check_shlib_depends(binaries, depends):
    """Every NEEDED library belongs to a package that Depends names, by its own name or one it
    Provides (libspdlog1.10 provides libspdlog1.10-fmt9): dpkg -S is the oracle."""
    needed = set()
    for binary in binaries:
        needed |= set(re.findall(r"\(NEEDED\).*\[(.+)\]", run(["readelf", "-d", binary]).stdout))
    owners = {}  # library -> packages shipping it
    for line in run(["dpkg", "-S", *[f"*/{lib}" for lib in sorted(needed)]]).stdout.splitlines():
        packages, path = line.split(": ", 1)
        for package in packages.split(", "):
            owners.setdefault(os.path.basename(path), set()).add(package.split(":")[0])
    for lib in sorted(needed):
        names = set()
        for package in owners.get(lib, ()):
            provides = run(["dpkg-query", "-W", "-f=${Provides}", package]).stdout
            names |= {package} | {p.split()[0] for p in provides.split(", ") if p.strip()}
        if not names & depends:
            fail(f"the binaries need {lib} (from {names or 'no package'}), which Depends lacks")
    print(f"ok: Depends covers all {len(needed)} NEEDED libraries")


def check_no_rpath(binaries, build_dir):
    for binary in binaries:
        dynamic = run(["readelf", "-d", binary]).stdout
        paths = re.findall(r"\((?:RPATH|RUNPATH)\).*\[(.*)\]", dynamic)
        if paths:
            fail(f"{binary} carries RPATH/RUNPATH {paths}"
                 + (" into the build tree" if any(build_dir in p for p in paths) else ""))
    print("ok: no RPATH or RUNPATH")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, path, body=None):
    """(status, json) of a request to sluiced; (None, None) while it does not answer."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return None, None


def wait_for(what, predicate, deadline_s=20):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)  # polling interval, not synchronisation: the deadline bounds the wait
    fail(f"timed out waiting for {what}")


def check(port, address, hits):
    return http(port, "/v1/check", {
        "domain": "default", "hits": hits,
        "descriptors": [{"entries": [{"key": "remote_address", "value": address}]}]})[0]


def check_unpacked(root, work):
    sluice = os.path.join(root, "usr/bin/sluice")
    out = run([sluice, "demo"]).stdout
    if "token_bucket" not in out:
        fail(f"sluice demo printed no token bucket:\n{out[:500]}")
    print("ok: the unpacked sluice runs")

    # sluiced on a copy of the packaged config (the copy is edited below).
    config = os.path.join(work, "sluice.yaml")
    with open(os.path.join(root, "etc/sluice/sluice.yaml")) as f:
        packaged = f.read()
    with open(config, "w") as f:
        f.write(packaged)
    port = free_port()
    log = open(os.path.join(work, "sluiced.log"), "w+")
    proc = subprocess.Popen([os.path.join(root, "usr/bin/sluiced"), "--config", config,
                             "--http", f"127.0.0.1:{port}", "--grpc", "off"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for("sluiced to be ready",
                 lambda: proc.poll() is None and http(port, "/readyz")[0] == 200
                 or proc.poll() is not None)
        if proc.poll() is not None:
            log.seek(0)
            fail(f"sluiced exited {proc.returncode}:\n{log.read()}")
        # The packaged rule: 10 per second per address, bursts of 20. A fresh address takes a
        # burst of 20 at once; 21 never fit.
        if (got := check(port, "192.0.2.1", 20)) != 200:
            fail(f"a burst of 20 answered {got}, expected 200")
        if (got := check(port, "192.0.2.2", 21)) != 429:
            fail(f"21 hits answered {got}, expected 429")
        print("ok: the unpacked sluiced serves the packaged config")

        # systemctl reload sends SIGHUP: the new burst applies without a restart.
        with open(config, "w") as f:
            f.write(packaged.replace("burst: 20", "burst: 30"))
        proc.send_signal(signal.SIGHUP)
        fresh = iter(range(1_000_000))  # a fresh address each time: the check itself takes hits
        wait_for("the reloaded config (burst 30)",
                 lambda: check(port, f"reload-{next(fresh)}", 21) == 200)
        if proc.poll() is not None:
            fail(f"sluiced exited {proc.returncode} after SIGHUP")
        print("ok: SIGHUP reloads the config")

        proc.send_signal(signal.SIGTERM)
        if proc.wait(timeout=30) != 0:
            log.seek(0)
            fail(f"sluiced exited {proc.returncode} on SIGTERM:\n{log.read()}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def check_installed(deb):
    """dpkg -i, systemd-analyze verify, dpkg -P: on a machine (CI) where that is allowed."""
    if os.geteuid() != 0:
        print("skipped: dpkg -i (not root)")
        return
    status = run(["dpkg-query", "-W", "-f=${Status}", "sluice"], check=False).stdout
    if "installed" in status and "not-installed" not in status:
        print("skipped: dpkg -i (a sluice package is installed already; left alone)")
        return
    run(["dpkg", "-i", deb])
    try:
        r = run(["systemd-analyze", "verify", "sluiced.service"], check=False)
        # verify exits 0 on settings it ignores; it names the unit when it says anything.
        complaints = [l for l in (r.stdout + r.stderr).splitlines() if "sluiced" in l]
        if r.returncode != 0 or complaints:
            fail(f"systemd-analyze verify: exit {r.returncode}\n{r.stdout}{r.stderr}")
        conffiles = run(["dpkg-query", "-W", "-f=${Conffiles}", "sluice"]).stdout
        if {l.split()[0] for l in conffiles.strip().splitlines()} != CONFFILES:
            fail(f"dpkg registered conffiles {conffiles!r}")
        print("ok: installed, systemd-analyze verify accepts sluiced.service")
    finally:
        run(["dpkg", "-P", "sluice"])
    for path in ["/usr/bin/sluiced", "/etc/sluice", "/etc/default/sluiced",
                 "/lib/systemd/system/sluiced.service"]:
        if os.path.exists(path):
            fail(f"dpkg -P left {path}")
    print("ok: dpkg -P removes it all")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build-dir", required=True)
    p.add_argument("--version", required=True)
    a = p.parse_args()
    build_dir = os.path.abspath(a.build_dir)
    with tempfile.TemporaryDirectory(prefix="sluice-package-") as work:
        deb = make_package(build_dir, os.path.join(work, "out"))
        depends = check_metadata(deb, a.version)
        check_contents(deb)
        check_control(deb, work)
        root = os.path.join(work, "root")
        run(["dpkg-deb", "-x", deb, root])
        binaries = [os.path.join(root, "usr/bin", b) for b in ["sluiced", "sluice"]]
        check_shlib_depends(binaries, depends)
        check_no_rpath(binaries, build_dir)
        check_unpacked(root, work)
        check_installed(deb)


if __name__ == "__main__":
    main()
