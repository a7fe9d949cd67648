//! The texts the runtime gives the model (tool-call errors, permission
//! denials, sub-agent results and notifications, limits, hooks, skills,
//! compaction, worktrees), as typed template contexts: one struct per
//! template under `agents/templates/`. The tools' own outcomes are in
//! `crate::tools::outcome`; system prompts in `super::prompt`.

use crate::contexts;
use crate::permissions::Reason;
use crate::provider::ProviderProblem;
use crate::runtime::worktree::GitError;
use crate::tools::outcome::Clip;
use crate::tools::spec::{AgentLine, SkillLine};

use super::problem::{QueueProblem, RunProblem};
use super::tasks::TaskStatus;

/// Why the `WorktreeCreate` hooks made no worktree: the hooks that
/// failed, or what the ones that succeeded printed.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct WorktreeHookFailure {
    pub failures: Vec<HookFailure>,
    /// No hook printed a path.
    pub no_path: bool,
    /// The path printed, when it is not a folder.
    pub not_a_folder: Option<String>,
}

/// One hook that failed, as the `error_worktree` template words it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HookFailure {
    /// Its command (or URL, or prompt); `None` for an exit 2, whose
    /// stderr is all that is kept.
    pub command: Option<String>,
    /// The exit code (`None`: killed by a signal, or it never ran).
    pub code: Option<i32>,
    pub timed_out: bool,
    /// Its stderr, or why it could not run.
    pub output: String,
}

/// A skill's text as a sub-agent gets it preloaded.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SkillText {
    pub name: String,
    pub dir: String,
    pub body: String,
}

/// A file `first_search` read for the agent.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FirstRead {
    /// Relative to the working directory.
    pub path: String,
    /// The lines the file has past those read (0 when it was read whole),
    /// and the `offset` that reads on from where the read stopped.
    pub more: usize,
    pub offset: usize,
}

/// A folder the prompt names, with the files `first_search` listed in it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FolderFiles {
    /// As the prompt wrote it, without a trailing `/`.
    pub path: String,
    /// Its files (not those of its subfolders), relative to the working
    /// directory.
    pub files: Vec<String>,
    /// How many more files it holds than are listed.
    pub more: usize,
}

fn sample_skill() -> SkillText {
    SkillText {
        name: "release".into(),
        dir: "/repo/.claude/skills/release".into(),
        body: "Bump the version, then tag.".into(),
    }
}

contexts! {
    /// A call to a tool the session does not offer.
    "error_no_such_tool" => pub struct NoSuchTool {
        pub name: String = "Frobnicate".into(),
    }

    /// The same call (tool and input) as in the agent's previous turns,
    /// held back by `agents.repeated_call_limit`.
    "error_repeated_call" => pub struct RepeatedCall {
        pub tool: String = "Glob".into(),
        pub turns: u32 = 2,
    }

    /// A Bash call refused because `sandbox.failIfUnavailable` is set and
    /// this machine cannot sandbox.
    "error_sandbox_unavailable" => pub struct SandboxUnavailable {
        pub mechanism: String = "none: this kernel has no Landlock".into(),
        pub problems: String = "Landlock: not implemented".into(),
    }

    /// Why a host a sandboxed command wants is put to the user (the
    /// permission question's reason, in chat and as an SDK client's
    /// `decision_reason`).
    "ask_sandbox_host" => pub struct SandboxHostQuestion {
        pub host: String = "registry.npmjs.org".into(),
    }

    /// A prompt that names an agent (`@agent-NAME`, as Claude Code's
    /// mention): the model is asked to hand the request to it.
    "agent_mention" => pub struct AgentMention {
        pub name: String = "code-reviewer".into(),
    }

    /// A tool call whose input is not JSON.
    "error_invalid_json" => pub struct InvalidJson {
        pub tool: String = "Read".into(),
        pub error: String = "EOF while parsing an object at line 1 column 20".into(),
    }

    /// A tool call whose input does not fit the tool's schema.
    "error_invalid_input" => pub struct InvalidInput {
        pub tool: String = "Read".into(),
        /// One problem per line.
        pub issues: String = "/offset: \"x\" is not of type \"integer\"".into(),
        pub plural: bool = false,
    }

    /// A PreToolUse hook (or the SDK's permission callback) blocked a call.
    "error_hook_blocked" => pub struct HookBlocked {
        pub tool: String = "Bash".into(),
        pub reason: String = "no network from here".into(),
    }

    /// A permission rule, mode or the user refused a call.
    "error_permission_denied" => pub struct PermissionDenied {
        pub tool: String = "Bash".into(),
        /// The rule or mode that decided (worded by `permission_reason`).
        pub reason: Reason = Reason::DenyRule { rule: "Bash(rm:*)".into() },
        /// The deny or ask rule that decided, if one did.
        pub rule: Option<String> = Some("Bash(rm:*)".into()),
        /// Where that rule was written: file:line:col, a variable or a flag.
        pub origin: Option<String> = Some(".claude/settings.json:4:14".into()),
        /// The decision was "ask".
        pub asked: bool = true,
        /// Someone could have answered.
        pub interactive: bool = false,
        /// What the user said when declining.
        pub message: Option<String> = None,
        /// Why the host's answer to the request could not be read (then
        /// nobody declined: the call is denied for safety).
        pub unreadable: Option<String> = None,
        /// A PermissionDenied hook answered `retry: true`.
        pub retry: bool = false,
    }

    /// WebFetch's request to the small model.
    "web_fetch_prompt" => pub struct WebFetchPrompt {
        pub url: String = "https://example.com/".into(),
        pub markdown: Clip = Clip::whole("# Example".into()),
        pub prompt: String = "What is this page about?".into(),
    }

    /// SendMessage, TaskOutput or TaskStop naming no known agent.
    "error_unknown_task" => pub struct UnknownTask {
        pub to: String = "reviewer".into(),
        /// The caller's agents, comma-separated; empty: none.
        pub known: String = "tester (a1b2c3d4)".into(),
    }

    /// A message queued for a running agent.
    "send_message_queued" => pub struct MessageQueued {
        pub to: String = "tester".into(),
    }

    /// A message that resumed an agent that had finished.
    "send_message_resumed" => pub struct MessageResumed {
        pub to: String = "tester".into(),
    }

    /// A sub-agent cancelled before it finished.
    "error_cancelled" => pub struct SubagentCancelled {}

    /// TaskOutput.
    "task_output" => pub struct TaskOutputText {
        pub task_id: String = "a1b2c3d4".into(),
        pub status: TaskStatus = TaskStatus::Running,
        pub output: Option<String> = Some("Halfway there.".into()),
        pub output_file: Option<String> = Some("/tmp/s/agents/a1b2c3d4.jsonl".into()),
    }

    /// TaskStop.
    "task_stop" => pub struct TaskStopped {
        pub task_id: String = "a1b2c3d4".into(),
        pub already: bool = true,
        pub status: TaskStatus = TaskStatus::Completed,
    }

    /// A fork asked for inside a fork.
    "error_fork_in_fork" => pub struct ForkInFork {}

    /// The directive a fork child gets.
    "fork_child" => pub struct ForkChild {
        pub directive: String = "Find every caller of parse_config.".into(),
    }

    /// What the parent's Agent call shows in a fork child's history.
    "fork_placeholder" => pub struct ForkPlaceholder {}

    /// An agent type that does not exist.
    "error_unknown_agent" => pub struct UnknownAgent {
        pub agent_type: String = "reviewr".into(),
        pub available: String = "Explore, Plan, general-purpose".into(),
    }

    /// An agent type the caller's `Agent(...)` does not allow.
    "error_agent_type_not_allowed" => pub struct AgentTypeNotAllowed {
        pub agent_type: String = "Plan".into(),
        pub allowed: String = "Explore".into(),
    }

    /// An agent type a permission rule denies.
    "error_denied_agent" => pub struct DeniedAgent {
        pub agent_type: String = "Plan".into(),
        pub rule: String = "Agent(Plan)".into(),
        pub source: String = ".claude/settings.json".into(),
    }

    /// A spawn whose model the settings refuse.
    "error_model_not_allowed" => pub struct ModelNotAllowed {
        pub agent_type: String = "reviewer".into(),
        pub why: String = "model `claude-opus-4-5` is denied by deniedModels (`opus`)".into(),
    }

    /// A spawn past `agents.max_depth`.
    "error_max_depth" => pub struct MaxDepth {
        pub agent_type: String = "Explore".into(),
        pub max_depth: u32 = 3,
    }

    /// An agent whose required MCP servers are missing.
    "error_mcp_required" => pub struct McpRequired {
        pub agent_type: String = "db-admin".into(),
        pub missing: String = "postgres".into(),
        pub available: String = "docs".into(),
    }

    /// The skills a sub-agent's `skills:` preload.
    "subagent_skills" => pub struct SubagentSkills {
        pub skills: Vec<SkillText> = vec![sample_skill()],
    }

    /// An agent started in the background.
    "result_async_launched" => pub struct AsyncLaunched {
        pub agent_id: String = "a1b2c3d4".into(),
        pub output_file: String = "/tmp/s/agents/a1b2c3d4.jsonl".into(),
        pub can_read_output: bool = true,
    }

    /// A sub-agent that ended without text: it found nothing, and the
    /// caller is told not to give it the same task again.
    "result_empty" => pub struct ResultEmpty {}

    /// The answer of a run the repeated-call guard ended: the best partial
    /// answer the session had, labelled as incomplete.
    "answer_incomplete" => pub struct AnswerIncomplete {
        /// The last sub-agent report, or the agent's own last text.
        pub partial: String = "src/agent_tool/mod.rs defines the schema.".into(),
        /// `partial` is a sub-agent's report.
        pub from_subagent: bool = true,
    }

    /// A call made again in the same message (`agents.repeated_call_limit`
    /// set): not run; the first one's result answers it.
    "error_repeated_call_this_turn" => pub struct RepeatedCallThisTurn {
        pub tool: String = "Read".into(),
        /// The id of the first such call of the message.
        pub first_id: String = "toolu_01".into(),
    }

    /// An answer sent back once to be checked (`agents.check_answers`):
    /// files the prompt names that no call has read, paths the answer
    /// names that do not exist.
    "answer_check" => pub struct AnswerCheck {
        /// Named in the prompt, read for the agent now (their text comes
        /// before these words).
        pub read: Vec<String> = vec!["config/defaults.toml".into()],
        /// Named in the prompt, and the Read call was refused or failed.
        pub not_read: Vec<String> = vec!["secrets.toml".into()],
        /// Named in the answer, and not in the project.
        pub missing: Vec<String> = vec!["src/agent/schema.rs".into()],
    }

    /// What `agents.first_search` found for a prompt before the agent's
    /// first request (the read files' texts come before these words).
    "first_search" => pub struct FirstSearch {
        /// Files read for the agent (a long one only in part).
        pub read: Vec<FirstRead> = vec![
            FirstRead { path: "config/defaults.toml".into(), more: 0, offset: 0 },
            FirstRead { path: "scripts/local-model".into(), more: 200, offset: 201 },
        ],
        /// Files the prompt names whose Read was refused or failed.
        pub not_read: Vec<String> = vec!["secrets.toml".into()],
        /// Folders the prompt names, with their files.
        pub folders: Vec<FolderFiles> = vec![FolderFiles {
            path: "tests".into(),
            files: vec!["tests/all.rs".into()],
            more: 0,
        }],
        /// Files whose name is a word of the prompt.
        pub named: Vec<String> = vec!["src/cli/worker.rs".into()],
    }

    /// Said after a final answer that still names paths the project does
    /// not have (`agents.check_answers`).
    "answer_unverified" => pub struct AnswerUnverified {
        pub missing: Vec<String> = vec!["src/agent/schema.rs".into()],
    }

    /// The lines after a sub-agent's result.
    "result_trailer" => pub struct ResultTrailer {
        pub agent_id: String = "a1b2c3d4".into(),
        pub worktree_path: Option<String> = Some("/repo/.cadre/worktrees/agent-a1b2c3d4".into()),
        pub worktree_branch: Option<String> = Some("agent-a1b2c3d4".into()),
        pub total_tokens: u64 = 12_345,
        pub tool_uses: u32 = 7,
        pub duration_ms: u64 = 4_200,
    }

    /// Why a session stopped short (a partial of `error_subagent_failed`,
    /// `task_notification` and `team_ended`).
    "run_problem" => pub struct RunProblemText {
        pub problem: RunProblem = RunProblem::Limit {
            text: "Stopped by the stall limit.".into(),
        },
    }

    /// Why a model request failed (a partial of `run_problem`,
    /// `error_web_fetch` and `error_web_search`).
    "provider_problem" => pub struct ProviderProblemText {
        pub provider: ProviderProblem = ProviderProblem::Http {
            status: 500,
            message: Some("Internal server error".into()),
        },
    }

    /// A sub-agent that failed.
    "error_subagent_failed" => pub struct SubagentFailed {
        pub description: String = "Find callers".into(),
        pub problem: RunProblem = RunProblem::Provider {
            provider: ProviderProblem::Overloaded { message: Some("Overloaded".into()) },
        },
        pub worktree_path: Option<String> = None,
        pub worktree_branch: Option<String> = None,
    }

    /// A background agent that ended, for its parent's next turn.
    "task_notification" => pub struct TaskNotification {
        pub task_id: String = "a1b2c3d4".into(),
        pub tool_use_id: String = "toolu_01".into(),
        pub output_file: String = "/tmp/s/agents/a1b2c3d4.jsonl".into(),
        pub status: TaskStatus = TaskStatus::Failed,
        pub description: String = "Find callers".into(),
        /// Why it failed (`failed` only).
        pub problem: Option<RunProblem> = Some(RunProblem::Provider {
            provider: ProviderProblem::StreamBroke,
        }),
        pub result: Option<String> = Some("Found 3 callers.".into()),
        pub total_tokens: u64 = 12_345,
        pub tool_uses: u32 = 7,
        pub duration_ms: u64 = 4_200,
        pub worktree_path: Option<String> = Some("/repo/.cadre/worktrees/agent-a1b2c3d4".into()),
        pub worktree_branch: Option<String> = Some("agent-a1b2c3d4".into()),
    }

    /// A task ended by `agents.task_timeout_ms`.
    "limit_task_timeout" => pub struct LimitTaskTimeout {
        pub ms: u64 = 600_000,
    }

    /// A background task its task backend (the worker fleet) could not
    /// queue, start or finish. `stage`: `queue` (why: `problem`),
    /// `transcripts_off`, `no_transcript` (`detail`: the transcript's
    /// path), `refused` (`detail`: the refusal, worded by its template) or
    /// `no_result`.
    "error_task_backend" => pub struct TaskBackendFailed {
        pub stage: String = "queue".into(),
        pub backend: String = "nats".into(),
        pub worker: String = "build-7-12345-ab12".into(),
        pub detail: String = String::new(),
        pub problem: Option<QueueProblem> = Some(QueueProblem::Unreachable),
    }

    /// A background task ended by `agents.stall_timeout_ms`.
    "limit_stall" => pub struct LimitStall {
        pub ms: u64 = 600_000,
    }

    /// A sub-agent ended by `agents.task_token_budget`.
    "limit_task_tokens" => pub struct LimitTaskTokens {
        pub budget: u64 = 200_000,
        pub used: u64 = 201_500,
    }

    /// A sub-agent or the main agent stopped by `agents.session_token_budget`.
    "limit_session_tokens" => pub struct LimitSessionTokens {
        pub budget: u64 = 2_000_000,
        pub used: u64 = 2_004_000,
    }

    /// A run ended by `agents.run_wait_ceiling_ms`.
    "limit_run_wait" => pub struct LimitRunWait {
        pub ms: u64 = 1_800_000,
    }

    /// TodoWrite done.
    "todo_write_result" => pub struct TodoWriteResult {
        pub total: usize = 4,
        pub pending: usize = 2,
        pub in_progress: usize = 1,
        pub completed: usize = 1,
    }

    /// Skill naming no skill.
    "error_unknown_skill" => pub struct UnknownSkill {
        pub name: String = "relase".into(),
        pub known: String = "release, review".into(),
    }

    /// A skill loaded by the Skill tool.
    "skill_loaded" => pub struct SkillLoaded {
        pub name: String = "release".into(),
        pub dir: String = "/repo/.claude/skills/release".into(),
        pub body: String = "Bump the version, then tag.".into(),
        pub args: String = "1.2.0".into(),
    }

    /// The head of a `/name` the user typed (skill or command), before
    /// its expanded text.
    "command_invoked" => pub struct CommandInvoked {
        pub name: String = "greet".into(),
        pub args: String = "Bob".into(),
    }

    /// A file an `@path` of a command read, before the command.
    "command_file" => pub struct CommandFile {
        /// The Read input, as JSON.
        pub input: String = r#"{"file_path":"/repo/notes.txt"}"#.into(),
        pub result: String = "1\tnotes".into(),
    }

    /// In place of a command's `` !`command` `` line that did not run
    /// because the folder is not trusted.
    "command_shell_skipped" => pub struct CommandShellSkipped {
        pub command: String = "git status".into(),
    }

    /// What a shell line becomes when `disableSkillShellExecution` is set.
    "command_shell_disabled" => pub struct CommandShellDisabled {
        pub command: String = "git status".into(),
    }

    /// What the user is told when a command's shell line was refused
    /// (nothing is sent to the model).
    "command_shell_denied" => pub struct CommandShellDenied {
        pub command: String = "rm -rf build".into(),
        pub reason: String = "Permission to use Bash has been denied.".into(),
    }

    /// What the user is told when a command's shell line failed (nothing
    /// is sent to the model).
    "command_shell_failed" => pub struct CommandShellFailed {
        pub command: String = "ls missing".into(),
        pub output: String = "ls: cannot access 'missing'".into(),
    }

    /// Before a prompt starting with `/NAME` when no command has that name.
    "command_unknown" => pub struct UnknownCommand {
        pub name: String = "deploy".into(),
        pub known: String = "/review, /clear".into(),
        /// Names left out of `known`.
        pub more: usize = 0,
    }

    /// A hook's `additionalContext`.
    "hook_context" => pub struct HookContext {
        pub event: String = "PostToolUse".into(),
        pub context: String = "The build is green.".into(),
    }

    /// A Stop, SubagentStop or TeammateIdle hook that sent the agent back
    /// to work.
    "hook_stop_feedback" => pub struct HookStopFeedback {
        pub event: String = "SubagentStop".into(),
        pub reason: String = "the tests were not run".into(),
    }

    /// The output style's block at the end of the main system prompt.
    "output_style" => pub struct OutputStyleBlock {
        pub name: String = "Explanatory".into(),
        pub prompt: String = "Explain your choices.".into(),
    }

    /// The prompt of one of cadre's built-in output styles.
    "output_style_builtin" => pub struct OutputStyleBuiltin {
        pub style: String = "Learning".into(),
    }

    /// The system text of a `prompt` hook's request: the model answers
    /// with a JSON decision.
    "hook_prompt_system" => pub struct HookPromptSystem {}

    /// The system text of an `agent` hook's sub-agent: it inspects the
    /// project and answers `{ok, reason}` with the StructuredOutput tool.
    "hook_agent_system" => pub struct HookAgentSystem {}

    /// The result of a tool call cut short by a cancel.
    "tool_cancelled" => pub struct ToolCancelled {}

    /// The assistant turn that stands for an answer cut short by a cancel.
    "turn_interrupted" => pub struct TurnInterrupted {}

    /// The description of the StructuredOutput tool (`--json-schema`).
    "structured_output_tool" => pub struct StructuredOutputTool {}

    /// The result of a StructuredOutput call whose input fits the schema.
    "structured_output_done" => pub struct StructuredOutputDone {}

    /// Sent once when the model answered in text where the run needs a
    /// StructuredOutput call.
    "structured_output_enforce" => pub struct StructuredOutputEnforce {}

    /// Asks the model to go on after its answer hit the output limit.
    "max_tokens_recovery" => pub struct MaxTokensRecovery {
        pub max_tokens: u32 = 8192,
    }

    /// Asks the model for a summary of the conversation.
    "compact_request" => pub struct CompactRequest {
        pub instructions: Option<String> = Some("Keep the failing test names.".into()),
    }

    /// The summary that replaces the compacted messages.
    "compact_summary" => pub struct CompactSummary {
        pub summary: String = "We fixed the parser; the CLI is next.".into(),
        pub replaced: usize = 40,
        /// Messages kept after the summary (0 or 2).
        pub kept: usize = 2,
    }

    /// A worktree that could not be made.
    "error_worktree" => pub struct WorktreeFailed {
        pub not_a_repo: bool = false,
        pub cwd: String = "/tmp/x".into(),
        /// Why the `WorktreeCreate` hooks made no worktree.
        pub hook_failed: Option<WorktreeHookFailure> = None,
        pub no_commits: bool = false,
        pub root: String = "/repo".into(),
        /// The git command that failed (`None` with `not_a_repo` or
        /// `no_commits`).
        pub error: Option<GitError> = Some(GitError::Exit {
            args: "worktree add --quiet -B worktree-agent-a1b2c3d4".into(),
            stderr: "fatal: invalid reference: HEAD".into(),
        }),
    }

    /// A fork child told it works in a worktree.
    "worktree_notice" => pub struct WorktreeNotice {
        pub worktree_path: String = "/repo/.cadre/worktrees/agent-a1b2c3d4".into(),
        pub parent_cwd: String = "/repo".into(),
    }

    /// The agent types a session may start (`first`), or what changed in
    /// them since it was last told (see `super::listing`).
    "agent_listing" => pub struct AgentListing {
        pub first: bool = false,
        pub added: Vec<AgentLine> = vec![AgentLine {
            name: "reviewer".into(),
            description: "Reviews code".into(),
            tools: "Read, Grep".into(),
        }],
        pub removed: Vec<String> = vec!["old".into()],
    }

    /// The skills a session may load, or what changed in them.
    "skill_listing" => pub struct SkillListing {
        pub first: bool = true,
        pub added: Vec<SkillLine> = vec![SkillLine {
            name: "pdf".into(),
            description: "Fill in PDF forms".into(),
            when_to_use: "When the user sends a PDF form".into(),
        }],
        pub removed: Vec<String> = Vec::new(),
    }
    /// An agent's memory folder and the head of its MEMORY.md, in its
    /// system prompt (`memory:` in its file).
    "agent_memory" => pub struct AgentMemoryBlock {
        /// `user`, `project` or `local`.
        pub scope: String = "user".into(),
        pub dir: String = "/home/me/.claude/agent-memory/reviewer".into(),
        /// Empty: there is no MEMORY.md yet.
        pub content: String = "- The build runs `make all`.".into(),
        /// MEMORY.md goes on past `content`.
        pub truncated: bool = false,
        pub max_lines: u64 = 200,
    }

    /// WebSearch's request to the model that runs Anthropic's server-side
    /// search.
    "web_search_prompt" => pub struct WebSearchPrompt {
        pub query: String = "rust 2024 edition release".into(),
    }

    /// The user's answers to AskUserQuestion.
    "ask_user_answers" => pub struct AskUserAnswers {
        pub answers: Vec<QuestionAnswer> = vec![QuestionAnswer {
            question: "Which database?".into(),
            answer: "SQLite".into(),
        }],
    }

    /// AskUserQuestion where nobody can answer (an unattended run).
    "error_ask_user_unavailable" => pub struct AskUserUnavailable {}

    /// AskUserQuestion that the user dismissed, or whose prompt failed.
    "error_ask_user_declined" => pub struct AskUserDeclined {
        pub reason: super::ask_user::Unanswered = super::ask_user::Unanswered::Dismissed,
    }
}

/// One question and the user's answer (empty: none).
#[derive(Debug, Clone, serde::Serialize)]
pub struct QuestionAnswer {
    pub question: String,
    pub answer: String,
}
