//! Where sessions live: out of the project, in the user's folder for it
//! in Claude Code's place (`$HOME/.claude/projects/<key>/`), so a run
//! leaves the project clean and a project-wide Grep finds no transcript;
//! sessions of the old place (`.cadre/sessions` in the project) are listed
//! and resumed by id (moved out first) but never picked by `--continue`;
//! a repository cannot say where transcripts go.

use serde_json::json;

use super::harness::{Project, last_tool_results, result_text};
use super::kit::{FakeServer, anthropic};
use super::worktrees::git;

const MARKER: &str = "zebra-7731-secret";

/// A trusted project that is a git repository with everything committed,
/// a notes file among it.
fn committed_repo() -> Project {
    let p = super::worktrees::repo("");
    p.write("notes.txt", &format!("{MARKER}\n"));
    git(p.path(), &["add", "."]);
    git(p.path(), &["commit", "-qm", "notes"]);
    p
}

/// The one session the user's session folder holds.
fn only_session(p: &Project) -> String {
    let ids = p.session_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].clone()
}

#[test]
fn a_run_writes_nothing_into_the_project_and_grep_finds_no_transcript() {
    let p = committed_repo();
    let notes = p.path().join("notes.txt");
    let first = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Read", json!({"file_path": notes})),
        anthropic::text_reply("read it"),
    ]);
    p.run(Some(&first), &["run", "read the notes"]).ok();
    assert_eq!(git(p.path(), &["status", "--porcelain"]), "");
    let id = only_session(&p);
    let main = std::fs::read_to_string(p.transcript_of(&id)).unwrap();
    assert!(main.contains(MARKER), "the transcript holds what was read");

    // A second session searches the whole project for what the first read.
    let second = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_2",
            "Grep",
            json!({"pattern": MARKER, "path": p.path(), "output_mode": "content"}),
        ),
        anthropic::text_reply("searched"),
    ]);
    p.run(Some(&second), &["run", "search"]).ok();
    let found = result_text(&last_tool_results(&second.request(1).json)[0]);
    assert!(found.contains("notes.txt"), "{found}");
    assert!(
        !found.contains(".jsonl"),
        "a transcript line was found: {found}"
    );
    assert_eq!(git(p.path(), &["status", "--porcelain"]), "");
}

#[test]
fn an_old_place_session_is_listed_and_resumed_by_id_but_never_continued() {
    let p = Project::new();
    let first = FakeServer::start([anthropic::text_reply("remembered: plum")]);
    p.run(Some(&first), &["run", "remember plum"]).ok();
    let new_id = only_session(&p);
    // As an older cadre (or a cloned repository) left it: its own id, its
    // folder with a `main.jsonl`.
    let id = "20200101T000000-0000abcd".to_string();
    let old = p.path().join(".cadre/sessions").join(&id);
    std::fs::create_dir_all(&old).unwrap();
    std::fs::rename(p.transcript_of(&new_id), old.join("main.jsonl")).unwrap();

    let list = p.run(None, &["sessions", "list", "--json"]).ok().json();
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["old_location"], true);
    let show = p
        .run(None, &["sessions", "show", &id, "--json"])
        .ok()
        .json();
    assert_eq!(show["old_location"], true);

    let never = FakeServer::start([]);
    let r = p.run(Some(&never), &["run", "--continue", "go on"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no session to continue"), "{}", r.stderr);
    assert_eq!(never.request_count(), 0);

    let again = FakeServer::start([anthropic::text_reply("plum, still")]);
    let r = p.run(Some(&again), &["run", "--resume", &id, "what was it?"]);
    r.ok();
    assert!(
        r.stderr.contains("old") && r.stderr.contains(&id),
        "the move is said: {}",
        r.stderr
    );
    let sent = again.request(0).json.to_string();
    assert!(sent.contains("remember plum"), "history resumed: {sent}");
    assert!(!old.exists(), "moved out of the project");
    // Moved into Claude Code's layout on the way, under its old id.
    let moved = std::fs::read_to_string(p.transcript_of(&id)).unwrap();
    assert!(moved.contains("plum, still"), "{moved}");
    assert!(!p.sessions_dir().join(&id).join("main.jsonl").exists());
    let list = p.run(None, &["sessions", "list", "--json"]).ok().json();
    assert_eq!(list[0]["old_location"], false);
}

#[test]
fn only_a_trusted_project_says_where_transcripts_go() {
    let mut p = Project::new();
    p.config("[transcripts]\ndir = \"logs\"\n");
    let s = FakeServer::start([anthropic::text_reply("one")]);
    p.run(Some(&s), &["run", "go"]).ok();
    assert!(
        p.path().join("logs").is_dir(),
        "trusted, the project's setting holds"
    );

    std::fs::remove_dir_all(p.path().join("logs")).unwrap();
    p.untrust();
    let s = FakeServer::start([anthropic::text_reply("two")]);
    let r = p.run(Some(&s), &["run", "go"]);
    r.ok();
    assert!(!p.path().join("logs").exists(), "{}", r.stderr);
    assert!(r.stderr.contains("transcripts.dir ("), "{}", r.stderr);
    only_session(&p);
}

#[test]
fn claude_config_dir_moves_the_session_folder_as_it_does_claude_codes() {
    let mut p = Project::new();
    let config_dir = tempfile::tempdir().unwrap();
    p.env("CLAUDE_CONFIG_DIR", config_dir.path().to_str().unwrap());
    let s = FakeServer::start([anthropic::text_reply("one")]);
    p.run(Some(&s), &["run", "go"]).ok();
    let key = p.sessions_dir().file_name().unwrap().to_owned();
    let folder = config_dir.path().join("projects").join(key);
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 1, "{folder:?}");
    assert!(!p.sessions_dir().exists());
}
