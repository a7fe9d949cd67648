//! Corpus compatibility: every agent file of a published collection
//! (wshobson/agents, MIT, see its LICENSE) loads without an error, and the
//! loaded name, description, tools and model equal what the file says. The
//! expected values are read here with a deliberately simple line reader,
//! independent of cadre's parser. Also checks that diagnostics for broken
//! files always name the file and a line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cadre::catalog::{CatalogInput, Prompt, Source, SourceDir, load, parse_agent_file};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus/wshobson-agents")
}

fn md_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            md_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "md") {
            out.push(p);
        }
    }
}

/// Top-level `key: value` pairs of the frontmatter, read line by line:
/// quoted values are unquoted, `>`/`>-` and `|` blocks and indented plain
/// continuations are folded the way YAML does for these simple cases.
fn frontmatter_fields(text: &str) -> BTreeMap<String, String> {
    let mut lines = text.lines();
    assert_eq!(lines.next().map(str::trim_end), Some("---"));
    let body: Vec<&str> = lines.take_while(|l| l.trim_end() != "---").collect();
    let mut fields = BTreeMap::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        i += 1;
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if key.starts_with(' ') {
            continue;
        }
        let value = value.trim();
        let mut cont = Vec::new();
        while i < body.len() && (body[i].starts_with(' ') || body[i].trim().is_empty()) {
            cont.push(body[i].trim());
            i += 1;
        }
        let v = if value.starts_with('|') {
            cont.join("\n")
        } else if value.starts_with('>') {
            cont.join(" ")
        } else if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            inner.replace("\\\"", "\"").replace("\\\\", "\\")
        } else if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
            inner.replace("''", "'")
        } else {
            std::iter::once(value)
                .chain(cont.iter().copied())
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        };
        fields.insert(key.to_string(), v.trim().to_string());
    }
    fields
}

#[test]
fn every_corpus_agent_loads_as_written() {
    let dir = corpus_dir();
    let mut files = Vec::new();
    md_files(&dir, &mut files);
    assert_eq!(files.len(), 202);

    let cat = load(&CatalogInput {
        dirs: vec![SourceDir {
            source: Source::Plugin,
            path: dir.clone(),
        }],
        ..Default::default()
    });
    assert_eq!(cat.files, 202);
    let errors: Vec<String> = cat
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");

    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let want = frontmatter_fields(&text);
        let (def, diags) = parse_agent_file(path, &text, Source::Plugin);
        // The only thing the corpus gets wrong is a colour outside the
        // eight (e.g. `magenta`): a warning, the agent loads.
        assert!(
            diags
                .iter()
                .all(|d| !d.is_error() && d.message.starts_with("color:")),
            "{}: {diags:?}",
            path.display()
        );
        let def = def.unwrap_or_else(|| panic!("{} did not load", path.display()));
        assert_eq!(def.name, want["name"], "{}", path.display());
        assert_eq!(def.description, want["description"], "{}", path.display());
        assert_eq!(
            def.model.as_deref(),
            want.get("model").map(String::as_str),
            "{}",
            path.display()
        );
        // `tools: A, B` or a flow list `tools: [A, "B"]`.
        let tools: Option<Vec<String>> = want.get("tools").map(|t| {
            let t = t
                .strip_prefix('[')
                .and_then(|t| t.strip_suffix(']'))
                .unwrap_or(t);
            t.split(',')
                .map(|s| s.trim().trim_matches(['"', '\'']).to_string())
                .filter(|s| !s.is_empty())
                .collect()
        });
        assert_eq!(def.tools, tools, "{}", path.display());
        let Prompt::Inline(prompt) = &def.prompt else {
            panic!("{}: not an inline prompt", path.display())
        };
        assert!(!prompt.is_empty(), "{}", path.display());
        // Loaded through the catalog too (the name may be shadowed by a
        // duplicate; then one of them is in `shadowed`).
        // Plugin agents are named `PLUGIN:NAME`; the plugin is the folder.
        let in_catalog = cat
            .get(&format!("wshobson-agents:{}", def.name))
            .is_some_and(|d| d.path.as_deref() == Some(path.as_path()))
            || cat
                .shadowed
                .iter()
                .any(|s| s.def.path.as_deref() == Some(path.as_path()));
        assert!(in_catalog, "{}", path.display());
    }
}

#[test]
fn diagnostics_for_broken_files_name_the_file_and_a_line() {
    let tmp = tempfile::tempdir().unwrap();
    let broken: &[(&str, &str)] = &[
        ("no-desc.md", "---\nname: a\n---\nbody\n"),
        (
            "bad-yaml.md",
            "---\nname: a\ndescription: d\ntools: [Read\n---\n",
        ),
        ("unterminated.md", "---\nname: a\ndescription: d\n"),
        ("no-front.md", "just text\n"),
        ("no-name.md", "---\ndescription: d\n---\n"),
        (
            "bad-values.md",
            "---\nname: b\ndescription: d\ncolor: mauve\nmaxTurns: 0\nhooks: 3\nmcpServers: [1]\nwhen: 'a b'\nzap: 1\n---\n",
        ),
        ("fork.md", "---\nname: fork\ndescription: d\n---\n"),
        ("bad.yaml", "name: y\ndescription: [\n"),
        ("no-name.yaml", "description: d\nprompt: p\n"),
        ("bad.toml", "name = \"t\"\ndescription = \n"),
        (
            "types.toml",
            "name = \"t\"\ndescription = \"d\"\ntools = 3\nbackground = 2\n",
        ),
        ("list.yml", "- a\n- b\n"),
    ];
    for (name, text) in broken {
        std::fs::write(tmp.path().join(name), text).unwrap();
    }
    let cat = load(&CatalogInput {
        dirs: vec![SourceDir {
            source: Source::Project,
            path: tmp.path().to_path_buf(),
        }],
        ..Default::default()
    });
    for (name, _) in broken {
        let about: Vec<_> = cat
            .diagnostics
            .iter()
            .filter(|d| d.path.as_ref().is_some_and(|p| p.ends_with(name)))
            .collect();
        assert!(!about.is_empty(), "no diagnostic for {name}");
    }
    for d in &cat.diagnostics {
        assert!(
            d.path.as_ref().is_some_and(|p| p.starts_with(tmp.path())),
            "{d}"
        );
        assert!(d.line.is_some() && d.column.is_some(), "{d}");
    }
    assert!(cat.get("b").is_some(), "bad optional values keep the agent");
    assert!(cat.get("t").is_some());
}

/// Every tool the corpus's agents ask for that cadre has is given: none of
/// them is withheld as unknown. What is still missing is listed here, so a
/// new tool shows up as a change to this list.
#[test]
fn no_corpus_agent_loses_a_tool_cadre_has() {
    use cadre::agent_tool::{ToolOffer, Withheld, withheld_tools};
    let dir = corpus_dir();
    let cat = load(&CatalogInput {
        dirs: vec![SourceDir {
            source: Source::Plugin,
            path: dir,
        }],
        ..Default::default()
    });
    let mut known: Vec<String> = cadre::tools::builtin_tools()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    known.extend(cadre::runtime::RUNTIME_TOOLS.iter().map(|s| s.to_string()));
    let offer = ToolOffer {
        known: known.clone(),
        max_depth: 3,
        ..Default::default()
    };
    let mut missing: BTreeMap<String, usize> = BTreeMap::new();
    let mut agents_losing = 0;
    for def in cat
        .agents
        .values()
        .chain(cat.shadowed.iter().map(|s| &s.def))
    {
        let lost: Vec<_> = withheld_tools(def, &offer, 1)
            .into_iter()
            .filter(|w| w.why == Withheld::Unknown)
            .collect();
        agents_losing += usize::from(!lost.is_empty());
        for w in lost {
            assert!(!known.contains(&w.tool), "{}", w.tool);
            *missing.entry(w.tool).or_default() += 1;
        }
    }
    // Tools the corpus names that cadre does not have.
    let names: Vec<&str> = missing.keys().map(String::as_str).collect();
    eprintln!("{agents_losing} corpus agents still lose a tool: {missing:?}");
    // Every tool the corpus names exists (the team tools with AGENT_TEAMS).
    assert!(names.is_empty(), "{missing:?}");
    assert_eq!(agents_losing, 0, "{missing:?}");
}
