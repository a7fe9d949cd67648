#!/usr/bin/env python3
"""Runs cadre and (optionally) Claude Code against one fake Anthropic server,
alternating runs, and prints a JSON report.

Wall time is measured here with `time.perf_counter()` around the process
(start to exit, including `/usr/bin/time`'s own fork/exec, well under a
millisecond); peak RSS is `/usr/bin/time -v`'s "Maximum resident set size".
Scenarios: `explore` (parent -> one Explore sub-agent -> final answer),
`fork` (two sibling forks), `script3` (three requests, cadre only),
`bg1000` (cadre only: one parent spawns `--children` (1,000) background
sub-agents in one turn, `agents.max_concurrent` = that many, and the server
answers every model request after `--latency-ms` (100 ms); the process
ends after the last notification. Also reports cadre's user+sys CPU (from
`/usr/bin/time -v`) per sub-agent turn, and checks that the main session's
last request carries exactly one notification per task).

`--tls` (Rust server only): the server speaks HTTPS with the test
certificate (tests/fixtures/tls) and offers HTTP/2 by ALPN, as the real API
does, so a client with HTTP/2 sends every request on one connection; the
programs trust the test authority through `SSL_CERT_FILE` (cadre reads it
instead of the system's store) and `NODE_EXTRA_CA_CERTS` (Claude Code).
Without it the server speaks plain HTTP/1.1 (one connection per request in
flight). `--h2-streams N` makes the TLS server announce a limit of N
concurrent streams per connection.

`--telemetry` adds a program `cadre+telemetry`: the same cadre with
OpenTelemetry on (metrics, events and traces over OTLP/HTTP protobuf to a
receiver in this script that answers 200), for the overhead of telemetry
(docs/observability.md, "Cost"). Its runs log with
`CADRE_LOG=cadre::telemetry=debug`, and what cadre reports of setting
telemetry up and of the flush at exit is summarised as
`telemetry_setup_ms` (on the first session's thread) and
`telemetry_flush_ms` (the exit).
`--baseline PATH` adds another cadre build as `baseline` (and, with
`--telemetry`, `baseline+telemetry`), run in turn with the others: a
before/after comparison under the same load.
"""

import argparse
import http.server as http_server
import threading
import json
import os
import re
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

CADRE_CONFIG = """
[provider]
model = "claude-sonnet-4-5"
max_tokens = 1024
max_retries = 0
"""

# Forks are gated off for non-interactive sessions by default; the bench
# config removes that gate (as an admin would) so `cadre run` may fork.
CADRE_FORK_CONFIG = """
[features]
FORK_SUBAGENT = true
[flags.FORK_SUBAGENT]
description = "fork"
gates = ["coordinator"]
"""

CADRE_BG_CONFIG = """
[agents]
max_concurrent = {children}
"""

PROMPTS = {
    "bg1000": "Run the jobs in the background.",
    "explore": "Find the README files and tell me what they say.",
    "fork": "Check modules A and B for bugs.",
    "script3": "List the markdown files twice, then answer.",
}


TLS_DIR = os.path.join(HERE, "..", "tests", "fixtures", "tls")
TEST_CA = os.path.abspath(os.path.join(TLS_DIR, "ca.pem"))


def fs_type(path):
    """The file system `path` is on (longest mount point in /proc/mounts)."""
    best, kind = "", "?"
    try:
        for line in open("/proc/mounts"):
            parts = line.split()
            if len(parts) >= 3 and (path == parts[1] or path.startswith(parts[1].rstrip("/") + "/")) \
                    and len(parts[1]) >= len(best):
                best, kind = parts[1], parts[2]
    except OSError:
        pass
    return kind


def http(url, method="GET"):
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    context = ssl.create_default_context(cafile=TEST_CA) if url.startswith("https:") else None
    with urllib.request.urlopen(req, timeout=10, context=context) as r:
        return json.loads(r.read())


def lcp(a, b):
    n = min(len(a), len(b))
    i = 0
    # Chunked compare, then byte by byte.
    step = 4096
    while i + step <= n and a[i:i + step] == b[i:i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


def cache_order(raw):
    """The body re-serialised in prompt-cache order (tools, system,
    messages), each part compactly: how much of a request a prompt cache
    can share, whatever the order of the JSON keys on the wire."""
    body = json.loads(raw)
    parts = [body.get("tools"), body.get("system"), body.get("messages")]
    return "".join(json.dumps(p, separators=(",", ":"), ensure_ascii=False) for p in parts).encode()


def measure(cmd, env, cwd):
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, env=env, cwd=cwd,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    err = p.stderr.decode(errors="replace")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    rss_kib = int(m.group(1)) if m else None
    cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([0-9.]+)", err))
    measure.cpu_s = cpu
    return p.returncode, wall, rss_kib, p.stdout.decode(errors="replace"), err


class OtlpReceiver(http_server.BaseHTTPRequestHandler):
    """Answers every OTLP/HTTP export with 200 and counts it. HTTP/1.1 with
    keep-alive, as a collector speaks it (the OpenTelemetry Collector's
    Go server keeps a connection open): Python's default, HTTP/1.0, closes
    each connection after one answer."""
    received = 0
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        OtlpReceiver.received += 1
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def start_otlp_receiver():
    server = http_server.ThreadingHTTPServer(("127.0.0.1", 0), OtlpReceiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def telemetry_ms(err, what):
    """The milliseconds cadre logged for `what` (`set up`, `flushed`)."""
    m = re.search(r"telemetry: " + what + r" in ([0-9.]+) ?ms", err)
    return float(m.group(1)) if m else None


def summary(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    xs = sorted(xs)
    return {"median": statistics.median(xs), "min": xs[0], "max": xs[-1],
            "p25": xs[len(xs) // 4], "p75": xs[(3 * len(xs)) // 4], "n": len(xs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cadre", required=True)
    ap.add_argument("--claude", help="the Claude Code binary; omitted = cadre only")
    ap.add_argument("--scenario", action="append", required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--children", type=int, default=1000, help="bg1000: background sub-agents")
    ap.add_argument("--latency-ms", type=int, default=100, help="bg1000: model answer delay")
    ap.add_argument("--server", help="the fake server's command (default: the Python one, "
                    "bench/fake_anthropic.py); e.g. target/release/examples/fake_anthropic")
    ap.add_argument("--tls", action="store_true",
                    help="serve HTTPS with HTTP/2 by ALPN, as the real API does (Rust server only)")
    ap.add_argument("--baseline", help="another cadre build to run in turn with --cadre")
    ap.add_argument("--telemetry", action="store_true",
                    help="also run cadre with OpenTelemetry on, to a local OTLP receiver")
    ap.add_argument("--h2-streams", type=int,
                    help="with --tls: the server's HTTP/2 limit of concurrent streams (default: none)")
    args = ap.parse_args()
    args.cadre = os.path.abspath(args.cadre)
    if args.claude:
        args.claude = os.path.abspath(args.claude)
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)

    work = tempfile.mkdtemp(prefix="cadre-bench-")
    server_cmd = ([os.path.abspath(args.server)] if args.server
                  else [sys.executable, os.path.join(HERE, "fake_anthropic.py")])
    if args.tls and not args.server:
        ap.error("--tls needs the Rust server (--server)")
    tls = args.tls
    if tls:
        server_cmd += ["--tls", os.path.join(TLS_DIR, "server.pem"), os.path.join(TLS_DIR, "server.key")]
        if args.h2_streams:
            server_cmd += ["--h2-streams", str(args.h2_streams)]
    server = subprocess.Popen(server_cmd + ["--port", "0"], stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline())
    base = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    otlp = start_otlp_receiver() if args.telemetry else None
    report = {"loadavg_start": open("/proc/loadavg").read().split()[:3], "scenarios": {},
              "server": "rust" if args.server else "python",
              "transport": "https (h2 by ALPN)" if tls else "http/1.1",
              "h2_streams": args.h2_streams,
              "run_folder_fs": fs_type(work),
              "args": {"runs": args.runs, "children": args.children, "latency_ms": args.latency_ms}}
    try:
        for scenario in args.scenario:
            programs = {}
            proj = os.path.join(work, scenario)
            os.makedirs(proj, exist_ok=True)
            with open(os.path.join(proj, "README.md"), "w") as f:
                f.write("# Fixture\nA benchmark fixture.\n")
            home = os.path.join(work, "home-" + scenario)
            os.makedirs(home, exist_ok=True)
            base_env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "NO_COLOR": "1",
                        "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "sk-bench-dummy"}
            if tls:
                # Trusted instead of the system's store, by cadre (rustls'
                # native-certs loader) and by Node (Claude Code).
                base_env["SSL_CERT_FILE"] = TEST_CA
                base_env["NODE_EXTRA_CA_CERTS"] = TEST_CA
            cfg = CADRE_CONFIG + (CADRE_FORK_CONFIG if scenario == "fork" else "")
            reset = f"{base}/_reset?scenario={scenario}"
            if scenario == "bg1000":
                cfg += CADRE_BG_CONFIG.format(children=args.children)
                reset += f"&latency_ms={args.latency_ms}&children={args.children}"
            with open(os.path.join(proj, "cadre.toml"), "w") as f:
                f.write(cfg)
            builds = [("cadre", args.cadre)] + ([("baseline", args.baseline)] if args.baseline else [])
            for name, binary in builds:
                programs[name] = ([binary, "run", PROMPTS[scenario]], dict(base_env))
                if otlp:
                    programs[name + "+telemetry"] = ([binary, "run", PROMPTS[scenario]], dict(
                        base_env, CLAUDE_CODE_ENABLE_TELEMETRY="1", OTEL_METRICS_EXPORTER="otlp",
                        OTEL_LOGS_EXPORTER="otlp", OTEL_TRACES_EXPORTER="otlp",
                        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{otlp.server_address[1]}",
                        CADRE_LOG="cadre::telemetry=debug"))
            if args.claude and scenario not in ("script3", "bg1000"):
                env = dict(base_env, DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1",
                           CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
                if scenario == "fork":
                    env["CLAUDE_CODE_FORK_SUBAGENT"] = "1"
                programs["claude-code"] = ([args.claude, "-p", PROMPTS[scenario]], env)
            results = {name: {"wall_s": [], "rss_kib": [], "request_bytes": [], "requests": [],
                              "child_shared": [], "errors": [], "cpu_s": [], "cpu_per_child_turn_ms": [],
                              "last_main_request_s": [], "notifications": [], "timelines": [],
                              "setup_ms": [], "flush_ms": []} for name in programs}
            order = list(programs)
            for i in range(args.warmup + args.runs):
                for name in (order if i % 2 == 0 else order[::-1]):
                    cmd, env = programs[name]
                    http(reset, "POST")
                    rc, wall, rss, out, err = measure(cmd, env, proj)
                    stats = http(f"{base}/_stats")
                    if i < args.warmup:
                        continue
                    r = results[name]
                    if rc != 0 or "final answer" not in out:
                        r["errors"].append({"rc": rc, "stdout": out[-500:], "stderr": err[-1500:]})
                        continue
                    kids_n = sum(1 for s in stats if s["kind"] == "child")
                    if scenario == "bg1000":
                        mains = [s for s in stats if s["kind"] == "main"]
                        notes = mains[-1]["notifications"] or {}
                        if (notes.get("count") != args.children or notes.get("distinct_ids") != args.children
                                or notes.get("ids") != args.children):
                            r["errors"].append({"rc": rc, "notifications": notes, "stderr": err[-1500:]})
                            continue
                        r["notifications"].append(dict(notes, main_requests=len(mains), child_requests=kids_n))
                        r["last_main_request_s"].append(mains[-1]["t"])
                        # When each request reached the server (ms after
                        # the reset): the parent's, and the children's
                        # spread, to see which round trip a run waited for.
                        kid_t = sorted(s["t"] for s in stats if s["kind"] == "child")
                        q = lambda f: round(kid_t[min(len(kid_t) - 1, int(f * len(kid_t)))] * 1000, 1)
                        r["timelines"].append({"wall_ms": round(wall * 1000, 1),
                                               "main_ms": [round(m["t"] * 1000, 1) for m in mains],
                                               "child_ms": {"first": q(0), "p50": q(0.5), "p90": q(0.9),
                                                            "last": q(1)} if kid_t else None})
                    r["cpu_s"].append(measure.cpu_s)
                    r["setup_ms"].append(telemetry_ms(err, "set up"))
                    r["flush_ms"].append(telemetry_ms(err, "flushed"))
                    if kids_n:
                        r["cpu_per_child_turn_ms"].append(measure.cpu_s * 1000 / kids_n)
                    r["wall_s"].append(wall)
                    r["rss_kib"].append(rss)
                    r["request_bytes"].append(sum(s["bytes"] for s in stats))
                    r["requests"].append(len(stats))
                    kids = [s["body"].encode("latin-1") for s in stats if s["kind"] == "child" and s["body"]]
                    if scenario == "fork" and len(kids) >= 2:
                        a, b = kids[0], kids[1]
                        c = lcp(a, b)
                        ca, cb = cache_order(a), cache_order(b)
                        cc = lcp(ca, cb)
                        r["child_shared"].append({"a_bytes": len(a), "b_bytes": len(b), "common_prefix": c,
                                                  "share_a": c / len(a), "share_b": c / len(b),
                                                  "cache_order_share_a": cc / len(ca),
                                                  "cache_order_share_b": cc / len(cb)})
                    r["child_requests"] = kids_n
                    kinds = [s["kind"] for s in stats]
                    # A long list (bg1000) as counts per kind.
                    r["kinds"] = kinds if len(kinds) <= 20 else {k: kinds.count(k) for k in sorted(set(kinds))}
            out = {}
            for name, r in results.items():
                out[name] = {
                    "wall_ms": summary([w * 1000 for w in r["wall_s"]]),
                    "rss_mib": summary([k / 1024 for k in r["rss_kib"] if k]),
                    "request_bytes": summary(r["request_bytes"]),
                    "requests": summary(r["requests"]),
                    "child_requests": r.get("child_requests"),
                    "request_kinds": r.get("kinds"),
                    "child_shared": r["child_shared"][:1],
                    "cpu_s": summary(r["cpu_s"]),
                    "cpu_per_child_turn_ms": summary(r["cpu_per_child_turn_ms"]),
                    "last_main_request_s": summary(r["last_main_request_s"]),
                    "notifications": r["notifications"][:1],
                    "timelines": r["timelines"],
                    "telemetry_setup_ms": summary(r["setup_ms"]),
                    "telemetry_flush_ms": summary(r["flush_ms"]),
                    "failed_runs": len(r["errors"]),
                    "first_error": r["errors"][0] if r["errors"] else None,
                }
            for name in ("cadre", "baseline"):
                if name + "+telemetry" in out and out[name]["wall_ms"] and out[name + "+telemetry"]["wall_ms"]:
                    off, on = out[name]["wall_ms"]["median"], out[name + "+telemetry"]["wall_ms"]["median"]
                    out[name + "_telemetry_overhead"] = {"wall_ms": on - off, "share": (on - off) / off}
            if otlp:
                out["exports_received"] = OtlpReceiver.received
            if "claude-code" in out and out["cadre"]["wall_ms"] and out["claude-code"]["wall_ms"]:
                out["ratio_cadre_over_claude_code"] = {
                    "wall": out["cadre"]["wall_ms"]["median"] / out["claude-code"]["wall_ms"]["median"],
                    "rss": out["cadre"]["rss_mib"]["median"] / out["claude-code"]["rss_mib"]["median"],
                }
            report["scenarios"][scenario] = out
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    report["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    text = json.dumps(report, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
