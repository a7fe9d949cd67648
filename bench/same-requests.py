#!/usr/bin/env python3
"""Do two cadre binaries send the same requests? (a refactoring's proof)

Usage: bench/same-requests.py OLD_CADRE NEW_CADRE [--keep DIR] [--only NAME,...]

Runs both binaries through the fake server's scenarios in the same folder
with the same settings, has the server dump every request body, and
compares the bodies of the two runs byte for byte after replacing what
differs between any two runs (session and agent ids, tool-use ids the
server makes, times, the temporary folder). The scenarios:

  plain      a prompt answered at once
  readgrep   a Read of README.md, a Grep, the answer
  script3    three turns of Glob calls
  roundtrip  a tool call and its answer
  explore    one Explore sub-agent (built in)
  named      one sub-agent the project defines (.claude/agents/reviewer.md)
  fork       two sibling forks; also checks that the siblings' bodies are
             the same up to their directives, in both binaries
  resume     a prompt, then `run --continue` with a second one

It also renders the first request with `cadre render` in four flag
settings. Prints one line per scenario and exits 1 on any difference,
showing the first differing bytes. Standard library only; the fake server
is bench/fake_anthropic.py.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The whole-process benchmark's settings and prompts, so both measure the
# same runs; `roundtrip` is this script's own.
from compare import CADRE_CONFIG as CONFIG, CADRE_FORK_CONFIG as FORK, PROMPTS as BENCH_PROMPTS  # noqa: E402
from fleet import free_port  # noqa: E402

PROMPTS = {
    "plain": "Say hello.",
    "readgrep": "Read the README and find the fixture in it.",
    **{k: BENCH_PROMPTS[k] for k in ("script3",)},
    "roundtrip": "List the markdown files, then answer.",
    **{k: BENCH_PROMPTS[k] for k in ("explore",)},
    "named": "Have the reviewer look at the README.",
    **{k: BENCH_PROMPTS[k] for k in ("fork",)},
    "resume": "Say hello.",
}
# The second prompt of `resume`, sent with `run --continue`.
RESUMED = "And once more."
# The server's scenario where it is not the scenario's own name.
SERVER_SCENARIO = {"resume": "plain"}
# The project's own agent, for `named`.
REVIEWER = """---
name: reviewer
description: Reviews files and reports what it found
tools: Read, Grep, Glob
---
You review the files you are given and report what you found.
"""
# `cadre render` settings: (config file, global flags, extra environment).
RENDERS = {
    "default": (CONFIG, [], {}),
    "fork-on": (CONFIG + FORK, [], {}),
    "no-background": (CONFIG, ["--feature", "DISABLE_BACKGROUND_TASKS=on"], {}),
    "coordinator": (CONFIG, [], {"CADRE_MODE": "coordinator"}),
}


def http(url, method="GET"):
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read()


def normalise(text, work):
    """Replaces what legitimately differs between two runs."""
    text = text.replace(work, "<WORK>")
    text = re.sub(r"\d{4}-\d{2}-\d{2}", "<DATE>", text)
    text = re.sub(r"\b\d{8}T\d{6}-[0-9a-f]{8}\b", "<SESSION>", text)
    text = re.sub(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<UUID>", text)
    text = re.sub(r"agent-[0-9a-f]{6,}", "agent-<ID>", text)
    text = re.sub(r"\ba[0-9a-f]{15,17}\b", "<AGENT>", text)
    text = re.sub(r"toolu_[A-Za-z0-9]+", "toolu_<ID>", text)
    text = re.sub(r"\b\d+(\.\d+)?\s?(ms|s)\b", "<T>", text)
    text = re.sub(r"duration_ms[^0-9]*\d+", "duration_ms <N>", text)
    return text


def run(binary, scenario, work, base, dump):
    proj = os.path.join(work, "proj")
    for name in os.listdir(work):
        if name != "dump":
            shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    os.makedirs(proj)
    os.makedirs(os.path.join(work, "home"))
    with open(os.path.join(proj, "README.md"), "w") as f:
        f.write("# Fixture\nA fixture.\n")
    with open(os.path.join(proj, "cadre.toml"), "w") as f:
        f.write(CONFIG + (FORK if scenario == "fork" else ""))
    if scenario == "named":
        os.makedirs(os.path.join(proj, ".claude", "agents"))
        with open(os.path.join(proj, ".claude", "agents", "reviewer.md"), "w") as f:
            f.write(REVIEWER)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.path.join(work, "home"), "NO_COLOR": "1",
           "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "sk-compare-dummy", "TZ": "UTC"}
    shutil.rmtree(dump, ignore_errors=True)
    os.makedirs(dump)
    http(f"{base}/_reset?scenario={SERVER_SCENARIO.get(scenario, scenario)}", "POST")
    runs = [["run", PROMPTS[scenario]]]
    if scenario == "resume":
        runs.append(["run", "--continue", RESUMED])
    for args in runs:
        p = subprocess.run([binary, *args], cwd=proj, env=env, capture_output=True,
                           text=True, timeout=120)
        if p.returncode != 0:
            sys.exit(f"{binary} {scenario}: exit {p.returncode}\n{p.stderr[-2000:]}")
    time.sleep(0.2)
    bodies = []
    for name in sorted(os.listdir(dump)):
        with open(os.path.join(dump, name), encoding="utf-8", errors="replace") as f:
            bodies.append((name.split("-", 1)[1], normalise(f.read(), work)))
    # Sibling requests may reach the server in either order.
    return sorted(bodies)


def render(binary, setting, work):
    config, args, extra = setting
    proj = os.path.join(work, "proj")
    with open(os.path.join(proj, "cadre.toml"), "w") as f:
        f.write(config)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.path.join(work, "home"), "NO_COLOR": "1",
           "ANTHROPIC_API_KEY": "sk-compare-dummy", "TZ": "UTC", **extra}
    p = subprocess.run([binary, *args, "render", "Say hello."], cwd=proj, env=env,
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit(f"{binary} render {args}: exit {p.returncode}\n{p.stderr[-2000:]}")
    return normalise(p.stdout, work)


def sibling_share(bodies):
    """Two fork children's bodies: how many bytes they share from the
    start, and the length of the longer (the rest is each one's directive)."""
    children = [b for k, b in bodies if k.startswith("child")]
    if len(children) != 2:
        return None
    a, b = children
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return n, max(len(a), len(b))


def first_difference(a, b):
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"at byte {n}:\n  old: {a[max(0, n - 80):n + 120]!r}\n  new: {b[max(0, n - 80):n + 120]!r}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--keep", help="keep the work folder here")
    ap.add_argument("--only", help="these scenarios only (comma-separated)")
    args = ap.parse_args()
    scenarios = args.only.split(",") if args.only else list(PROMPTS)
    work = os.path.realpath(args.keep or tempfile.mkdtemp(prefix="same-requests-"))
    os.makedirs(work, exist_ok=True)
    dump = os.path.join(work, "dump")
    port = free_port()
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_anthropic.py"), "--port", str(port),
                               "--dump", dump], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    failed = 0
    try:
        for _ in range(50):
            try:
                http(f"{base}/_stats")
                break
            except OSError:
                time.sleep(0.1)
        for scenario in scenarios:
            old = run(os.path.abspath(args.old), scenario, work, base, dump)
            new = run(os.path.abspath(args.new), scenario, work, base, dump)
            same = old == new
            size = sum(len(b) for _, b in new)
            print(f"{scenario:10} {len(old)} vs {len(new)} requests, {size} bytes: "
                  f"{'identical' if same else 'DIFFERENT'}")
            if not same:
                failed += 1
                for (ka, a), (kb, b) in zip(old, new):
                    if a != b:
                        print(f"  {ka} vs {kb} {first_difference(a, b)}")
                if len(old) != len(new):
                    print(f"  kinds: old {[k for k, _ in old]}, new {[k for k, _ in new]}")
            if scenario == "fork":
                shares = [sibling_share(bodies) for bodies in (old, new)]
                for name, share in zip(("old", "new"), shares):
                    if share is None:
                        print(f"  fork siblings ({name}): not two children")
                        failed += 1
                    else:
                        print(f"  fork siblings ({name}): the first {share[0]} of {share[1]} bytes "
                              f"identical ({100 * share[0] / share[1]:.1f}%)")
        for name, flags in RENDERS.items():
            old = render(os.path.abspath(args.old), flags, work)
            new = render(os.path.abspath(args.new), flags, work)
            print(f"render {name:14} {len(new)} bytes: {'identical' if old == new else 'DIFFERENT'}")
            if old != new:
                failed += 1
                print("  " + first_difference(old, new))
    finally:
        server.kill()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
