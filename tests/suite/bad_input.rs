//! Bad input through the real binary: a corpus of broken agent files next
//! to valid ones, and broken config files. Every broken file is reported
//! with its path (and line where the problem has one), every valid
//! neighbour still loads, and nothing panics.

use std::path::Path;

use serde_json::Value;

use super::harness::{Project, Run};

const AGENTS: &str = ".claude/agents";

fn valid(name: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: A valid neighbour called {name}\ntools: Read, Grep\n---\nYou are {name}.\n"
    )
}

/// (file, content, whether the diagnostic must carry a line). Each gets at
/// least one diagnostic; the ones that drop the file are errors, except a
/// file with no frontmatter at all, which is a warning ("skipped").
fn text_corpus() -> Vec<(&'static str, String, bool)> {
    vec![
        (
            "invalid-yaml.md",
            "---\nname: broken\ndescription: d\ntools: [Read\n---\nbody\n".into(),
            true,
        ),
        (
            "tab-yaml.md",
            "---\nname: tabbed\n\tdescription: d\n---\nbody\n".into(),
            true,
        ),
        (
            "wrong-types.md",
            "---\nname: [1, 2]\ndescription: {a: b}\n---\nbody\n".into(),
            true,
        ),
        (
            "wrong-types.yaml",
            "name: typed\ndescription: 42\ntools: {Read: yes}\nmaxTurns: many\nprompt: p\n".into(),
            true,
        ),
        (
            "wrong-types.toml",
            "name = [\"t\"]\ndescription = { a = 1 }\nprompt = \"p\"\n".into(),
            true,
        ),
        (
            "broken.toml",
            "name = \"t\"\ndescription = \"unterminated\nprompt = 1\n".into(),
            true,
        ),
        (
            "unterminated.md",
            "---\nname: never-closed\ndescription: d\n\nbody without a closing fence\n".into(),
            true,
        ),
        (
            "no-frontmatter.md",
            "Just a prompt, no frontmatter.\n".into(),
            true,
        ),
        ("empty.md", String::new(), true),
        ("list.yaml", "- a\n- b\n".into(), true),
    ]
}

fn write_bytes(p: &Project, rel: &str, bytes: &[u8]) {
    let path = p.path().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn diagnostics_for<'a>(diags: &'a [Value], file: &str) -> Vec<&'a Value> {
    diags
        .iter()
        .filter(|d| {
            d["path"]
                .as_str()
                .is_some_and(|p| Path::new(p).ends_with(file))
        })
        .collect()
}

fn no_panic(run: &Run) {
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert!(!run.stdout.contains("panicked"), "{}", run.stdout);
}

#[test]
fn every_broken_agent_file_is_reported_and_valid_neighbours_load() {
    let p = Project::new();
    for (name, text, _) in text_corpus() {
        p.write(&format!("{AGENTS}/{name}"), &text);
    }
    // Binary, non-UTF-8 and huge files.
    write_bytes(
        &p,
        &format!("{AGENTS}/binary.md"),
        b"---\nname: bin\x00\x01\x02\xff\n---\n",
    );
    write_bytes(
        &p,
        &format!("{AGENTS}/latin1.md"),
        b"---\nname: latin\ndescription: caf\xe9\n---\nbody\n",
    );
    let mut huge = valid("huge").into_bytes();
    huge.resize(10 * 1024 * 1024, b'a');
    write_bytes(&p, &format!("{AGENTS}/huge.md"), &huge);
    // Symlink loops: a folder linking to its parent, and two files linking
    // to each other.
    let dir = p.path().join(AGENTS);
    std::os::unix::fs::symlink(&dir, dir.join("loop")).unwrap();
    std::os::unix::fs::symlink(dir.join("b-link.md"), dir.join("a-link.md")).unwrap();
    std::os::unix::fs::symlink(dir.join("a-link.md"), dir.join("b-link.md")).unwrap();
    // Two files of one folder with the same name.
    p.write(&format!("{AGENTS}/dup-one.md"), &valid("twin"));
    p.write(&format!("{AGENTS}/dup-two.md"), &valid("twin"));
    // An unreadable file with valid content. As root it is readable anyway.
    let locked = p.write(&format!("{AGENTS}/locked.md"), &valid("locked"));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let readable_anyway = std::fs::read(&locked).is_ok();
    // The valid neighbours, in the same folder and a subfolder.
    for name in ["alpha", "beta"] {
        p.write(&format!("{AGENTS}/{name}.md"), &valid(name));
    }
    p.write(&format!("{AGENTS}/sub/gamma.md"), &valid("gamma"));

    let run = p.run(None, &["agents", "validate", "--json"]);
    no_panic(&run);
    assert_eq!(run.code, 1, "errors found: exit 1\n{run:?}");
    let report = run.json();
    let diags = report["diagnostics"].as_array().unwrap().clone();
    for d in &diags {
        assert!(d["path"].is_string(), "every diagnostic names a file: {d}");
    }

    for (name, _, with_line) in text_corpus() {
        let about = diagnostics_for(&diags, name);
        assert!(!about.is_empty(), "nothing reported for {name}: {diags:#?}");
        if with_line {
            assert!(
                about
                    .iter()
                    .any(|d| d["line"].as_u64().is_some_and(|l| l >= 1)
                        && d["column"].as_u64().is_some_and(|c| c >= 1)),
                "{name}: a line and column: {about:#?}"
            );
        }
    }
    let one = |file: &str, needle: &str| {
        let about = diagnostics_for(&diags, file);
        assert!(
            about.iter().any(|d| d["message"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains(needle)),
            "{file}: expected a message with {needle:?}: {about:#?}"
        );
    };
    one("binary.md", "binary");
    one("latin1.md", "utf-8");
    one("huge.md", "limit");
    one("loop", "loop");
    assert!(
        !diagnostics_for(&diags, "a-link.md").is_empty(),
        "the file link loop is reported: {diags:#?}"
    );
    let twins: Vec<_> = diags
        .iter()
        .filter(|d| d["message"].as_str().unwrap().contains("twin"))
        .collect();
    assert!(
        twins.iter().any(|d| d["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("dup-one.md") || p.ends_with("dup-two.md"))),
        "the duplicate name is reported with a path: {diags:#?}"
    );
    if readable_anyway {
        // Running as root: permission bits do not stop reads, so the file
        // is an ordinary valid agent.
        assert!(
            diagnostics_for(&diags, "locked.md").is_empty(),
            "{diags:#?}"
        );
    } else {
        one("locked.md", "cannot read");
    }

    // The valid neighbours all load.
    let run = p.run(None, &["agents", "list", "--json"]);
    no_panic(&run);
    run.ok();
    let list = run.json();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    for name in [
        "alpha",
        "beta",
        "gamma",
        "twin",
        "Explore",
        "general-purpose",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert_eq!(names.contains(&"locked"), readable_anyway, "{names:?}");
    for bad in ["broken", "never-closed", "bin", "latin", "huge"] {
        assert!(!names.contains(&bad), "{bad} should not load: {names:?}");
    }

    // Validating the folder by path reports the same files.
    let run = p.run(None, &["agents", "validate", "--json", AGENTS]);
    no_panic(&run);
    assert_eq!(run.code, 1);
    let by_path = run.json();
    for (name, _, _) in text_corpus() {
        assert!(
            !diagnostics_for(by_path["diagnostics"].as_array().unwrap(), name).is_empty(),
            "{name}"
        );
    }

    // And `run` still works with the broken folder present: render needs
    // no server.
    let run = p.run(None, &["render", "hi"]);
    no_panic(&run);
    run.ok();

    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o644)).unwrap();
}

#[test]
fn single_broken_files_given_by_path_are_reported_without_panicking() {
    let p = Project::new();
    write_bytes(&p, "x/binary.md", &[0u8, 159, 146, 150, 0, 1]);
    write_bytes(&p, "x/latin1.md", b"---\nname: caf\xe9\n---\n");
    p.write("x/unterminated.md", "---\nname: a\n");
    let run = p.run(
        None,
        &[
            "agents",
            "validate",
            "--json",
            "x/binary.md",
            "x/latin1.md",
            "x/unterminated.md",
            "x/missing.md",
        ],
    );
    no_panic(&run);
    assert_eq!(run.code, 1, "{run:?}");
    let v = run.json();
    let diags = v["diagnostics"].as_array().unwrap();
    for f in ["binary.md", "latin1.md", "unterminated.md", "missing.md"] {
        assert!(!diagnostics_for(diags, f).is_empty(), "{f}: {diags:#?}");
    }
}

/// A broken config file is exit 2 with `path:line:col` on stderr.
#[test]
fn broken_config_files_are_exit_2_with_path_line_and_column() {
    let cases: &[(&str, &str, u32)] = &[
        // (content appended after a valid first line, file, line)
        ("[provider]\nmodel = \n", "syntax", 3),
        ("[provider]\nmax_tokens = \"many\"\n", "type", 3),
        ("[provider\nmodel = \"x\"\n", "table", 2),
    ];
    for (body, what, line) in cases {
        let p = Project::new();
        std::fs::write(
            p.path().join("cadre.toml"),
            format!("# a cadre config\n{body}"),
        )
        .unwrap();
        let run = p.run(None, &["render", "hi"]);
        no_panic(&run);
        assert_eq!(run.code, 2, "{what}: {run:?}");
        let needle = format!("cadre.toml:{line}:");
        assert!(
            run.stderr.contains(&needle),
            "{what}: stderr names {needle}col: {}",
            run.stderr
        );
    }
}

#[test]
fn a_binary_or_non_utf8_config_is_exit_2_naming_the_file() {
    for bytes in [
        &b"\x00\x01\x02binary"[..],
        &b"[provider]\nmodel = \"caf\xe9\"\n"[..],
    ] {
        let p = Project::new();
        std::fs::write(p.path().join("cadre.toml"), bytes).unwrap();
        let run = p.run(None, &["render", "hi"]);
        no_panic(&run);
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains("cadre.toml"), "{}", run.stderr);
    }
}
