//! The tools tokenizer. (Stub: implemented by the catalog work.)

/// Splits a tools string on commas and white space outside parentheses.
pub fn tokenize_tools(text: &str) -> Vec<String> {
    text.split([',', ' '])
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The part of a tool spec before `(`: `Bash(git log:*)` → `Bash`.
pub fn base_name(spec: &str) -> &str {
    spec.split('(').next().unwrap_or(spec).trim()
}
