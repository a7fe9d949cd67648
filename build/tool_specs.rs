//! The embedded tool specs, converted once at build time: every
//! `agents/tools/*.yaml` file becomes one element of a JSON array in
//! `$OUT_DIR/tool_specs.json`, which `src/tools/spec.rs` embeds.
//!
//! Why: reading the YAML with positions cost ~9 M instructions at every
//! start, more than a quarter of a whole three-request run; the same data
//! as JSON deserializes in a small fraction of that. Files on disk are
//! still read as YAML, with positions for their diagnostics. A unit test
//! (`embedded_specs_pass_the_checks_a_file_gets`) checks that each converted
//! spec equals the one the YAML reader makes of the same file.
//!
//! A file that does not parse fails the build, naming the file and the
//! parser's message: the embedded specs are part of the program.

use std::path::Path;

/// Writes `$OUT_DIR/tool_specs.json` from `agents/tools/` under `manifest_dir`.
pub fn write(manifest_dir: &Path, out_dir: &Path) {
    let dir = manifest_dir.join("agents/tools");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut paths: Vec<_> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) => panic!("cannot read {}: {e}", dir.display()),
    };
    paths.retain(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")));
    paths.sort();
    let mut specs = Vec::with_capacity(paths.len());
    for path in &paths {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => panic!("cannot read {}: {e}", path.display()),
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        match serde_saphyr::from_str::<serde_json::Value>(text) {
            Ok(doc) => specs.push(doc),
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
    let json = match serde_json::to_string(&specs) {
        Ok(j) => j,
        Err(e) => panic!("cannot write the tool specs as JSON: {e}"),
    };
    let out = out_dir.join("tool_specs.json");
    if let Err(e) = std::fs::write(&out, json) {
        panic!("cannot write {}: {e}", out.display());
    }
}
