#!/usr/bin/env python3
"""The Agent SDK's query() round trip through cadre and through Claude Code.

Runs the same `query()` (Python claude-agent-sdk, from .ci/venv; install it
with scripts/test-deps-sdk) with `cli_path` pointing at each program, against
bench/fake_anthropic.py's `roundtrip` scenario (one Glob tool call, then
the final answer), alternating the programs run by run, offline. Claude Code is
the binary bundled in the SDK's wheel unless --claude says otherwise.

For each run it records the wall time of the query() call (from the call to
the last message; the SDK's import is not counted) and the peak RSS of the CLI
process, measured by /usr/bin/time around it (a wrapper script is the
cli_path; the rusage of the driver's children would count the forked Python
interpreter before exec). Prints the medians and writes
target/bench/sdk-roundtrip.json.

    .ci/venv/bin/python bench/sdk-roundtrip.py --runs 10
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# One query() in a fresh interpreter.
DRIVER = r"""
import asyncio, json, os, sys, time
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

async def main():
    opts = ClaudeAgentOptions(cli_path=sys.argv[1], cwd=sys.argv[2], allowed_tools=["Glob"])
    t0 = time.monotonic()
    result = None
    async for m in query(prompt="List the markdown files.", options=opts):
        if isinstance(m, ResultMessage):
            result = m
    wall = time.monotonic() - t0
    print(json.dumps({"wall_s": wall, "result": result.result if result else None,
                      "is_error": result.is_error if result else True,
                      "num_turns": result.num_turns if result else 0}))

asyncio.run(main())
"""


def bundled_claude():
    import claude_agent_sdk  # noqa: PLC0415

    path = os.path.join(os.path.dirname(claude_agent_sdk.__file__), "_bundled", "claude")
    return path if os.access(path, os.X_OK) else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cadre", default=os.path.join(ROOT, "target/release/cadre"))
    ap.add_argument("--claude", default=None)
    args = ap.parse_args()
    claude = args.claude or bundled_claude()
    programs = {"cadre": os.path.abspath(args.cadre)}
    if claude:
        programs["claude-code"] = os.path.abspath(claude)
    work = tempfile.mkdtemp(prefix="cadre-sdk-bench-")
    proj = os.path.join(work, "proj")
    home = os.path.join(work, "home")
    os.makedirs(proj)
    os.makedirs(home)
    with open(os.path.join(proj, "README.md"), "w") as f:
        f.write("# Fixture\n")
    with open(os.path.join(proj, "cadre.toml"), "w") as f:
        f.write('[provider]\nmodel = "claude-sonnet-4-5"\nmax_tokens = 1024\nmax_retries = 0\n')
    server = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "fake_anthropic.py"), "--port", "0", "--scenario", "roundtrip"],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = int(server.stdout.readline())
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": home,
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": "sk-bench-dummy",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    # The SDK starts the wrapper, which runs the program under /usr/bin/time.
    wrappers = {}
    for name, path in programs.items():
        w = os.path.join(work, f"{name}-under-time")
        with open(w, "w") as f:
            f.write(f'#!/bin/sh\nexec /usr/bin/time -q -f %M -o "$RSS_FILE" {path} "$@"\n')
        os.chmod(w, 0o755)
        wrappers[name] = w
    rss_file = os.path.join(work, "rss")
    env["RSS_FILE"] = rss_file
    results = {name: {"wall_s": [], "rss_kib": [], "errors": []} for name in programs}
    order = list(programs)
    try:
        for i in range(args.runs + 1):  # the first round warms caches and is dropped
            for name in order if i % 2 == 0 else order[::-1]:
                if os.path.exists(rss_file):
                    os.remove(rss_file)
                p = subprocess.run(
                    [sys.executable, "-c", DRIVER, wrappers[name], proj],
                    env=env, cwd=proj, capture_output=True, text=True, timeout=300,
                )
                if i == 0:
                    continue
                try:
                    r = json.loads(p.stdout.strip().splitlines()[-1])
                except (IndexError, ValueError):
                    r = None
                if p.returncode != 0 or not r or r["is_error"] or r["result"] != "final answer":
                    results[name]["errors"].append({"rc": p.returncode, "out": p.stdout[-400:], "err": p.stderr[-800:]})
                    continue
                results[name]["wall_s"].append(r["wall_s"])
                with open(rss_file) as f:
                    results[name]["rss_kib"].append(int(f.read().split()[-1]))
    finally:
        server.terminate()
    report = {"runs": args.runs, "programs": programs, "results": results, "median": {}}
    for name, r in results.items():
        if r["wall_s"]:
            report["median"][name] = {
                "wall_ms": round(statistics.median(r["wall_s"]) * 1000, 1),
                "peak_rss_mib": round(statistics.median(r["rss_kib"]) / 1024, 1),
                "ok_runs": len(r["wall_s"]),
                "errors": len(r["errors"]),
            }
        else:
            report["median"][name] = {"ok_runs": 0, "errors": len(r["errors"]),
                                      "first_error": r["errors"][0] if r["errors"] else None}
    out = os.path.join(ROOT, "target/bench")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "sdk-roundtrip.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report["median"], indent=2))


if __name__ == "__main__":
    main()
