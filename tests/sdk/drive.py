"""Drives cadre with the Claude Agent SDK for Python, as a user's program would.

Run by tests/suite/sdk.rs against the fake model server:

    .ci/venv/bin/python tests/sdk/drive.py SCENARIO

with CADRE_BIN (the binary under test) and CADRE_PROJECT (the working
directory) in the environment. Each scenario checks what the SDK hands its
caller and prints one JSON line with what it saw, for the Rust side to check
against the requests the fake server recorded. Any failed check raises, and
the process exits non-zero with the traceback on stderr.
"""

import asyncio
import json
import os
import sys

from claude_agent_sdk import (
    AgentDefinition,
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    PermissionUpdate,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    create_sdk_mcp_server,
    get_session_messages,
    get_subagent_messages,
    list_sessions,
    list_subagents,
    query,
    tool,
)
from claude_agent_sdk.types import PermissionRuleValue


def options(**kw):
    return ClaudeAgentOptions(
        cli_path=os.environ["CADRE_BIN"],
        cwd=os.environ["CADRE_PROJECT"],
        **kw,
    )


def texts(messages):
    return [
        b.text
        for m in messages
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, TextBlock)
    ]


def tool_uses(messages):
    return [
        b
        for m in messages
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, ToolUseBlock)
    ]


def tool_results(messages):
    return [
        b
        for m in messages
        if isinstance(m, UserMessage) and isinstance(m.content, list)
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]


def result_of(messages):
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert len(results) == 1, f"one result per prompt, got {results}"
    return results[0]


def result_text(block):
    content = block.content
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content)
    return content or ""


async def query_read():
    """query() one-shot: the model reads a file; the answer comes back."""
    messages = [m async for m in query(prompt="What do the notes say?", options=options(allowed_tools=["Read"]))]
    messages_seen = list(messages)
    init = [m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init"]
    assert init, "no init message"
    assert init[0].data["claude_code_version"].startswith("2."), init[0].data
    uses = tool_uses(messages)
    assert [u.name for u in uses] == ["Read"], uses
    results = tool_results(messages)
    assert len(results) == 1 and "the notes say hello" in result_text(results[0]), results
    result = result_of(messages)
    assert result.subtype == "success" and not result.is_error, result
    assert result.result == "The notes say hello.", result.result
    assert result.num_turns == 2, result.num_turns
    assert result.total_cost_usd is not None and result.total_cost_usd > 0, result.total_cost_usd
    # The SDK's session readers find the session cadre wrote (HOME is the
    # test's), in Claude Code's place and format.
    project = os.environ["CADRE_PROJECT"]
    listed = list_sessions(directory=project)
    messages = get_session_messages(result.session_id, directory=project)
    subagents = list_subagents(result.session_id, directory=project)
    # The tool result as data, as the SDK types it (`tool_use_result`).
    typed = [m.tool_use_result for m in messages_seen if isinstance(m, UserMessage) and m.tool_use_result]
    return {
        "tool_use_result": typed,
        "session_id": result.session_id,
        "result": result.result,
        "sdk_listed": [s.session_id for s in listed],
        "sdk_summary": [s.summary for s in listed],
        "sdk_messages": len(messages),
        "sdk_types": [m.type for m in messages],
        "sdk_subagents": len(subagents),
    }


async def multi_turn():
    """ClaudeSDKClient: two prompts in one session; the second sees the first."""
    async with ClaudeSDKClient(options=options()) as client:
        await client.query("My name is Ada.")
        first = [m async for m in client.receive_response()]
        await client.query("What is my name?")
        second = [m async for m in client.receive_response()]
    r1, r2 = result_of(first), result_of(second)
    assert r1.session_id == r2.session_id, (r1.session_id, r2.session_id)
    assert r2.result == "Your name is Ada.", r2.result
    return {"first": r1.result, "second": r2.result}


async def deny_bash():
    """A can_use_tool callback denies a Bash call; the model hears why."""
    asked = []

    async def can_use_tool(tool_name, tool_input, context):
        asked.append({"tool": tool_name, "input": tool_input})
        if tool_name == "Bash":
            return PermissionResultDeny(message="no shell for you")
        return PermissionResultAllow()

    async with ClaudeSDKClient(options=options(can_use_tool=can_use_tool)) as client:
        await client.query("Delete the build folder.")
        messages = [m async for m in client.receive_response()]
    assert [a["tool"] for a in asked] == ["Bash"], asked
    assert asked[0]["input"]["command"] == "rm -rf build", asked
    results = tool_results(messages)
    assert len(results) == 1 and results[0].is_error, results
    result = result_of(messages)
    assert result.result == "I was not allowed to.", result.result
    return {"asked": asked}


async def interrupt():
    """An interrupt stops a slow prompt; the session answers the next one."""
    async with ClaudeSDKClient(options=options()) as client:
        await client.query("Take your time.")
        # Interrupt once cadre has started the prompt (its init message).
        seen = []
        async for m in client.receive_messages():
            seen.append(m)
            if isinstance(m, SystemMessage) and m.subtype == "init":
                break
        await client.interrupt()
        first = seen + [m async for m in client.receive_response()]
        await client.query("Now quickly.")
        second = [m async for m in client.receive_response()]
    r1, r2 = result_of(first), result_of(second)
    assert r1.is_error and r1.subtype == "error_during_execution", r1
    assert r2.result == "Quick answer.", r2
    return {"interrupted": r1.subtype, "after": r2.result}


async def custom_agents():
    """agents= go through initialize; the model delegates to one."""
    agents = {
        "poet": AgentDefinition(
            description="Writes short poems on request.",
            prompt="You are the poet. Answer in verse.",
            tools=["Read"],
        )
    }
    # forward_subagent_text (through initialize): the poet's own words come
    # too, under the Agent call; without it only its tool calls would.
    messages = [
        m
        async for m in query(
            prompt="Write me a poem.",
            options=options(agents=agents, forward_subagent_text=True),
        )
    ]
    uses = tool_uses(messages)
    assert uses and uses[0].name == "Agent" and uses[0].input["subagent_type"] == "poet", uses
    child = [m for m in messages if isinstance(m, AssistantMessage) and m.parent_tool_use_id == uses[0].id]
    assert child and texts(child) == ["Roses are red."], child
    result = result_of(messages)
    assert result.result == "The poet wrote: Roses are red.", result.result
    return {"agent_call": uses[0].id}


async def pre_tool_hook():
    """A Python hook fires on PreToolUse and blocks the call."""
    fired = []

    async def guard(hook_input, tool_use_id, context):
        fired.append(
            {
                "event": hook_input["hook_event_name"],
                "tool": hook_input["tool_name"],
                "command": hook_input["tool_input"].get("command"),
                "tool_use_id": tool_use_id,
            }
        )
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "the guard hook says no",
            }
        }

    hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[guard])]}
    async with ClaudeSDKClient(options=options(hooks=hooks, allowed_tools=["Bash"])) as client:
        await client.query("List the files.")
        messages = [m async for m in client.receive_response()]
    assert fired == [
        {"event": "PreToolUse", "tool": "Bash", "command": "ls", "tool_use_id": "toolu_ls"}
    ], fired
    results = tool_results(messages)
    assert len(results) == 1 and results[0].is_error, results
    assert "the guard hook says no" in result_text(results[0]), results
    return {"fired": fired}


async def sdk_mcp_tool():
    """An in-process MCP server of the program: its tool runs in Python."""
    calls = []

    @tool("add", "Adds two numbers.", {"a": int, "b": int})
    async def add(args):
        calls.append(args)
        return {"content": [{"type": "text", "text": f"sum={args['a'] + args['b']}"}]}

    calc = create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add])
    opts = options(mcp_servers={"calc": calc}, allowed_tools=["mcp__calc__add"])
    async with ClaudeSDKClient(options=opts) as client:
        await client.query("What is 2 + 3?")
        messages = [m async for m in client.receive_response()]
    init = [m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init"]
    assert init and "mcp__calc__add" in init[0].data["tools"], init
    assert calls == [{"a": 2, "b": 3}], calls
    results = tool_results(messages)
    assert len(results) == 1 and not results[0].is_error, results
    assert "sum=5" in result_text(results[0]), results
    result = result_of(messages)
    assert result.result == "2 + 3 = 5.", result.result
    return {"calls": calls}


async def sdk_mcp_huge_answer():
    """An in-process server answers with more than one MCP message may
    hold: the call fails naming the server and the limit, and the next call
    to the same server works."""

    @tool("big", "Answers with 17 MiB.", {})
    async def big(args):
        return {"content": [{"type": "text", "text": "x" * (17 << 20)}]}

    @tool("add", "Adds two numbers.", {"a": int, "b": int})
    async def add(args):
        return {"content": [{"type": "text", "text": f"sum={args['a'] + args['b']}"}]}

    calc = create_sdk_mcp_server(name="calc", version="1.0.0", tools=[big, add])
    opts = options(mcp_servers={"calc": calc}, allowed_tools=["mcp__calc"])

    async def run():
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("Try both tools.")
            return [m async for m in client.receive_response()]

    # A bound for a hang (what this scenario catches), not a timing check.
    messages = await asyncio.wait_for(run(), 120)
    results = tool_results(messages)
    assert len(results) == 2, results
    failed = result_text(results[0])
    assert results[0].is_error, failed
    assert "MCP server `calc`" in failed and "limit of 16777216 bytes" in failed, failed
    assert not results[1].is_error and "sum=5" in result_text(results[1]), results
    return {"error": failed}


async def rewrite_and_post_hook():
    """can_use_tool rewrites a command and grants a rule for the session; a
    PostToolUse hook adds context for the model."""
    asked = []
    posted = []

    async def can_use_tool(tool_name, tool_input, context):
        asked.append(tool_input["command"])
        return PermissionResultAllow(
            updated_input={"command": "echo rewritten"},
            updated_permissions=[
                PermissionUpdate(
                    type="addRules",
                    behavior="allow",
                    rules=[PermissionRuleValue(tool_name="Bash", rule_content="echo:*")],
                    destination="session",
                )
            ],
        )

    async def after(hook_input, tool_use_id, context):
        posted.append(hook_input["tool_input"]["command"])
        return {
            "hookSpecificOutput": {
                "hookEventName": "PostToolUse",
                "additionalContext": "checked by the post hook",
            }
        }

    hooks = {"PostToolUse": [HookMatcher(matcher="Bash", hooks=[after])]}
    opts = options(can_use_tool=can_use_tool, hooks=hooks)
    async with ClaudeSDKClient(options=opts) as client:
        await client.query("Say something.")
        messages = [m async for m in client.receive_response()]
    # The second echo needs no question: the session rule allows it.
    assert asked == ["echo original"], asked
    assert posted == ["echo rewritten", "echo again"], posted
    results = tool_results(messages)
    assert "rewritten" in result_text(results[0]), results
    return {"asked": asked, "posted": posted}


async def session_reads():
    """A session with a sub-agent, read back with the SDK's session functions."""
    agents = {"helper": AgentDefinition(description="Looks things up.", prompt="You are the helper.")}
    messages = [m async for m in query(prompt="Ask the helper.", options=options(agents=agents))]
    result = result_of(messages)
    project = os.environ["CADRE_PROJECT"]
    sid = result.session_id
    listed = list_sessions(directory=project)
    read = get_session_messages(sid, directory=project)
    subagents = list_subagents(sid, directory=project)
    return {
        "session_id": sid,
        "listed": [{"id": s.session_id, "summary": s.summary, "cwd": s.cwd} for s in listed],
        "messages": [{"type": m.type, "session_id": m.session_id, "message": m.message} for m in read],
        "subagents": subagents,
        "subagent_messages": [
            [
                {"type": m.type, "parent_tool_use_id": m.parent_tool_use_id, "message": m.message}
                for m in get_subagent_messages(sid, a, directory=project)
            ]
            for a in subagents
        ],
    }


async def truncating_resume():
    """The SDK's truncating resume (its e2e test): two turns, then a fork
    at the end of turn 1 that drops turn 2; a wrong turn id is refused."""
    import uuid as uuid_mod

    from claude_agent_sdk import ProcessError

    project = os.environ["CADRE_PROJECT"]
    last_turn_1 = None
    results = []
    async with ClaudeSDKClient(options=options(max_turns=1)) as client:
        await client.query("Reply with exactly: one")
        async for m in client.receive_response():
            if isinstance(m, AssistantMessage):
                last_turn_1 = m
            elif isinstance(m, ResultMessage):
                results.append(m)
        await client.query("Reply with exactly: two")
        async for m in client.receive_response():
            if isinstance(m, ResultMessage):
                results.append(m)
    assert last_turn_1 is not None and last_turn_1.uuid, last_turn_1
    assert len(results) == 2 and not any(r.is_error for r in results), results
    sid = results[-1].session_id
    chain = get_session_messages(sid, directory=project)
    uuids = [m.uuid for m in chain]
    keep_at = last_turn_1.uuid
    assert keep_at in uuids, ("turn-1 assistant uuid not in the transcript", keep_at, uuids)
    turn_2 = next(
        i for i, m in enumerate(chain) if m.type == "user" and m.message.get("content") == "Reply with exactly: two"
    )
    assert turn_2 == uuids.index(keep_at) + 1, [(m.type, m.uuid) for m in chain]

    def prompts(session_id):
        return [
            m.message["content"]
            for m in get_session_messages(session_id, directory=project)
            if m.type == "user" and isinstance(m.message.get("content"), str)
        ]

    forked = None
    async for m in query(
        prompt="Reply with exactly: three",
        options=options(
            max_turns=1,
            resume=sid,
            fork_session=True,
            resume_session_at=keep_at,
            resume_drops_turn=chain[turn_2].uuid,
        ),
    ):
        if isinstance(m, ResultMessage):
            forked = m
    assert forked is not None and not forked.is_error, forked
    assert forked.session_id != sid
    refused = None
    try:
        async for _ in query(
            prompt="Reply with exactly: three",
            options=options(
                max_turns=1,
                resume=sid,
                fork_session=True,
                resume_session_at=keep_at,
                resume_drops_turn=str(uuid_mod.uuid4()),
            ),
        ):
            pass
    except ProcessError as e:
        refused = str(e)
    return {
        "session_id": sid,
        "forked": forked.session_id,
        "forked_prompts": prompts(forked.session_id),
        "original_prompts": prompts(sid),
        "refused": refused,
        "after_refusal": prompts(sid),
    }


async def session_store():
    """session_store=: the transcript is mirrored into the store (the
    sub-agent's with its metadata), and a resume from the store alone (the
    file on disk removed) carries the conversation."""
    from claude_agent_sdk import (
        InMemorySessionStore,
        get_session_messages_from_store,
        get_subagent_messages_from_store,
        list_subagents_from_store,
    )
    from claude_agent_sdk._internal.sessions import _find_project_dir

    store = InMemorySessionStore()
    agents = {"helper": AgentDefinition(description="Looks things up.", prompt="You are the helper.")}
    messages = [
        m async for m in query(prompt="Ask the helper.", options=options(agents=agents, session_store=store))
    ]
    sid = result_of(messages).session_id
    read = await get_session_messages_from_store(store, sid)
    subagents = await list_subagents_from_store(store, sid)
    child = [
        {"type": m.type, "parent_tool_use_id": m.parent_tool_use_id}
        for a in subagents
        for m in await get_subagent_messages_from_store(store, sid, a)
    ]
    # The file on disk goes; the store has the session.
    (_find_project_dir(os.path.realpath(os.environ["CADRE_PROJECT"])) / f"{sid}.jsonl").unlink()
    again = [
        m async for m in query(prompt="And again?", options=options(resume=sid, session_store=store))
    ]
    return {
        "session_id": sid,
        "store_types": [m.type for m in read],
        "subagents": subagents,
        "child": child,
        "resumed": result_of(again).result,
        "resumed_session": result_of(again).session_id,
    }


async def rewind_files():
    """enable_file_checkpointing: rewind_files(uuid) puts the files the
    tools changed back as they were when that user message came, and
    removes the ones made after it; dry_run only says what would change."""
    root = os.environ["CADRE_PROJECT"]

    def state():
        def read(name):
            path = os.path.join(root, name)
            return open(path).read() if os.path.exists(path) else None

        return {"a": read("a.txt"), "b": read("sub/b.txt")}

    async def control(client, request):
        try:
            return await client._query._send_control_request(request)
        except Exception as e:  # the CLI's error answer
            return {"error_response": str(e)}

    opts = options(
        enable_file_checkpointing=True,
        permission_mode="acceptEdits",
        extra_args={"replay-user-messages": None},
    )
    seen = {}
    async with ClaudeSDKClient(opts) as client:
        uuids = []
        for prompt in ["change a", "make b"]:
            await client.query(prompt)
            async for m in client.receive_response():
                if isinstance(m, UserMessage) and m.uuid and isinstance(m.content, str):
                    uuids.append(m.uuid)
        seen["after_turns"] = state()
        seen["uuids"] = len(uuids)
        seen["dry_run"] = await control(
            client, {"subtype": "rewind_files", "user_message_id": uuids[0], "dry_run": True}
        )
        seen["after_dry_run"] = state()
        seen["unknown"] = await control(
            client, {"subtype": "rewind_files", "user_message_id": "no-such-message", "dry_run": True}
        )
        seen["unknown_real"] = await control(
            client, {"subtype": "rewind_files", "user_message_id": "no-such-message"}
        )
        seen["to_second"] = await control(
            client, {"subtype": "rewind_files", "user_message_id": uuids[1]}
        )
        seen["after_second"] = state()
        await client.rewind_files(uuids[0])
        seen["after_first"] = state()
        seen["again"] = await control(
            client, {"subtype": "rewind_files", "user_message_id": uuids[0], "dry_run": True}
        )
    return seen


SCENARIOS = {
    f.__name__: f
    for f in [
        rewind_files,
        session_store,
        truncating_resume,
        session_reads,
        query_read,
        multi_turn,
        deny_bash,
        interrupt,
        custom_agents,
        pre_tool_hook,
        sdk_mcp_tool,
        sdk_mcp_huge_answer,
        rewrite_and_post_hook,
    ]
}

if __name__ == "__main__":
    name = sys.argv[1]
    seen = asyncio.run(SCENARIOS[name]())
    print(json.dumps({"scenario": name, "ok": True, "seen": seen}))
