"""The table scripts/chaos prints (Markdown, as docs/reliability.md holds it)."""
import os
import subprocess
import time


def header(quick, seconds, repo):
    try:
        commit = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "diff", "--quiet", "HEAD", "--", "src",
                                "include"]).returncode != 0
    except OSError:
        commit, dirty = "?", False
    redis = subprocess.run(["redis-server", "--version"], capture_output=True,
                           text=True).stdout.split()
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return ("scripts/chaos%s, %s UTC, commit %s%s, %d cores, load average %s at the end, "
            "redis %s, %.0f s in all\n" % (
                " --quick" if quick else "", time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                commit, "+dirty" if dirty else "", os.cpu_count(), load,
                redis[2].split("=")[1] if len(redis) > 2 else "?", seconds))


def _n(v, fmt="%d"):
    return "-" if v is None else fmt % v


def table(rows):
    lines = ["| scenario | store | mode | fault s | degraded during / after | recovery ms | "
             "last degraded ms | "
             "admitted / limit | over-admission | peak RSS MiB | good p99 ms | "
             "good errors during / after | attack | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(("| %s | %s | %s | %s | %s / %s | %s | %s | %s / %s | %s | %s | %s | "
                      "%s / %s | %s | %s |") % (
            r["scenario"], r["store"], r["mode"], _n(r.get("fault_s"), "%.1f"),
            _n(r.get("degraded_during")), _n(r.get("degraded_after")),
            _n(r.get("recovery_ms"), "%.0f"), _n(r.get("last_degraded_ms"), "%.0f"),
            _n(r.get("admitted")), _n(r.get("allowed")),
            (_n(r.get("over")) + (" (reported)" if r.get("over") and r.get("eviction_reported")
                                   else "")), _n(r.get("peak_rss_mib"), "%.0f"), _n(r.get("good_p99_ms"), "%.1f"),
            _n(r.get("good_errors_during")), _n(r.get("good_errors_after")),
            _n(r.get("attack")),
            "ok" if not r["verdict"] else "**FAIL**: " + "; ".join(r["verdict"])))
    return "\n".join(lines)
