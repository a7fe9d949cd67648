//! Agent-file parsing: any text, as a .md, .yaml or .toml file (chosen by
//! the first byte), must give a definition or diagnostics, never a panic.
#![no_main]

use std::path::Path;

use cadre::catalog::{Source, parse_agent_file};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let name = match selector % 4 {
        0 => "agents/fuzz.md",
        1 => "agents/fuzz.yaml",
        2 => "agents/fuzz.toml",
        _ => "agents/fuzz.yml",
    };
    let (_def, diags) = parse_agent_file(Path::new(name), text, Source::Project);
    for d in diags {
        assert!(d.path.is_some(), "a diagnostic without a path: {d}");
    }
});
