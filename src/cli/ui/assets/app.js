// cadre ui: the page. Everything it shows arrives as server-sent events
// from /api/events (the session list, the selected session's agent tree,
// the fleet's tasks); a transcript is fetched when an agent is clicked.
// Text from transcripts is only ever set as textContent, never as HTML.
"use strict";

const params = new URLSearchParams(location.search);
const token = params.get("token") || "";
let selected = params.get("session") || null;
let chosenByUser = !!selected;
let agentShown = null;
let source = null;
let tree = null;

const $ = (id) => document.getElementById(id);
const api = (path, extra) => {
  const q = new URLSearchParams(Object.assign({ token }, extra || {}));
  return `${path}?${q}`;
};

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "style") e.style.cssText = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function fmtTokens(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return String(n);
}
const fmtCost = (c) => (c === null || c === undefined ? "–" : "$" + c.toFixed(c < 0.01 ? 5 : 3));
const fmtShare = (s) => (s === null || s === undefined ? "–" : Math.round(s * 100) + "%");
function fmtElapsed(ms) {
  if (!(ms >= 0)) return "–";
  const s = Math.floor(ms / 1000);
  if (s < 60) return (ms / 1000).toFixed(1) + " s";
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}
function elapsedOf(a) {
  const start = Date.parse(a.started || "");
  if (isNaN(start)) return NaN;
  const running = a.status === "running" || a.status === "idle";
  const end = running ? Date.now() : Date.parse(a.ended || a.last_activity || "");
  return (isNaN(end) ? Date.now() : end) - start;
}

function drawSessions(rows) {
  const ul = $("sessions");
  ul.replaceChildren();
  if (!rows.length) {
    ul.append(el("li", { class: "empty" }, "No sessions yet."));
    return;
  }
  if (!chosenByUser) {
    const running = rows.filter((r) => r.status === "running");
    const pick = (running.length ? running : rows)[(running.length ? running : rows).length - 1].id;
    if (pick !== selected) select(pick, false);
  }
  for (const r of rows.slice().reverse()) {
    const li = el(
      "li",
      { class: r.id === selected ? "selected" : "", "data-session": r.id, "data-status": r.status },
      el("span", { class: "title" }, el("span", { class: `status s-${r.status}` }, ""), r.title || r.id),
      el("span", { class: "meta" },
        `${r.status} · ${r.model || "?"} · ${fmtTokens(r.tokens)} tokens · ${fmtCost(r.cost_usd)} · ${r.children} sub-agents`),
    );
    li.onclick = () => select(r.id, true);
    ul.append(li);
  }
}

function drawTree() {
  const body = $("tree").querySelector("tbody");
  body.replaceChildren();
  if (!tree) return;
  $("tree-title").textContent = `Agents of ${tree.id}`;
  $("folder").textContent = tree.folder;
  const depth = {};
  const children = {};
  for (const a of tree.agents) (children[a.parent || ""] ||= []).push(a);
  const ordered = [];
  const walk = (parent, d) => {
    for (const a of children[parent] || []) {
      depth[a.id] = d;
      ordered.push(a);
      walk(a.id, d + 1);
    }
  };
  walk("", 0);
  // Agents whose parent is not in the tree go last, at the top level.
  for (const a of tree.agents) if (!(a.id in depth)) { depth[a.id] = 1; ordered.push(a); }
  for (const a of ordered) {
    const tags = [];
    if (a.background) tags.push(el("span", { class: "tag" }, "background"));
    if (a.fork) tags.push(el("span", { class: "tag" }, "fork"));
    const tr = el(
      "tr",
      { class: "agent" + (a.id === agentShown ? " selected" : ""), "data-agent": a.id, "data-status": a.status },
      el("td", { class: "name", style: `padding-left:${0.7 + depth[a.id] * 1.6}em` },
        el("span", { class: "kind" }, a.name ? `${a.name} (${a.kind})` : a.kind),
        ...tags,
        a.description ? el("span", { class: "desc" }, a.description) : null),
      el("td", { class: `status s-${a.status}` }, a.status),
      el("td", { class: "tool" }, a.current_tools.join(", ")),
      el("td", { class: "n" }, a.turns),
      el("td", { class: "n" }, fmtTokens(a.tokens)),
      el("td", { class: "n" }, fmtShare(a.cache_read_share)),
      el("td", { class: "n" }, fmtCost(a.cost_usd)),
      el("td", { class: "n elapsed", "data-agent": a.id }, fmtElapsed(elapsedOf(a))),
    );
    tr.onclick = () => showTranscript(a.id);
    body.append(tr);
  }
}

function tick() {
  if (!tree) return;
  for (const a of tree.agents) {
    const td = document.querySelector(`td.elapsed[data-agent="${CSS.escape(a.id)}"]`);
    if (td) td.textContent = fmtElapsed(elapsedOf(a));
  }
}

function drawFleet(f) {
  $("fleet").hidden = !f.configured;
  if (!f.configured) return;
  $("fleet-error").hidden = !f.error;
  $("fleet-error").textContent = f.error ? `broker: ${f.error}` : "";
  const body = $("fleet-tasks");
  body.replaceChildren();
  for (const t of f.tasks || []) {
    body.append(el("tr", { "data-task": t.agent_id, "data-status": t.status },
      el("td", { class: "tool" }, t.agent_id),
      el("td", { class: `status s-${t.status}` }, t.status),
      el("td", {}, t.owner || "–"),
      el("td", { class: "n" }, t.lease_age_ms === null ? "–" : (t.lease_age_ms / 1000).toFixed(1) + " s"),
      el("td", { class: "n" }, t.attempt),
      el("td", { class: "tool" }, t.session_id),
      el("td", {}, t.description)));
  }
}

async function showTranscript(agent) {
  agentShown = agent;
  drawTree();
  const r = await fetch(api("/api/transcript", { id: selected, agent }));
  const box = $("messages");
  $("transcript").hidden = false;
  const a = tree && tree.agents.find((x) => x.id === agent);
  $("transcript-title").textContent = `Transcript: ${a && a.name ? a.name : a ? a.kind : agent} (${agent})`;
  box.replaceChildren();
  if (!r.ok) {
    box.append(el("p", { class: "empty" }, "No transcript yet."));
    return;
  }
  const t = await r.json();
  if (t.omitted) box.append(el("p", { class: "empty" }, `${t.omitted} earlier messages not shown`));
  for (const m of t.messages) {
    const div = el("div", { class: `msg ${m.role}` }, el("div", { class: "role" }, m.role));
    for (const b of m.blocks) {
      const title = b.kind === "tool_use" ? b.title : b.kind === "tool_result" ? (b.error ? "error" : "result") : null;
      div.append(el("div", { class: `block ${b.kind}` }, title ? el("span", { class: "btitle" }, title + " ") : null, b.text));
    }
    box.append(div);
  }
}

function select(id, byUser) {
  if (byUser) chosenByUser = true;
  if (id === selected && source) return;
  selected = id;
  agentShown = null;
  tree = null;
  $("transcript").hidden = true;
  connect();
}

function connect() {
  if (source) source.close();
  source = new EventSource(api("/api/events", selected ? { id: selected } : {}));
  source.onopen = () => { $("live").textContent = "live"; $("live").className = "live"; };
  source.onerror = () => { $("live").textContent = "reconnecting…"; $("live").className = "live off"; };
  source.addEventListener("sessions", (e) => drawSessions(JSON.parse(e.data)));
  source.addEventListener("tree", (e) => {
    const before = tree && tree.agents.find((a) => a.id === agentShown);
    tree = JSON.parse(e.data);
    drawTree();
    // The transcript on show follows its agent.
    const now = tree.agents.find((a) => a.id === agentShown);
    if (before && now && (before.last_activity !== now.last_activity || before.status !== now.status)) {
      showTranscript(agentShown);
    }
  });
  source.addEventListener("fleet", (e) => drawFleet(JSON.parse(e.data)));
}

connect();
setInterval(tick, 1000);
