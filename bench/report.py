#!/usr/bin/env python3
"""Renders docs/benchmarks.md and docs/benchmarks.svg from the files that
bench/run-all leaves in target/bench/ (compare.json, session.json, bg1000.json,
fork.txt, catalog.txt, reload.txt, fuzz.md, loadavg-*.txt,
claude-code-version.txt), and docs/benchmarks-scale.svg (catalog load,
reload latency).

When compare.json is missing (Claude Code not rerun: `SKIP_CLAUDE_CODE=1`),
the Claude Code section of the existing docs/benchmarks.md is kept as it
was, marked as from an earlier run.

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
        m = re.match(r"^[│ ]\s+[├╰]─ (\S+)\s+(.*)$", line)
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


def bars(svg_path, title, panels):
    """A row of log-scale bar panels: panels = [(title, [(label, value)])]."""
    files = []
    lines = [f"set terminal svg size {450 * len(panels)},360 dynamic font 'sans,11' background '#ffffff'",
             f"set output '{svg_path}'", f"set multiplot layout 1,{len(panels)} title '{title}'",
             "set style data histogram", "set style fill solid 0.85 border -1", "set boxwidth 0.8",
             "set logscale y", "set grid ytics", "unset key"]
    for i, (ptitle, rows) in enumerate(panels):
        dat = f"{svg_path}.{i}.dat"
        files.append(dat)
        with open(dat, "w") as f:
            for label, v in rows:
                f.write(f"\"{label}\" {max(v, 0.001):.4f}\n")
        lines += [f"set title '{ptitle}'",
                  f"plot '{dat}' using 2:xtic(1) lc rgb '#2b7bba', '' using 0:2:(sprintf('%.4g', $2)) with labels offset 0,0.7 notitle"]
    lines.append("unset multiplot")
    r = subprocess.run(["gnuplot"], input="\n".join(lines) + "\n", text=True, capture_output=True)
    for f in files:
        os.remove(f)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        return False
    return True


def reload_figures(text):
    """Figures printed by the reload_benchmark test (tests/suite/reload.rs)."""
    f = {}
    m = re.search(r"latency above the ([\d.]+) ms debounce over (\d+) edits: p50 ([\d.]+) ms, p99 ([\d.]+) ms, "
                  r"max ([\d.]+) ms; rebuild\+swap p50 ([\d.]+) ms", text)
    if m:
        f.update(debounce=m.group(1), edits=m.group(2), p50=float(m.group(3)), p99=float(m.group(4)),
                 max=float(m.group(5)), swap_p50=float(m.group(6)))
    m = re.search(r"rebuild\+swap in `cadre watch` with 1000 agent files on disk: p50 ([\d.]+) ms, max ([\d.]+) ms", text)
    if m:
        f.update(rebuild1k_p50=float(m.group(1)), rebuild1k_max=float(m.group(2)))
    m = re.search(r"snapshot::build with 1000 agent files on disk \((\d+) agents loaded\): p50 ([\d.]+) ms, "
                  r"min ([\d.]+) ms, max ([\d.]+) ms", text)
    if m:
        f.update(build_agents=int(m.group(1)), build_p50=float(m.group(2)), build_min=float(m.group(3)),
                 build_max=float(m.group(4)))
    shares = re.findall(r"prefix share after (.+?): ([\d.]+)% of (\d+) B \(tools unchanged: (\w+), "
                        r"system unchanged: (\w+)\)", text)
    if shares:
        f["prefix_shares"] = [(what, float(pct), int(n), tools, system) for what, pct, n, tools, system in shares]
    return f


def step_load(text):
    """The `loadavg at the end: ...` line bench/run-all appends to a step's output."""
    m = re.search(r"loadavg at the end: (\S+ \S+ \S+)", text)
    return f" Load average (1/5/15 min) at the end of this step: {m.group(1)}." if m else ""


def previous_section(path, start, end):
    """The text of an earlier docs/benchmarks.md between two headings."""
    text = read(path)
    i = text.find(start)
    if i < 0:
        return ""
    j = text.find(end, i + len(start))
    return text[i:j if j >= 0 else len(text)].strip()


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


def before_after(w, startup, session, bg, bg_mem, same=""):
    """The "Before and after" table, when run-all measured a BASELINE build
    in turn with this one (`baseline` in the reports), and what
    bench/same-requests.py said of the two (`same`)."""
    if not (startup or {}).get("baseline"):
        return
    rows = []

    def row(label, old, new, unit, digits):
        if old is None or new is None:
            return
        change = (new - old) / old * 100 if old else 0.0
        rows.append(f"| {label} | {old:.{digits}f} {unit} | {new:.{digits}f} {unit} | {change:+.1f}% |")

    for name, label in (("version", "`cadre --version`, median wall"),
                        ("render", "`cadre render hello`, median wall")):
        o = startup["baseline"]["commands"].get(name, {})
        n = startup["commands"].get(name, {})
        row(label, (o.get("wall_ms") or {}).get("median"), (n.get("wall_ms") or {}).get("median"), "ms", 2)
        if o.get("instructions") and n.get("instructions"):
            row(label.replace("median wall", "instructions"), o["instructions"] / 1e6,
                n["instructions"] / 1e6, "M", 2)
    for report, scenario, label in ((session, "script3", "`cadre run`, 3 requests"),
                                    (bg, "bg1000", "1,000 background sub-agents (ext4)"),
                                    (bg_mem, "bg1000", "1,000 background sub-agents (tmpfs)")):
        progs = ((report or {}).get("scenarios", {}).get(scenario) or {})
        o, n = progs.get("baseline") or {}, progs.get("cadre") or {}
        for key, what, unit, digits in (("wall_ms", "median wall", "ms", 1),
                                        ("rss_mib", "peak RSS", "MiB", 1),
                                        ("cpu_per_child_turn_ms", "CPU per sub-agent turn", "ms", 3)):
            if o.get(key) and n.get(key):
                row(f"{label}, {what}", o[key]["median"], n[key]["median"], unit, digits)
    w("## Before and after\n")
    w("`BASELINE=OLD bench/run-all`: the build named by `BASELINE` (`baseline`) and this one "
      "(`cadre`), each run of one in turn with the same run of the other, so both saw the same "
      "load. Medians; the change is this build against the baseline.\n")
    w("| | baseline | this build | change |")
    w("| --- | --- | --- | --- |")
    for r in rows:
        w(r)
    w("")
    note = read(os.path.join(os.path.dirname(os.path.abspath(__file__)), "before-after-notes.md")).strip()
    if note:
        w(note + "\n")
    if same.strip():
        w("`bench/same-requests.py baseline this-build`: the request bodies each sends the fake "
          "model in the same scenarios, compared byte for byte after replacing ids, times and the "
          "temporary folder:\n")
        w("```")
        w(same.strip())
        w("```\n")


def before_after_only(src, docs):
    """Rewrites only the "Before and after" section of docs/benchmarks.md
    (placed before "## Start-up" when it is not there yet)."""
    lines = []
    before_after(lines.append, load_json(os.path.join(src, "startup.json")),
                 load_json(os.path.join(src, "session.json")), load_json(os.path.join(src, "bg1000.json")),
                 load_json(os.path.join(src, "bg1000-tmpfs.json")),
                 read(os.path.join(src, "same-requests.txt")))
    if not lines:
        sys.exit("no baseline in target/bench/startup.json: run with BASELINE=")
    load_start = read(os.path.join(src, "loadavg-start.txt")).split()[:3]
    load_end = read(os.path.join(src, "loadavg-end.txt")).split()[:3]
    lines.insert(2, f"Load average at the start / end: {' '.join(load_start)} / {' '.join(load_end)}.\n")
    section = "\n".join(lines) + "\n"
    path = os.path.join(docs, "benchmarks.md")
    text = read(path)
    start = text.find("## Before and after\n")
    if start >= 0:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + text[end + 1:]
    else:
        at = text.find("## Start-up\n")
        text = text[:at] + section + text[at:]
    with open(path, "w") as f:
        f.write(text)


def main():
    if sys.argv[1] == "--before-after-only":
        before_after_only(sys.argv[2], sys.argv[3])
        return
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
    bg = load_json(os.path.join(src, "bg1000.json"))
    bg_mem = load_json(os.path.join(src, "bg1000-tmpfs.json"))
    startup = load_json(os.path.join(src, "startup.json"))
    floor = read(os.path.join(src, "server-floor.txt")).strip()
    server_name = ("`bench/fake_anthropic.rs` (tokio and axum, one thread; built as the "
                   "`fake_anthropic` example)") if (compare or {}).get("server") == "rust" else \
        "`bench/fake_anthropic.py`, Python stdlib"

    reload = reload_figures(read(os.path.join(src, "reload.txt")))
    old_md = os.path.join(docs, "benchmarks.md")
    kept_cc = "" if compare else previous_section(old_md, "**Claude Code:**", "## `cadre run`")
    svg = os.path.join(docs, "benchmarks.svg")
    have_chart = chart(compare, session, svg) if compare else False
    catalog_rows = divan_rows(read(os.path.join(src, "catalog.txt")))
    scale_panels = []
    cat_pts = [(r[0].split("/")[-1], to_ms(r[3])) for r in catalog_rows if r[0].startswith("load_catalog")]
    cat_pts = [(f"{int(n):,}".replace(",000", "k") if n.isdigit() else n, v) for n, v in cat_pts if v]
    if cat_pts:
        scale_panels.append(("catalog::load, median ms", cat_pts))
    if reload.get("p50") is not None:
        pts = [("p50", reload["p50"]), ("p99", reload["p99"])]
        if reload.get("rebuild1k_p50") is not None:
            pts.append(("1k-agent rebuild", reload["rebuild1k_p50"]))
        scale_panels.append(("reload latency above debounce, ms", pts))
    bgc = ((bg or {}).get("scenarios", {}).get("bg1000") or {}).get("cadre") or {}
    if bgc.get("wall_ms"):
        scale_panels.append(("1,000 background sub-agents", [
            ("wall ms", bgc["wall_ms"]["median"]), ("peak RSS MiB", bgc["rss_mib"]["median"]),
            ("CPU ms per turn", bgc["cpu_per_child_turn_ms"]["median"])]))
    scale_svg = os.path.join(docs, "benchmarks-scale.svg")
    have_scale = bool(scale_panels) and bars(scale_svg, "cadre at scale (log scale)", scale_panels)

    out = []
    w = out.append
    w("# Benchmarks\n")
    w("Generated by `bench/run-all` (do not edit by hand; rerun it). Nothing here runs in CI;")
    w("the fault-injection, bad-input and load tests in `tests/suite/` do.\n")
    w(f"**Machine:** {machine()}. Shared with other builds: load average "
      f"{' '.join(load_start) or '?'} at the start and {' '.join(load_end) or '?'} at the end "
      "(1/5/15 min, from `/proc/loadavg`), so absolute times are pessimistic; "
      "the two programs ran alternately, so they saw the same load.\n")
    if have_scale:
        w("![catalog load, reload latency, 1,000 background sub-agents](benchmarks-scale.svg)\n")
    if kept_cc:
        w("_The Claude Code comparison below was not rerun this time (`SKIP_CLAUDE_CODE=1`); "
          "its figures, machine load and chart are from the earlier run, kept as they were._\n")
        w(kept_cc + "\n")
    if not kept_cc:
        w(f"**Claude Code:** {cc_version} (npm `@anthropic-ai/claude-code`, its native linux-x64 binary), "
          "offline against the local fake server with `ANTHROPIC_BASE_URL`, a dummy key, `-p`, "
          "`DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`.\n")
    if have_chart:
        w("![wall time and peak RSS, cadre vs Claude Code](benchmarks.svg)\n")
    if not kept_cc:
        w("## Whole process: cadre vs Claude Code\n")
        w(f"`bench/compare-claude-code`. One stateful fake Anthropic server ({server_name}) "
          "on 127.0.0.1 answers both programs; it tells sub-agent requests apart by "
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
              f"peak RSS {r['rss']:.4f} (1/{1 / r['rss']:.0f}). Targets: under 1/50 and 1/25.\n")
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

    if reload.get("prefix_shares"):
        w("### Between turns: the prefix a change keeps\n")
        w("`reload_benchmark_prefix_share` (`tests/suite/reload.rs`, run with the reload benchmark): a `cadre run` "
          "session whose first model reply is held until a change on disk has been reloaded; the figure is the "
          "share of the first request's bytes, in prompt-cache order (tools, system, messages), that the next "
          "request starts with — the fork-identity figure above measures the same for sibling forks. Agent types "
          "and skills are announced in `<system-reminder>` text blocks of the next user message (templates "
          "`agent_listing`, `skill_listing`), so the tool descriptions and the system prompt keep their bytes. "
          "Before this design (agent list in the Agent tool's description, the first tool; skill list in the "
          "Skill tool's), measured the same way on 2026-11-25 at commit 3eb3e6b: an added agent file kept 3.4% "
          "of the prefix, a changed description 4.5%, a removed file 4.4%, an added skill 71.8%; a template only "
          "sub-agents use already kept 99.8%.\n")
        w("| change on disk | kept prefix | tools / system bytes unchanged |")
        w("| --- | --- | --- |")
        for what, pct, n, tools, system in reload["prefix_shares"]:
            w(f"| {what} | {pct:.1f}% of {n:,} B | {tools} / {system} |")
        w("")

    before_after(w, startup, session, bg, bg_mem, read(os.path.join(src, "same-requests.txt")))

    w("## Start-up\n")
    cmds = (startup or {}).get("commands") or {}
    if cmds:
        w("`python3 bench/startup.py --cadre target/release/cadre --runs 40`: `cadre --version`, and "
          "`cadre render hello` (loads the settings, agents, templates and tool specs, renders the "
          "first request body and prints it; sends nothing) in a fixture project. Wall time from "
          "`time.perf_counter()` around the process (min, median, max); instructions counted by "
          "callgrind, which do not depend on the machine's load. Load average at the start / end: "
          f"{' '.join(startup.get('loadavg_start', []))} / {' '.join(startup.get('loadavg_end', []))}.\n")
        w("| command | min | median | max | instructions | target |")
        w("| --- | --- | --- | --- | --- | --- |")
        for name, label, target in (("version", "`cadre --version`", "2 ms"),
                                    ("render", "`cadre render hello`", "5 ms")):
            c = cmds.get(name)
            if not c:
                continue
            wm = c["wall_ms"]
            ins = f"{c['instructions'] / 1e6:.1f} M" if c.get("instructions") else "n/a"
            w(f"| {label} | {wm['min']:.2f} ms | {wm['median']:.2f} ms | {wm['max']:.2f} ms | {ins} | {target} |")
        w("")
    else:
        w("_Not in this run (`target/bench/startup.json` is missing)._\n")

    w("## `cadre run`: a 3-request scripted session\n")
    s3 = ((session or {}).get("scenarios", {}).get("script3") or {}).get("cadre", {})
    w("`python3 bench/compare.py --cadre target/release/cadre --scenario script3 --runs 10`: "
      "Glob tool call, Glob tool call, final answer, against the same fake server; start to exit.\n")
    w("| | median of 10 | target |")
    w("| --- | --- | --- |")
    w(f"| wall time | {fmt_ms(s3.get('wall_ms'))} | under 30 ms |")
    w(f"| peak RSS | {fmt_mib(s3.get('rss_mib'))} | under 20 MiB |\n")

    w("## 1,000 background sub-agents against a 100 ms server\n")
    if bgc.get("wall_ms"):
        n = bgc["notifications"][0] if bgc.get("notifications") else {}
        args = (bg or {}).get("args", {})
        w(f"`python3 bench/compare.py --cadre target/release/cadre --scenario bg1000 --runs {bgc['wall_ms']['n']}`: "
          f"one parent makes {n.get('count', 1000):,} Agent calls with `run_in_background: true` in one turn "
          "(`agents.max_concurrent = 1000` in the bench config); the fake server holds every model answer "
          f"{args.get('latency_ms', 100)} ms before its first byte. Every sub-agent makes one turn (one request). "
          "`cadre run` waits for its tasks, so the process ends after the last notification has been "
          "delivered to the parent and answered. CPU is user+sys of the cadre process (`/usr/bin/time -v`). "
          f"The server is {'`bench/fake_anthropic.rs`' if bg.get('server') == 'rust' else '`bench/fake_anthropic.py`'}"
          + (", over HTTPS with the test certificate (tests/fixtures/tls, trusted through `SSL_CERT_FILE`): "
             "HTTP/2 is negotiated by ALPN as with the real API, and one connection carries every request"
             + (f" ({bg['h2_streams']} concurrent streams at most)" if bg.get("h2_streams") else
                " (no stream limit announced)")
             if str(bg.get("transport", "")).startswith("https") else
             ", over plain HTTP/1.1 (one connection per request in flight)")
          + (f"; its own floor (`fake_anthropic --floor 1000 --latency-ms 100`: 1,000 concurrent "
             f"requests from a client in its own process, same thread): {floor}" if floor else "") + ".\n")
        w(f"Load average at the start / end of this step: {' '.join((bg or {}).get('loadavg_start', []))} / "
          f"{' '.join((bg or {}).get('loadavg_end', []))}.\n")
        w("| figure | value | target |")
        w("| --- | --- | --- |")
        w(f"| wall time to the last notification (= process end), run folder on {bg.get('run_folder_fs', '?')} "
          f"| {fmt_ms(bgc.get('wall_ms'))} | under 600 ms |")
        memc = ((bg_mem or {}).get("scenarios", {}).get("bg1000") or {}).get("cadre") or {}
        if memc.get("wall_ms"):
            mc = memc.get("cpu_per_child_turn_ms") or {}
            w(f"| the same, run folder on {bg_mem.get('run_folder_fs', '?')} (`TMPDIR=/dev/shm`) | "
              f"{fmt_ms(memc.get('wall_ms'))}; CPU per sub-agent {mc.get('median', 0):.2f} ms | under 600 ms |")
        lm = bgc.get("last_main_request_s")
        if lm:
            w(f"| start of the parent's last request (after the last notification), from the server's reset | "
              f"{lm['median'] * 1000:.0f} ms (median) | |")
        w(f"| peak RSS | {fmt_mib(bgc.get('rss_mib'))} | under 64 MiB |")
        cpu = bgc.get("cpu_s") or {}
        w(f"| engine CPU (user+sys) | {cpu.get('median', 0) * 1000:.0f} ms ({cpu.get('min', 0) * 1000:.0f}–{cpu.get('max', 0) * 1000:.0f}) | |")
        c = bgc.get("cpu_per_child_turn_ms") or {}
        w(f"| engine CPU per sub-agent turn | {c.get('median', 0):.2f} ms ({c.get('min', 0):.2f}–{c.get('max', 0):.2f}) | under 0.5 ms |")
        w(f"| requests | {n.get('child_requests', 0):,} sub-agent, {n.get('main_requests', 0)} parent | |")
        w(f"| notifications in the parent's last request | {n.get('count', 0):,} (distinct `<tool-use-id>`s: "
          f"{n.get('distinct_ids', 0):,}; completed: {n.get('completed', 0):,}) | one per task |")
        if bgc.get("failed_runs"):
            w(f"| failed runs (excluded) | {bgc['failed_runs']} | |")
        w(f"| request bytes sent | {int((bgc.get('request_bytes') or {}).get('median', 0)):,} B | |")
        w("")
        note = read(os.path.join(os.path.dirname(os.path.abspath(__file__)), "bg1000-notes.md")).strip()
        if note:
            w(note + "\n")
    else:
        w("_Not in this run (`target/bench/bg1000.json` is missing)._\n")

    w("## Reload latency\n")
    w("`CADRE_BENCH_BIN=target/release/cadre cargo test --test all -- --ignored --nocapture reload_benchmark` "
      "(`tests/suite/reload.rs`): a release `cadre watch` over a project; 200 edits of `cadre.toml` "
      "(flipping a feature flag, 60 ms apart), each timed from the write to the reload event on the "
      "watcher's stdout, minus the debounce. Then 1,000 agent files are written to `.claude/agents/` "
      "and 30 forced reloads (SIGHUP) are timed by the binary itself (rebuild of the snapshot and the "
      "swap). `snapshot::build` with the same files is then timed in the test process, which is a "
      "**debug** build (`cargo test`), so that figure is pessimistic."
      + step_load(read(os.path.join(src, "reload.txt"))) + "\n")
    if reload:
        w("| figure | value |")
        w("| --- | --- |")
        if "p50" in reload:
            w(f"| latency above the {reload['debounce']} ms debounce, {reload['edits']} edits | p50 {reload['p50']:.1f} ms, "
              f"p99 {reload['p99']:.1f} ms, max {reload['max']:.1f} ms |")
            w(f"| rebuild + swap per edit (small project) | p50 {reload['swap_p50']:.1f} ms |")
        if "rebuild1k_p50" in reload:
            w(f"| rebuild + swap with 1,000 agent files (release `cadre watch`) | p50 {reload['rebuild1k_p50']:.1f} ms, "
              f"max {reload['rebuild1k_max']:.1f} ms |")
        if "build_p50" in reload:
            w(f"| `snapshot::build`, 1,000 agent files, {reload['build_agents']:,} agents (debug build) | "
              f"p50 {reload['build_p50']:.1f} ms, min {reload['build_min']:.1f}, max {reload['build_max']:.1f} ms |")
        w("")
    else:
        w("_Not in this run (`target/bench/reload.txt` is missing)._\n")

    w("## Forks: memory and shared bytes\n")
    w("`cargo bench --bench fork` (`benches/fork.rs`). A counting global allocator measures "
      "the bytes allocated while building the forks with `fork_messages`; the sibling bodies are "
      "`Provider::request_body` of two fork requests." + step_load(fork_txt) + "\n")
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
      "100 per folder. 100k is an ignored bench (3 samples) because generating its files is slow. "
      "Target: 100,000 files in 500 ms, linear. Where a load's time goes and each change's "
      "before/after figures: [`bench/catalog-notes.md`](../bench/catalog-notes.md)."
      + step_load(read(os.path.join(src, "catalog.txt"))) + "\n")
    rows = catalog_rows
    if not rows:
        w("_No figures in this run: `target/bench/catalog.txt` is missing (the release build of the "
          "benches had not finished; rerun `bench/run-all`)._\n")
    if rows:
        w("| files | fastest | slowest | median | mean |")
        w("| --- | --- | --- | --- | --- |")
        for r in rows:
            w("| " + " | ".join(r) + " |")
        w("")

    w("## Fuzzing\n")
    w(read(os.path.join(src, "fuzz.md")).strip() or "See `fuzz/README.md` for how to run the targets.")
    w("")
    with open(os.path.join(docs, "benchmarks.md"), "w") as f:
        f.write("\n".join(out).rstrip() + "\n")


if __name__ == "__main__":
    main()
