//! The committed JSON Schemas of the headless protocol
//! (`docs/schemas/`, generated from `src/cli/wire.rs`): every line cadre
//! writes in a scenario, and every line a test sends it, is checked
//! against them.

use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;

fn load(name: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/schemas")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
    let schema: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
    jsonschema::draft202012::new(&schema)
        .unwrap_or_else(|e| panic!("{}: not a JSON Schema: {e}", path.display()))
}

fn problems(validator: &jsonschema::Validator, line: &Value) -> Vec<String> {
    validator
        .iter_errors(line)
        .map(|e| format!("at {:?}: {e}", e.instance_path().to_string()))
        .collect()
}

/// Why a line cadre wrote on stdout does not fit the output schema.
pub fn output_problems(line: &Value) -> Vec<String> {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    problems(
        V.get_or_init(|| load("stream-json-output.schema.json")),
        line,
    )
}

/// Why a line sent to cadre's stdin does not fit the input schema.
pub fn input_problems(line: &Value) -> Vec<String> {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    problems(
        V.get_or_init(|| load("stream-json-input.schema.json")),
        line,
    )
}

/// Panics naming every line of `lines` (written by cadre) that does not
/// fit the output schema.
pub fn assert_output_fits(what: &str, lines: &[Value]) {
    let bad: Vec<String> = lines
        .iter()
        .filter_map(|l| {
            let p = output_problems(l);
            (!p.is_empty()).then(|| format!("{l}\n    {}", p.join("\n    ")))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: stdout lines that do not fit docs/schemas/stream-json-output.schema.json:\n{}",
        bad.join("\n")
    );
}
