// A headless Agent Client Protocol client, written with the ACP SDK
// (@agentclientprotocol/sdk, installed into .ci/acp/client by
// scripts/test-deps-acp): what an editor such as Zed does, without the
// editor. tests/suite/acp.rs runs it against each Claude Code ACP adapter,
// with CLAUDE_CODE_EXECUTABLE naming the CLI the adapter starts.
//
//   node client.mjs SDK_ENTRY ADAPTER_ENTRY CWD PROMPT
//
// It starts the adapter (node ADAPTER_ENTRY), then initialize ->
// session/new (cwd CWD) -> session/prompt (PROMPT), answering each
// session/request_permission with the first "allow" option, and prints one
// JSON line: what it saw (the session/new answer's modes and models, every
// session/update, every permission request, other notifications such as
// `_auth/status_update`, the stop reason).
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const [sdkEntry, adapterEntry, cwd, promptText] = process.argv.slice(2);
const acp = await import(sdkEntry);

const seen = { updates: [], permissions: [], stderr: "" };
const adapter = spawn(process.execPath, [adapterEntry], {
  cwd,
  env: process.env,
  stdio: ["pipe", "pipe", "pipe"],
});
adapter.stderr.on("data", (d) => {
  seen.stderr += d.toString();
  if (seen.stderr.length > 200000) seen.stderr = seen.stderr.slice(-100000);
});
const exited = new Promise((resolve) => adapter.on("exit", (code, signal) => resolve({ code, signal })));

const stream = acp.ndJsonStream(Writable.toWeb(adapter.stdin), Readable.toWeb(adapter.stdout));
const app = acp
  .client({ name: "cadre-acp-test" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    seen.updates.push(params.update);
  })
  .onNotification("*", ({ method, params }) => {
    // Extensions, e.g. `_auth/status_update` (which account pays).
    (seen.extensions ??= []).push({ method, params });
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    seen.permissions.push({
      toolCall: params.toolCall,
      options: params.options.map((o) => ({ optionId: o.optionId, kind: o.kind, name: o.name })),
    });
    const allow = params.options.find((o) => o.kind === "allow_once") ?? params.options[0];
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  });

const timeout = setTimeout(() => finish(false, "timed out after 120 s"), 120000);

async function finish(ok, error) {
  clearTimeout(timeout);
  adapter.kill();
  process.stdout.write(JSON.stringify({ ok, error, seen }) + "\n");
  process.exit(0);
}

try {
  await app.connectWith(stream, async (ctx) => {
    const init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "cadre-acp-test", version: "1.0.0" },
    });
    seen.initialize = { protocolVersion: init.protocolVersion, agentInfo: init.agentInfo ?? null };
    const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
    seen.session = { modes: session.modes ?? null, models: session.models ?? null };
    const answer = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: session.sessionId,
      prompt: [{ type: "text", text: promptText }],
    });
    seen.stopReason = answer.stopReason;
    // A notification the adapter sends without being asked, and without
    // waiting for (ACP_WAIT_FOR names it): given up to 10 s to arrive.
    const wanted = process.env.ACP_WAIT_FOR;
    for (let i = 0; wanted && i < 100; i++) {
      if ((seen.extensions ?? []).some((n) => n.method === wanted)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  await finish(true);
} catch (e) {
  const exit = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 500))]);
  await finish(false, `${e?.stack ?? e} (adapter exit: ${JSON.stringify(exit)})`);
}
