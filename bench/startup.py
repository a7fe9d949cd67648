#!/usr/bin/env python3
"""Start-up figures of the cadre binary: `cadre --version` and `cadre render`
(builds the snapshot and the first request body, sends nothing), each run
--runs times in a fixture project (min, median, max wall time from
`time.perf_counter()` around the process), and their instruction counts
under callgrind when valgrind is installed (instructions do not depend on
the machine's load; wall times do). Prints JSON.
`--baseline PATH` measures another build the same way, each run of one
right after the same run of the other (the same load), under
`"baseline"` in the report.

    python3 bench/startup.py --cadre target/release/cadre --runs 40
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

CONFIG = '[provider]\nmodel = "claude-sonnet-4-5"\nmax_tokens = 1024\nmax_retries = 0\n'


def instructions(cmd, env, cwd):
    if not shutil.which("valgrind"):
        return None
    out = os.path.join(cwd, "callgrind.out")
    p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + cmd,
                       env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    m = re.search(r"Collected : (\d+)", p.stderr)
    return int(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cadre", required=True)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--baseline", help="another cadre build, run in turn with --cadre")
    args = ap.parse_args()
    builds = {"cadre": os.path.abspath(args.cadre)}
    if args.baseline:
        builds["baseline"] = os.path.abspath(args.baseline)
    work = tempfile.mkdtemp(prefix="cadre-startup-")
    try:
        home = os.path.join(work, "home")
        os.makedirs(home)
        with open(os.path.join(work, "cadre.toml"), "w") as f:
            f.write(CONFIG)
        with open(os.path.join(work, "README.md"), "w") as f:
            f.write("# Fixture\n")
        env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "NO_COLOR": "1",
               "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_API_KEY": "sk-bench-dummy"}
        reports = {b: {"commands": {}} for b in builds}
        loadavg_start = open("/proc/loadavg").read().split()[:3]
        for name, args_ in (("version", ["--version"]), ("render", ["render", "hello"])):
            times = {b: [] for b in builds}
            order = list(builds)
            for i in range(args.runs + 2):
                for b in (order if i % 2 == 0 else order[::-1]):
                    cmd = [builds[b], *args_]
                    t0 = time.perf_counter()
                    p = subprocess.run(cmd, env=env, cwd=work, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
                    dt = time.perf_counter() - t0
                    if p.returncode != 0:
                        raise SystemExit(f"{' '.join(cmd)} failed with {p.returncode}")
                    if i >= 2:  # two warm-up runs
                        times[b].append(dt * 1000)
            for b, t in times.items():
                t.sort()
                reports[b]["commands"][name] = {
                    "wall_ms": {"min": t[0], "median": statistics.median(t), "max": t[-1], "n": len(t)},
                    "instructions": instructions([builds[b], *args_], env, work),
                }
        report = {"loadavg_start": loadavg_start, **reports["cadre"]}
        if "baseline" in reports:
            report["baseline"] = reports["baseline"]
        report["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        print(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
