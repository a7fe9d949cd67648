#!/usr/bin/env python3
"""A stateful fake Anthropic Messages server for whole-process benchmarks.

Standard library only. Listens on 127.0.0.1:PORT and answers every
`POST /v1/messages` with an SSE stream, choosing the reply by who is asking:

* a sub-agent request: Claude Code marks it with `cc_is_subagent=true` in
  its first system block; cadre's sub-agents are the requests whose system
  prompt lacks cadre's main marker ("You are cadre"). A sub-agent gets one
  text answer.
* a main-session request (it offers the Agent/Task tool): on its first turn
  it gets the scenario's tool calls; once the last message carries
  tool_results it gets the final answer.
* anything else (titles, quota probes, token counts): a short text answer.

Scenarios (`--scenario`): `explore` (one Explore sub-agent), `fork` (two
sibling forks), `script3` (three requests: Glob tool call, Glob tool call,
final answer; no sub-agent), `roundtrip` (one Glob tool call, then the final
answer once any tool_result is in the conversation), `chat` (an Explore
sub-agent, a Bash call that asks for permission, an answer in Markdown: the
capture in docs/chat.md), `bg1000` (1,000 parallel Agent calls with
`run_in_background: true` in the first turn; the count is `?children=N` on
`/_reset`).

`--rules FILE` replaces the scenario with rules read from a JSON file:
each request gets the first rule whose conditions hold (model, system
prompt, latest prompt, offered tools, thinking asked for) and that rule's
step for the number of model turns since that prompt (a tool call, text,
thinking, or an HTTP error); scripts/sdk-e2e-rules.json is the set
scripts/sdk-e2e plays for the Agent SDK's end-to-end tests.

`--latency-ms MS` (or `?latency_ms=MS` on `/_reset`) holds every model
answer back MS milliseconds before its first byte, like a real API's time
to first token.

Claude Code is recognised by its user agent (`claude-cli/...`) or `x-app`.

Control endpoints: `POST /_reset[?scenario=NAME&latency_ms=MS&children=N]`
clears the record (and switches the scenario), `GET /_stats` returns
every recorded request as {kind, bytes, path, t (arrival, seconds since
the reset), notifications (main requests: how many `<task-notification>`s
and distinct `<tool-use-id>`s they carry, and how many say completed)}
plus the raw bodies of the sub-agent requests (latin-1 decoded) for prefix
comparisons (not in `bg1000`), and
`--dump DIR` writes every body to DIR/NNN-kind.json.
"""

import argparse
import json
import os
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
RECORD = []
ARGS = None
STATE = {"scenario": "explore", "latency_ms": 0, "children": 1000, "t0": time.monotonic()}


def sse(event, data):
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def stream(blocks, stop_reason):
    out = [sse("message_start", {"type": "message_start", "message": {
        "id": "msg_bench", "type": "message", "role": "assistant",
        "model": "claude-bench", "content": [], "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})]
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "text_delta", "text": b["text"]}}))
        elif b["type"] == "thinking":
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "thinking", "thinking": "",
                                                                     "signature": ""}}))
            # Two deltas, so that a client sees thinking arrive in pieces.
            half = len(b["thinking"]) // 2
            for part in (b["thinking"][:half], b["thinking"][half:]):
                out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "thinking_delta", "thinking": part}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "signature_delta",
                                                             "signature": b.get("signature", "c2ln")}}))
        else:
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "tool_use", "id": b["id"],
                                                                     "name": b["name"], "input": {}}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "input_json_delta",
                                                             "partial_json": json.dumps(b["input"])}}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(sse("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def first_system_text(body):
    s = body.get("system")
    if isinstance(s, str):
        return s
    if isinstance(s, list) and s:
        return s[0].get("text", "") if isinstance(s[0], dict) else ""
    return ""


def all_system_text(body):
    s = body.get("system")
    if isinstance(s, str):
        return s
    if isinstance(s, list):
        return "\n".join(b.get("text", "") for b in s if isinstance(b, dict))
    return ""


def agent_tool(body):
    for t in body.get("tools") or []:
        if t.get("name") in ("Agent", "Task"):
            return t["name"]
    return None


def classify(body, is_claude_code):
    if "cc_is_subagent=true" in first_system_text(body):
        return "child"
    # A fork child carries its parent's system prompt and tools; it is told
    # apart by the fork directive in its last user message.
    if is_fork_child(body):
        return "child"
    if "You are cadre" in all_system_text(body):
        return "main"
    tool = agent_tool(body)
    if tool is None:
        # cadre's children, and Claude Code's side requests.
        return "side" if is_claude_code else "child"
    # A Claude Code fork child carries the parent's tools and system prompt;
    # it is told apart by the fork directive in its last user message.
    if is_fork_child(body):
        return "child"
    return "main"


def last_user_content(body):
    msgs = body.get("messages") or []
    if not msgs:
        return []
    c = msgs[-1].get("content")
    if isinstance(c, str):
        return [{"type": "text", "text": c}]
    return c or []


def is_fork_child(body):
    for b in last_user_content(body):
        if b.get("type") == "text" and ("<fork-boilerplate>" in b.get("text", "")
                                        or "fork" in b.get("text", "")[:200].lower() and "directive" in b.get("text", "").lower()):
            return True
    return False


def has_tool_results(body):
    return any(b.get("type") == "tool_result" for b in last_user_content(body))


# --- Rules mode (`--rules FILE`): answers chosen by the conversation, not by
# a fixed scenario. Used by scripts/sdk-e2e to play a model for the Agent
# SDK's own end-to-end tests; the rules are data (scripts/sdk-e2e-rules.json
# documents the format in its "about" field).

RULES = None
TOOL_IDS = {"n": 0}
REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)


def text_of(content):
    if isinstance(content, str):
        return REMINDER.sub("", content)
    out = []
    for b in content or []:
        if isinstance(b, dict) and b.get("type") == "text":
            out.append(REMINDER.sub("", b.get("text", "")))
    return "\n".join(t for t in out if t.strip())


def is_tool_search_turn(m):
    """An assistant turn that only loads deferred tools (ToolSearch): not a
    step of the script, which goes on with the tools now loaded."""
    c = m.get("content")
    uses = [b for b in c if isinstance(b, dict) and b.get("type") == "tool_use"] if isinstance(c, list) else []
    return bool(uses) and all(b.get("name") == "ToolSearch" for b in uses)


def prompt_and_step(body):
    """The latest prompt (the last user message that answers no tool call,
    without system reminders), how many model turns followed it (ToolSearch
    turns not counted), and the tools ToolSearch was asked for since."""
    msgs = body.get("messages") or []
    for i in range(len(msgs) - 1, -1, -1):
        m = msgs[i]
        c = m.get("content")
        if m.get("role") != "user":
            continue
        if isinstance(c, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in c):
            continue
        text = text_of(c)
        if not text.strip():
            continue
        after = [x for x in msgs[i + 1:] if x.get("role") == "assistant"]
        step = sum(1 for x in after if not is_tool_search_turn(x))
        searched = set()
        for x in after:
            if is_tool_search_turn(x):
                for b in x["content"]:
                    q = str((b.get("input") or {}).get("query", ""))
                    searched.update(q.removeprefix("select:").split(","))
        return text, step, searched
    return "", 0, set()


def offered_tools(body):
    return [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]


def fill(value, groups):
    """`$1`.. in strings become the prompt pattern's groups."""
    if isinstance(value, str):
        return re.sub(r"\$(\d)", lambda m: groups[int(m.group(1)) - 1] if int(m.group(1)) <= len(groups) else "",
                      value)
    if isinstance(value, list):
        return [fill(v, groups) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, groups) for k, v in value.items()}
    return value


def step_blocks(step, offered, groups, deferred, searched):
    """One step's blocks, or None when it calls a tool the request does not
    offer (then the rule does not apply to this request). A tool the
    request lists as deferred is first loaded with ToolSearch, once."""
    blocks = []
    to_load = []
    for b in step:
        if "tool" in b:
            wanted = fill(b["tool"], groups).split("|")
            names = [n for n in wanted if n in offered]
            if not names:
                late = [n for n in wanted if n in deferred and n not in searched]
                if not late or "ToolSearch" not in offered:
                    return None
                to_load.append(late[0])
                continue
            TOOL_IDS["n"] += 1
            blocks.append({"type": "tool_use", "id": f"toolu_rule{TOOL_IDS['n']:04d}", "name": names[0],
                           "input": fill(b.get("input", {}), groups)})
        elif "thinking" in b:
            blocks.append({"type": "thinking", "thinking": fill(b["thinking"], groups)})
        else:
            blocks.append({"type": "text", "text": fill(b.get("text", ""), groups)})
    if to_load:
        TOOL_IDS["n"] += 1
        return [{"type": "tool_use", "id": f"toolu_rule{TOOL_IDS['n']:04d}", "name": "ToolSearch",
                 "input": {"query": "select:" + ",".join(to_load), "max_results": len(to_load)}}]
    return blocks


def deferred_tools(body):
    """Names the request announces as loadable through ToolSearch."""
    parts = [all_system_text(body)]
    for m in body.get("messages") or []:
        c = m.get("content")
        parts += [c] if isinstance(c, str) else [b.get("text", "") for b in c or [] if isinstance(b, dict)]
    text = "\n".join(parts)
    return set(re.findall(r"\b(mcp__[A-Za-z0-9_-]+|[A-Z][A-Za-z]+)\b", text)) if "ToolSearch" in text else set()


def rule_reply(body):
    """(rule name, blocks, stop reason) or (rule name, error dict, None)."""
    prompt, step, searched = prompt_and_step(body)
    system = all_system_text(body)
    deferred = deferred_tools(body)
    model = str(body.get("model", ""))
    offered = offered_tools(body)
    thinking = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
    for rule in RULES.get("rules", []):
        when = rule.get("when", {})
        groups = []
        if "model" in when and not re.search(when["model"], model):
            continue
        if "system" in when and not re.search(when["system"], system, re.S):
            continue
        if "offers" in when and not all(t in offered for t in when["offers"]):
            continue
        if "thinking" in when and bool(when["thinking"]) != thinking:
            continue
        if "prompt" in when:
            m = re.search(when["prompt"], prompt, re.S)
            if not m:
                continue
            groups = [g or "" for g in m.groups()]
        if "error" in rule:
            return rule.get("name", "?"), rule["error"], None
        steps = rule.get("steps", [])
        if step >= len(steps):
            # Past the script: a plain closing answer.
            return rule.get("name", "?"), [{"type": "text", "text": rule.get("after", "Done.")}], "end_turn"
        blocks = step_blocks(steps[step], offered, groups, deferred, searched)
        if blocks is None:
            continue
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        return rule.get("name", "?"), blocks, stop
    return "default", [{"type": "text", "text": RULES.get("default", "Done.")}], "end_turn"


CHAT_ANSWER = """## What I found

The repository has **one README** and `git log` shows recent work:

- `README.md` describes the benchmark fixture
- the last commits touch the *fake server*

| file | purpose |
|------|---------|
| README.md | the fixture's description |
| bench/fake_anthropic.py | the fake model |

```python
def hello():
    return "world"
```

> Nothing else needs a change."""


def main_reply(body, is_claude_code):
    tool = agent_tool(body) or "Agent"
    turns = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
    sc = STATE["scenario"]
    if sc == "chat":
        # For docs/chat.md's capture: a sub-agent, then a Bash call that
        # asks for permission, then an answer in Markdown.
        results = sum(1 for m in body.get("messages") or [] if isinstance(m.get("content"), list)
                      for b in m["content"] if b.get("type") == "tool_result")
        if results == 0:
            return [{"type": "text", "text": "Let me find the README first."},
                    {"type": "tool_use", "id": "toolu_explore", "name": tool,
                     "input": {"description": "Find the readme",
                               "prompt": "Find README files and say what they contain.",
                               "subagent_type": "Explore"}}], "tool_use"
        if results == 1:
            return [{"type": "tool_use", "id": "toolu_git", "name": "Bash",
                     "input": {"command": "git log --oneline -3", "description": "Recent commits"}}], "tool_use"
        return [{"type": "text", "text": CHAT_ANSWER}], "end_turn"
    if sc == "roundtrip":
        # One tool round trip, counted by tool results so that either
        # program's way of laying out the conversation gives the same script.
        done = any(b.get("type") == "tool_result"
                   for m in body.get("messages") or [] if isinstance(m.get("content"), list)
                   for b in m["content"])
        if not done:
            return [{"type": "tool_use", "id": "toolu_rt", "name": "Glob",
                     "input": {"pattern": "*.md"}}], "tool_use"
        return [{"type": "text", "text": "final answer"}], "end_turn"
    if sc == "plain":
        return [{"type": "text", "text": "final answer"}], "end_turn"
    if sc == "readgrep":
        # A Read, then a Grep over what it read, then the answer.
        if turns == 0:
            return [{"type": "text", "text": "Reading it."},
                    {"type": "tool_use", "id": "toolu_read", "name": "Read",
                     "input": {"file_path": "README.md"}}], "tool_use"
        if turns == 1:
            return [{"type": "tool_use", "id": "toolu_grep", "name": "Grep",
                     "input": {"pattern": "[Ff]ixture", "glob": "*.md",
                               "output_mode": "content"}}], "tool_use"
        return [{"type": "text", "text": "final answer"}], "end_turn"
    if sc == "script3":
        if turns < 2:
            return [{"type": "tool_use", "id": f"toolu_g{turns}", "name": "Glob",
                     "input": {"pattern": "*.md"}}], "tool_use"
        return [{"type": "text", "text": "final answer"}], "end_turn"
    if not has_tool_results(body) and turns == 0:
        if sc == "bg1000":
            calls = [{"type": "tool_use", "id": f"toolu_bg_{i:05d}", "name": tool,
                      "input": {"description": f"job {i}", "prompt": f"Do job {i} and report.",
                                "subagent_type": "general-purpose", "run_in_background": True}}
                     for i in range(STATE["children"])]
        elif sc == "named":
            calls = [{"type": "tool_use", "id": "toolu_named", "name": tool,
                      "input": {"description": "Review the readme",
                                "prompt": "Review README.md and report.",
                                "subagent_type": "reviewer"}}]
        elif sc == "explore":
            calls = [{"type": "tool_use", "id": "toolu_explore", "name": tool,
                      "input": {"description": "Find the readme",
                                "prompt": "Find README files and say what they contain.",
                                "subagent_type": "Explore"}}]
        else:
            calls = [{"type": "tool_use", "id": f"toolu_fork_{x}", "name": tool,
                      "input": {"description": f"check module {x}",
                                "prompt": f"Check module {x} for bugs.",
                                **({"subagent_type": "fork"} if is_claude_code else {"fork": True})}}
                     for x in ("A", "B")]
        return [{"type": "text", "text": "Delegating."}] + calls, "tool_use"
    return [{"type": "text", "text": "final answer"}], "end_turn"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # Headers and body go out as separate writes; without TCP_NODELAY,
        # Nagle's algorithm and the client's delayed ACK add ~40 ms to
        # every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *a):
        if ARGS.verbose:
            sys.stderr.write("fake: " + (a[0] % a[1:]) + "\n")

    def send_json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.startswith("/_stats"):
            with LOCK:
                self.send_json(200, list(RECORD))
            return
        self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n)
        if self.path.startswith("/_reset"):
            with LOCK:
                RECORD.clear()
                STATE["t0"] = time.monotonic()
                STATE["latency_ms"] = ARGS.latency_ms
                STATE["children"] = 1000
                query = self.path.split("?", 1)[1] if "?" in self.path else ""
                for kv in query.split("&"):
                    k, _, v = kv.partition("=")
                    if k == "scenario":
                        STATE["scenario"] = v
                    elif k in ("latency_ms", "children"):
                        STATE[k] = int(v)
            self.send_json(200, {"ok": True})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        if "count_tokens" in self.path:
            kind, is_cc = "count_tokens", False
        elif self.path.split("?")[0].rstrip("/").endswith("/messages"):
            ua = (self.headers.get("user-agent") or "") + (self.headers.get("x-app") or "")
            is_cc = "claude" in ua.lower() or "cli" in ua.lower()
            kind = classify(body, is_cc)
        else:
            kind, is_cc = "other", False
        notes = None
        if kind == "main" and b"<task-notification>" in raw:
            text = raw.decode("utf-8", errors="replace")
            ids = re.findall(r"<tool-use-id>(.*?)</tool-use-id>", text)
            notes = {"count": text.count("<task-notification>"), "distinct_ids": len(set(ids)),
                     "ids": len(ids), "completed": text.count("<status>completed</status>")}
        keep_body = kind == "child" and STATE["scenario"] != "bg1000"
        with LOCK:
            idx = len(RECORD)
            RECORD.append({"kind": kind, "bytes": len(raw), "path": self.path,
                           "t": time.monotonic() - STATE["t0"], "notifications": notes,
                           "body": raw.decode("latin-1") if keep_body else None})
        if ARGS.dump:
            os.makedirs(ARGS.dump, exist_ok=True)
            with open(os.path.join(ARGS.dump, f"{idx:03d}-{kind}.json"), "wb") as f:
                f.write(raw)
        if STATE["latency_ms"] and kind in ("main", "child", "side"):
            time.sleep(STATE["latency_ms"] / 1000)
        if kind == "count_tokens":
            self.send_json(200, {"input_tokens": 100})
            return
        if kind == "other":
            self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})
            return
        if RULES is not None and kind != "count_tokens" and self.path.split("?")[0].rstrip("/").endswith("/messages"):
            name, blocks, stop = rule_reply(body)
            with LOCK:
                RECORD[idx]["rule"] = name
            if ARGS.verbose:
                sys.stderr.write(f"fake: rule {name}\n")
            if stop is None:
                err = blocks
                self.send_json(err.get("status", 400), {"type": "error", "error": {
                    "type": err.get("type", "invalid_request_error"), "message": err.get("message", "")}})
                return
        elif kind == "main":
            blocks, stop = main_reply(body, is_cc)
        elif kind == "child":
            if ARGS.child_delay_ms:
                # A slower sub-agent, to watch progress lines in a demo.
                time.sleep(ARGS.child_delay_ms / 1000)
            blocks, stop = [{"type": "text", "text": "README.md: a benchmark fixture."}], "end_turn"
        else:
            blocks, stop = [{"type": "text", "text": "ok"}], "end_turn"
        if not body.get("stream", False):
            msg = {"id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-bench",
                   "content": [dict(b, signature="c2ln") if b["type"] == "thinking" else b for b in blocks],
                   "stop_reason": stop, "stop_sequence": None,
                   "usage": {"input_tokens": 10, "output_tokens": 5}}
            self.send_json(200, msg)
            return
        data = stream(blocks, stop)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    global ARGS, RULES
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--scenario", choices=["explore", "fork", "script3", "roundtrip", "bg1000", "chat",
                                                   "plain", "readgrep", "named"],
                    default="explore")
    ap.add_argument("--latency-ms", type=int, default=0)
    ap.add_argument("--dump")
    ap.add_argument("--child-delay-ms", type=int, default=0,
                    help="answer sub-agent requests only after this long")
    ap.add_argument("--rules", help="answer by the rules in this JSON file instead of a scenario")
    ap.add_argument("--verbose", action="store_true")
    ARGS = ap.parse_args()
    if ARGS.rules:
        with open(ARGS.rules) as f:
            RULES = json.load(f)
    STATE["scenario"] = ARGS.scenario
    STATE["latency_ms"] = ARGS.latency_ms
    # 1,000 clients connect at once in `bg1000`; the default listen backlog
    # (5) would drop SYNs and add a second of retransmission to some.
    ThreadingHTTPServer.request_queue_size = 4096
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
