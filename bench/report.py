#!/usr/bin/env python3
"""Renders docs/benchmarks.md and docs/benchmarks.svg from the files that
bench/run-all leaves in target/bench/ (compare.json, session.json, fork.txt,
catalog.txt, loadavg-*.txt, claude-code-version.txt).

    python3 bench/report.py target/bench docs
"""

import json
import os
import platform
import re
import subprocess
import sys


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError:
        return None


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def fmt_ms(s):
    if not s:
        return "n/a"
    return f"{s['median']:.1f} ms ({s['min']:.1f}–{s['max']:.1f}, IQR {s['p25']:.1f}–{s['p75']:.1f}, n={s['n']})"


def fmt_mib(s):
    if not s:
        return "n/a"
    return f"{s['median']:.1f} MiB ({s['min']:.1f}–{s['max']:.1f}, n={s['n']})"


def divan_rows(text):
    """(name, fastest, slowest, median, mean) for each leaf row of divan's table."""
    rows = []
    parent = None
    for line in text.splitlines():
        m = re.match(r"^[├╰]─ (\S+)\s*(.*)$", line)
        if m:
            parent = m.group(1)
            rest = m.group(2)
            cells = [c.strip() for c in rest.split("│")]
            if cells and cells[0]:
                rows.append((parent, *cells[:4]))
            continue
        m = re.match(r"^│\s+[├╰]─ (\S+)\s+(.*)$", line)
        if m and parent:
            cells = [c.strip() for c in m.group(2).split("│")]
            rows.append((f"{parent}/{m.group(1)}", *cells[:4]))
    return rows


def to_ms(cell):
    m = re.match(r"([\d.]+)\s*(ns|µs|us|ms|s)", cell or "")
    if not m:
        return None
    v = float(m.group(1))
    return v * {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1000.0}[m.group(2)]


def machine():
    cpu = "unknown CPU"
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = ""
    for line in read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal"):
            mem = f"{int(line.split()[1]) // 1024 // 1024} GiB"
    cores = os.cpu_count()
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{cpu}, {cores} cores, {mem} RAM, {platform.system()} {platform.release()}; {rustc}"


def chart(compare, session, svg_path):
    """Two log-scale panels: wall time and peak RSS, per program and scenario."""
    rows = []
    for sc in ("explore", "fork"):
        data = (compare or {}).get("scenarios", {}).get(sc, {})
        c = data.get("cadre", {})
        k = data.get("claude-code", {})
        rows.append((sc,
                     (c.get("wall_ms") or {}).get("median", 0), (k.get("wall_ms") or {}).get("median", 0),
                     (c.get("rss_mib") or {}).get("median", 0), (k.get("rss_mib") or {}).get("median", 0)))
    s3 = ((session or {}).get("scenarios", {}).get("script3", {}) or {}).get("cadre", {})
    rows.append(("3-request", (s3.get("wall_ms") or {}).get("median", 0), 0,
                 (s3.get("rss_mib") or {}).get("median", 0), 0))
    dat = svg_path + ".dat"
    with open(dat, "w") as f:
        f.write("scenario cadre_ms cc_ms cadre_mib cc_mib\n")
        for r in rows:
            f.write(" ".join([r[0]] + [f"{max(x, 0.001):.3f}" if x else "NaN" for x in r[1:]]) + "\n")
    script = f"""
set terminal svg size 900,380 dynamic font 'sans,11' background '#ffffff'
set output '{svg_path}'
set multiplot layout 1,2 title 'cadre vs Claude Code (median, log scale)'
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set grid ytics
set key top left
set title 'wall time (ms)'
plot '{dat}' using 2:xtic(1) title 'cadre' lc rgb '#2b7bba', '' using 3 title 'Claude Code' lc rgb '#d95f02'
set title 'peak RSS (MiB)'
plot '{dat}' using 4:xtic(1) title 'cadre' lc rgb '#2b7bba', '' using 5 title 'Claude Code' lc rgb '#d95f02'
unset multiplot
"""
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    os.remove(dat)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        return False
    return True


def main():
    src, docs = sys.argv[1], sys.argv[2]
    compare = load_json(os.path.join(src, "compare.json"))
    session = load_json(os.path.join(src, "session.json"))
    fork_txt = read(os.path.join(src, "fork.txt"))
    catalog_txt = read(os.path.join(src, "catalog.txt"))
    cc_version = read(os.path.join(src, "claude-code-version.txt")).strip() or "not run"
    load_start = read(os.path.join(src, "loadavg-start.txt")).split()[:3]
    load_end = read(os.path.join(src, "loadavg-end.txt")).split()[:3]
    # Allocation counts do not depend on the build profile; fork-figures.txt
    # may hold them from a quick `--profile dev -- --test` run.
    figures = dict(re.findall(r"^FIGURE (\w+)=(\S+)$",
                              read(os.path.join(src, "fork-figures.txt")) + fork_txt, re.M))
    svg = os.path.join(docs, "benchmarks.svg")
    have_chart = chart(compare, session, svg)

    out = []
    w = out.append
    w("# Benchmarks\n")
    w("Generated by `bench/run-all` (do not edit by hand; rerun it). Nothing here runs in CI;")
    w("the fault-injection, bad-input and load tests in `tests/suite/` do.\n")
    w(f"**Machine:** {machine()}. Shared with other builds: load average "
      f"{' '.join(load_start) or '?'} at the start and {' '.join(load_end) or '?'} at the end "
      "(1/5/15 min, from `/proc/loadavg`), so absolute times are pessimistic; "
      "the two programs ran alternately, so they saw the same load.\n")
    w(f"**Claude Code:** {cc_version} (npm `@anthropic-ai/claude-code`, its native linux-x64 binary), "
      "offline against the local fake server with `ANTHROPIC_BASE_URL`, a dummy key, `-p`, "
      "`DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`.\n")
    if have_chart:
        w("![wall time and peak RSS, cadre vs Claude Code](benchmarks.svg)\n")

    w("## Whole process: cadre vs Claude Code\n")
    w("`bench/compare-claude-code`. One stateful fake Anthropic server (`bench/fake_anthropic.py`, "
      "Python stdlib) on 127.0.0.1 answers both programs; it tells sub-agent requests apart by "
      "`cc_is_subagent=true` in Claude Code's first system block and by the system prompt for cadre. "
      "Wall time is start to exit (`time.perf_counter()` around the process); peak RSS is "
      "`/usr/bin/time -v`'s maximum resident set size. One warm-up round, then N rounds, "
      "alternating which program goes first. Median (min–max, interquartile range).\n")
    scen = (compare or {}).get("scenarios", {})
    names = {"explore": "parent → one `Explore` sub-agent → final answer",
             "fork": "parent → two sibling forks → final answer"}
    for sc in ("explore", "fork"):
        d = scen.get(sc)
        if not d:
            continue
        w(f"### `{sc}`: {names[sc]}\n")
        w("| | cadre | Claude Code |")
        w("| --- | --- | --- |")
        c, k = d.get("cadre", {}), d.get("claude-code", {})
        w(f"| wall time | {fmt_ms(c.get('wall_ms'))} | {fmt_ms(k.get('wall_ms'))} |")
        w(f"| peak RSS | {fmt_mib(c.get('rss_mib'))} | {fmt_mib(k.get('rss_mib'))} |")
        rb = lambda x: f"{int((x.get('request_bytes') or {}).get('median', 0)):,} B in {int((x.get('requests') or {}).get('median', 0))} requests" if x.get("request_bytes") else "n/a"
        w(f"| request bytes sent | {rb(c)} | {rb(k)} |")
        w(f"| request kinds | {', '.join(c.get('request_kinds') or [])} | {', '.join(k.get('request_kinds') or [])} |")
        if sc == "fork":
            def share(x):
                s = (x.get("child_shared") or [None])[0]
                if not s:
                    return "n/a"
                return (f"{s['share_a']:.1%} / {s['share_b']:.1%} of {s['a_bytes']:,} / {s['b_bytes']:,} B "
                        f"(common prefix {s['common_prefix']:,} B); in prompt-cache order "
                        f"(tools, system, messages): {s['cache_order_share_a']:.1%}")
            w(f"| sibling fork requests: longest common prefix / length | {share(c)} | {share(k)} |")
        fails = [f"{n}: {x.get('failed_runs')}" for n, x in (("cadre", c), ("Claude Code", k)) if x.get("failed_runs")]
        if fails:
            w(f"| failed runs (excluded) | {'; '.join(fails)} | |")
        r = d.get("ratio_cadre_over_claude_code")
        if r:
            w(f"\n**cadre / Claude Code:** wall time {r['wall']:.4f} (1/{1 / r['wall']:.0f}), "
              f"peak RSS {r['rss']:.4f} (1/{1 / r['rss']:.0f}). Targets: under 1/50 and 1/15.\n")
        else:
            w("")
    if scen.get("fork"):
        w("Claude Code's request body puts `messages` before `system` and `tools`, so its raw common "
          "prefix ends where the siblings' messages diverge; the prompt-cache-order share re-serialises "
          "each body as tools, system, messages to show what a prompt cache can reuse. Claude Code runs "
          "forks in the background (its fork children carry only their own tool_use in the cloned "
          "assistant message, and the parent makes extra turns for the notifications); cadre's forks "
          "are foreground and clone the whole assistant message, so siblings differ only in their "
          "directive.\n")

    w("## `cadre run`: a 3-request scripted session\n")
    s3 = ((session or {}).get("scenarios", {}).get("script3") or {}).get("cadre", {})
    w("`python3 bench/compare.py --cadre target/release/cadre --scenario script3 --runs 10`: "
      "Glob tool call, Glob tool call, final answer, against the same fake server; start to exit.\n")
    w("| | median of 10 | target |")
    w("| --- | --- | --- |")
    w(f"| wall time | {fmt_ms(s3.get('wall_ms'))} | under 30 ms |")
    w(f"| peak RSS | {fmt_mib(s3.get('rss_mib'))} | under 20 MiB |\n")

    w("## Forks: memory and shared bytes\n")
    w("`cargo bench --bench fork` (`benches/fork.rs`). A counting global allocator measures "
      "the bytes allocated while building the forks with `fork_messages`; the sibling bodies are "
      "`Provider::request_body` of two fork requests.\n")
    if figures:
        w("| figure | value | target |")
        w("| --- | --- | --- |")
        w(f"| parent history | {int(figures['fork_parent_history_bytes']):,} B of text in {figures['fork_parent_messages']} messages | |")
        w(f"| memory added by 10 forks (live after building) | {int(figures['fork10_live_bytes_added']):,} B | well under 2 MiB |")
        w(f"| bytes allocated while building them | {int(figures['fork10_allocated_bytes']):,} B | |")
        w(f"| sibling bodies (50 KB parent history) | {int(figures['fork_body_a_bytes']):,} B and {int(figures['fork_body_b_bytes']):,} B | |")
        w(f"| common prefix | {int(figures['fork_common_prefix_bytes']):,} B = {float(figures['fork_shared_share_a']):.2%} / {float(figures['fork_shared_share_b']):.2%} of each | everything but the directive |")
        w(f"| bytes after the prefix | {int(figures['fork_differing_tail_bytes']):,} B (the directive's own text and the closing brackets; the directive block starts {int(figures['fork_bytes_after_directive_start']):,} B from the end) | |\n")
    rows = divan_rows(fork_txt)
    if figures and not rows:
        w("_Timings not in this run: the figures above come from `cargo bench --bench fork "
          "--profile dev -- --test` (allocation counts do not depend on the profile)._\n")
    if rows:
        w("| timing (divan) | fastest | slowest | median | mean |")
        w("| --- | --- | --- | --- | --- |")
        for r in rows:
            w("| " + " | ".join(r) + " |")
        w("")

    w("## Catalog load\n")
    w("`cargo bench --bench catalog -- --include-ignored load_catalog` (`benches/catalog.rs`): "
      "`catalog::load` over generated folders of agent files, a third each .md, .yaml and .toml, "
      "100 per folder. 100k is an ignored bench (3 samples) because generating its files is slow.\n")
    rows = divan_rows(catalog_txt)
    if not rows:
        w("_No figures in this run: `target/bench/catalog.txt` is missing (the release build of the "
          "benches had not finished; rerun `bench/run-all`)._\n")
    if rows:
        w("| files | fastest | slowest | median | mean |")
        w("| --- | --- | --- | --- | --- |")
        for r in rows:
            w("| " + " | ".join(r) + " |")
        w("")

    w("## Not measured yet\n")
    w("- 1,000 concurrent **background** sub-agents against a 100 ms-latency server: background "
      "sub-agents (`run_in_background`) are not in this branch. The load test "
      "(`tests/suite/load.rs`) runs 200 **foreground** sub-agents as parallel Agent calls of one "
      "assistant message instead; switch it to background when they land.")
    w("- Reload latency p50/p99: not benchmarked in this round.\n")

    w("## Fuzzing\n")
    w(read(os.path.join(src, "fuzz.md")).strip() or "See `fuzz/README.md` for how to run the targets.")
    w("")
    with open(os.path.join(docs, "benchmarks.md"), "w") as f:
        f.write("\n".join(out).rstrip() + "\n")


if __name__ == "__main__":
    main()
