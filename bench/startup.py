#!/usr/bin/env python3
"""Start-up figures of the cadre binary: `cadre --version` and `cadre render`
(builds the snapshot and the first request body, sends nothing), each run
--runs times in a fixture project (min, median, max wall time from
`time.perf_counter()` around the process), and their instruction counts
under callgrind when valgrind is installed (instructions do not depend on
the machine's load; wall times do). Prints JSON.

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
    args = ap.parse_args()
    cadre = os.path.abspath(args.cadre)
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
        report = {"loadavg_start": open("/proc/loadavg").read().split()[:3], "commands": {}}
        for name, cmd in (("version", [cadre, "--version"]), ("render", [cadre, "render", "hello"])):
            times = []
            for i in range(args.runs + 2):
                t0 = time.perf_counter()
                p = subprocess.run(cmd, env=env, cwd=work, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                dt = time.perf_counter() - t0
                if p.returncode != 0:
                    raise SystemExit(f"{' '.join(cmd)} failed with {p.returncode}")
                if i >= 2:  # two warm-up runs
                    times.append(dt * 1000)
            times.sort()
            report["commands"][name] = {
                "wall_ms": {"min": times[0], "median": statistics.median(times), "max": times[-1],
                            "n": len(times)},
                "instructions": instructions(cmd, env, work),
            }
        report["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        print(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
