// Drives cadre with the Claude Agent SDK for TypeScript, as a user's
// program would. Run by tests/suite/sdk.rs against the fake model server:
//
//     node tests/sdk/drive.mjs SCENARIO
//
// with CADRE_BIN (the binary under test), CADRE_PROJECT (the working
// directory) and SDK_TS (the folder scripts/test-deps-sdk-ts installed the
// SDK into) in the environment. Each scenario checks what the SDK hands its
// caller and prints one JSON line with what it saw; a failed check throws
// and the process exits non-zero.

import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkEntry = path.join(
  process.env.SDK_TS,
  "node_modules/@anthropic-ai/claude-agent-sdk/sdk.mjs",
);
const { query, listSessions, getSessionMessages, listSubagents } = await import(
  pathToFileURL(sdkEntry).href
);

function options(extra = {}) {
  return {
    pathToClaudeCodeExecutable: process.env.CADRE_BIN,
    cwd: process.env.CADRE_PROJECT,
    env: { ...process.env },
    ...extra,
  };
}

const blocks = (messages, role, type) =>
  messages
    .filter((m) => m.type === role)
    .flatMap((m) => (Array.isArray(m.message.content) ? m.message.content : []))
    .filter((b) => b.type === type);

const resultOf = (messages) => {
  const results = messages.filter((m) => m.type === "result");
  assert.equal(results.length, 1, JSON.stringify(messages));
  return results[0];
};

const textOf = (block) =>
  typeof block.content === "string"
    ? block.content
    : block.content.map((c) => c.text ?? "").join("");

async function query_read() {
  const messages = [];
  for await (const m of query({ prompt: "What do the notes say?", options: options() })) {
    messages.push(m);
  }
  const init = messages.find((m) => m.type === "system" && m.subtype === "init");
  assert.ok(init && init.tools.includes("Read"), JSON.stringify(init));
  const uses = blocks(messages, "assistant", "tool_use");
  assert.equal(uses.length, 1);
  assert.equal(uses[0].name, "Read");
  const results = blocks(messages, "user", "tool_result");
  assert.equal(results.length, 1);
  assert.ok(textOf(results[0]).includes("the notes say hello"), JSON.stringify(results));
  const result = resultOf(messages);
  assert.equal(result.subtype, "success");
  assert.equal(result.result, "The notes say hello.");
  // The SDK's session readers find the session cadre wrote (HOME is the
  // test's), in Claude Code's place and format.
  const dir = process.env.CADRE_PROJECT;
  const listed = await listSessions({ dir });
  const read = await getSessionMessages(result.session_id, { dir });
  const subagents = await listSubagents(result.session_id, { dir });
  return {
    session_id: result.session_id,
    sdk_listed: listed.map((s) => s.sessionId),
    sdk_summary: listed.map((s) => s.summary),
    sdk_messages: read.length,
    sdk_types: read.map((m) => m.type),
    sdk_subagents: subagents.length,
  };
}

async function multi_turn() {
  // Streaming input: the second prompt is sent once the first is answered.
  let answered;
  const firstDone = new Promise((resolve) => {
    answered = resolve;
  });
  const user = (text) => ({
    type: "user",
    session_id: "",
    parent_tool_use_id: null,
    message: { role: "user", content: text },
  });
  async function* prompts() {
    yield user("My name is Ada.");
    await firstDone;
    yield user("What is my name?");
  }
  const results = [];
  const q = query({ prompt: prompts(), options: options() });
  for await (const m of q) {
    if (m.type === "result") {
      results.push(m.result);
      if (results.length === 1) answered();
      if (results.length === 2) break;
    }
  }
  assert.deepEqual(results, ["Nice to meet you.", "Your name is Ada."]);
  return { results };
}

async function control_queries() {
  // The Query methods that send control requests, on a streaming session
  // kept open until they are all answered; then one prompt.
  let done;
  const allAnswered = new Promise((resolve) => {
    done = resolve;
  });
  async function* prompts() {
    await allAnswered;
    yield {
      type: "user",
      session_id: "",
      parent_tool_use_id: null,
      message: { role: "user", content: "hi" },
    };
  }
  const q = query({ prompt: prompts(), options: options() });
  const seen = {};
  const drain = (async () => {
    const results = [];
    for await (const m of q) {
      if (m.type === "result") {
        results.push(m.result);
        break;
      }
    }
    return results;
  })();
  await q.applyFlagSettings({ permissions: { deny: ["WebFetch"] } });
  const server = {
    command: process.env.MCP_COMMAND,
    args: JSON.parse(process.env.MCP_ARGS),
    env: JSON.parse(process.env.MCP_ENV),
  };
  seen.set = await q.setMcpServers({ echo: server });
  seen.status = (await q.mcpServerStatus()).map((s) => [s.name, s.status]);
  seen.page = await q.readMcpResource("echo", "ui://app/page");
  await q.toggleMcpServer("echo", false);
  await q.toggleMcpServer("echo", true);
  await q.reconnectMcpServer("echo");
  seen.status_after = (await q.mcpServerStatus()).map((s) => [s.name, s.status]);
  seen.skills = (await q.reloadSkills()).skills.map((s) => s.name);
  seen.backgrounded = await q.backgroundTasks("toolu_none");
  await q.seedReadState(path.join(process.env.CADRE_PROJECT, "a.txt"), 1);
  seen.models = (await q.supportedModels()).map((m) => m.value);
  done();
  seen.results = await drain;
  assert.deepEqual(seen.results, ["ok"]);
  return seen;
}

const SCENARIOS = { query_read, multi_turn, control_queries };

const name = process.argv[2];
const seen = await SCENARIOS[name]();
console.log(JSON.stringify({ scenario: name, ok: true, seen }));
