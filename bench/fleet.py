#!/usr/bin/env python3
"""The worker-fleet benchmark (docs/distributed.md).

One parent (`cadre run`) spawns `--children` background sub-agents in one
turn against bench/fake_anthropic.py (`bg1000`, every answer held back
`--latency-ms`), first with the local backend, then with
`[distributed] backend = "nats"` and 1, 2, 4 `cadre worker` processes
(`--workers`), each against a fresh nats-server (.ci/nats, or
CADRE_NATS_SERVER) with its storage in a temporary folder.

Reported per configuration: wall time of the parent (it ends right after
the last notice joins its conversation and the model answers), the broker
time per task (the parent's publish, and a worker's claim and finish:
compare-and-set, notice, ack; from the `broker_ms` debug lines; latency
under the run's concurrency, not CPU), CPU seconds of the parent, of
each worker and of nats-server and their sum per task, peak RSS of the parent and of each
worker, and a check that the last main request carried every notification
once. Timings are never asserted: this is not a
test.

With `--modes nothing,folder` (the default) each fleet configuration runs
twice: shared nothing (each worker in its own folder with its own HOME, so
transcripts go through the broker: the `lines`, `fetch` and `flush` times)
and `shared_folder = true` (workers in the parent's folder).

    bench/fleet.py --cadre target/release/cadre [--children 1000] [--workers 1,2,4] [--modes nothing,folder]
"""

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CONFIG = """
[provider]
model = "claude-sonnet-4-5"
max_tokens = 1024
max_retries = 0

[agents]
max_concurrent = {children}
"""

FLEET = """
[distributed]
backend = "nats"
url = "nats://127.0.0.1:{port}"
shared_folder = {shared}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, method="GET"):
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def vm_hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_s(pid):
    """User + system CPU seconds of a live process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def start_nats(store):
    binary = os.environ.get("CADRE_NATS_SERVER") or os.path.join(ROOT, ".ci/nats/nats-server")
    port = free_port()
    os.makedirs(store, exist_ok=True)
    log = open(os.path.join(store, "nats.log"), "w")
    p = subprocess.Popen([binary, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", store],
                         stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            time.sleep(0.2)
            return p, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("nats-server did not start")


def broker_ms(text):
    out = {"publish": [], "claim": [], "finish": []}
    for m in re.finditer(r"broker_ms (.*)", text):
        for k, v in re.findall(r"(\w+)=([0-9.]+)", m.group(1)):
            out.setdefault(k, []).append(float(v))
    return out


def one(args, base, workers, shared=False):
    work = tempfile.mkdtemp(prefix="cadre-fleet-bench-")
    proj = os.path.join(work, "proj")
    home = os.path.join(work, "home")
    os.makedirs(proj)
    os.makedirs(os.path.join(home, ".config/cadre"))
    with open(os.path.join(home, ".config/cadre/trusted.toml"), "w") as f:
        f.write(f"folders = [{json.dumps(os.path.realpath(proj))}]\n")
    nats = None
    cfg = CONFIG.format(children=args.children)
    if workers:
        nats, port = start_nats(os.path.join(work, "js"))
        cfg += FLEET.format(port=port, shared="true" if shared else "false")
    with open(os.path.join(proj, "cadre.toml"), "w") as f:
        f.write(cfg)
    # Shared nothing: each worker in its own folder with its own HOME (its
    # own session folder); transcripts go through the broker.
    worker_dirs = []
    for i in range(workers):
        if shared:
            worker_dirs.append((proj, home))
            continue
        wproj, whome = os.path.join(work, f"w{i}"), os.path.join(work, f"w{i}home")
        os.makedirs(wproj)
        os.makedirs(os.path.join(whome, ".config/cadre"))
        with open(os.path.join(whome, ".config/cadre/trusted.toml"), "w") as f:
            f.write(f"folders = [{json.dumps(os.path.realpath(wproj))}]\n")
        with open(os.path.join(wproj, "cadre.toml"), "w") as f:
            f.write(cfg)
        worker_dirs.append((wproj, whome))
    env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "NO_COLOR": "1",
           "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "sk-bench-dummy",
           "CADRE_LOG": "warn,cadre::fleet=debug"}
    procs = []
    for i in range(workers):
        log = open(os.path.join(work, f"worker{i}.log"), "w")
        wproj, whome = worker_dirs[i]
        procs.append((subprocess.Popen([args.cadre, "worker"], cwd=wproj, env={**env, "HOME": whome},
                                       stdout=subprocess.DEVNULL, stderr=log,
                                       stdin=subprocess.DEVNULL), log.name))
    time.sleep(0.5 if workers else 0)
    http(f"{base}/_reset?scenario=bg1000&latency_ms={args.latency_ms}&children={args.children}", "POST")
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-v", args.cadre, "run", "Run the jobs in the background."],
                       cwd=proj, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    err = p.stderr.decode(errors="replace")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    parent_rss = int(m.group(1)) if m else None
    stats = http(f"{base}/_stats")
    mains = [s for s in stats if s["kind"] == "main"]
    notes = (mains[-1]["notifications"] or {}) if mains else {}
    worker_rss = [vm_hwm_kib(w.pid) for w, _ in procs]
    worker_cpu = [cpu_s(w.pid) for w, _ in procs]
    parent_cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([0-9.]+)", err))
    for w, _ in procs:
        w.send_signal(signal.SIGTERM)
    for w, _ in procs:
        try:
            w.wait(timeout=20)
        except subprocess.TimeoutExpired:
            w.kill()
    logs = err + "".join(open(path, errors="replace").read() for _, path in procs)
    nats_cpu = cpu_s(nats.pid) if nats else None
    nats_rss = vm_hwm_kib(nats.pid) if nats else None
    if nats:
        nats.kill()
        nats.wait()
    b = broker_ms(logs)
    per_task = None
    if workers and b["publish"] and b["claim"]:
        # publish (its `lines` part: the first transcript lines, is in it),
        # claim, fetch (the worker's copy), flush (the last lines), finish.
        per_task = sum(statistics.mean(v) for k, v in b.items() if v and k != "lines")
    ok = (p.returncode == 0 and notes.get("count") == args.children
          and notes.get("distinct_ids") == args.children)
    return {
        "backend": (f"nats, {workers} worker(s), " + ("shared folder" if shared else "shared nothing"))
                   if workers else "local",
        "ok": ok,
        "rc": p.returncode,
        "wall_s": round(wall, 3),
        "notifications": notes,
        "child_requests": sum(1 for s in stats if s["kind"] == "child"),
        "parent_peak_rss_mib": parent_rss and round(parent_rss / 1024, 1),
        "worker_peak_rss_mib": [r and round(r / 1024, 1) for r in worker_rss],
        "broker_ms_per_task": per_task and round(per_task, 3),
        "parent_cpu_s": round(parent_cpu, 2),
        "worker_cpu_s": [c and round(c, 2) for c in worker_cpu],
        "nats_cpu_s": nats_cpu and round(nats_cpu, 2),
        "nats_peak_rss_mib": nats_rss and round(nats_rss / 1024, 1),
        "cpu_ms_per_task": round((parent_cpu + sum(c or 0 for c in worker_cpu) + (nats_cpu or 0))
                                 * 1000 / args.children, 2),
        "broker_ms_median": {k: round(statistics.median(v), 3) for k, v in b.items() if v},
        "tasks_timed": {k: len(v) for k, v in b.items()},
        "stderr_tail": None if ok else err[-2000:],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cadre", required=True)
    ap.add_argument("--children", type=int, default=1000)
    ap.add_argument("--latency-ms", type=int, default=100)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--modes", default="nothing,folder",
                    help="fleet modes: nothing (transcripts through the broker), folder (shared_folder)")
    ap.add_argument("--out")
    args = ap.parse_args()
    args.cadre = os.path.abspath(args.cadre)
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_anthropic.py"), "--port", "0",
                               "--scenario", "bg1000", "--latency-ms", str(args.latency_ms)],
                              stdout=subprocess.PIPE)
    port = int(server.stdout.readline())
    base = f"http://127.0.0.1:{port}"
    results = []
    try:
        for _ in range(args.runs):
            configs = [(0, False)] + [(int(x), m == "folder")
                                      for x in args.workers.split(",") if x
                                      for m in args.modes.split(",") if m]
            for w, shared in configs:
                r = one(args, base, w, shared)
                print(json.dumps(r), flush=True)
                results.append(r)
    finally:
        server.kill()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
