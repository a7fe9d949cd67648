//! What the parse extracts from command lines.

use super::*;

/// The simple commands of `cmd`, each displayed, and `?` + reason for each
/// uncertainty.
fn shown(cmd: &str) -> Vec<String> {
    let p = parse(cmd);
    p.commands
        .iter()
        .map(SimpleCommand::display)
        .chain(p.uncertain.iter().map(|u| format!("? {u}")))
        .collect()
}

#[test]
fn dump() {
    for c in [
        "echo a #'\ntouch x",
        "echo $'\\'' ; touch x",
        "echo `rm x`",
        "echo $(rm x)",
        "FOO=1 rm x",
        "\"rm\" x",
        "\\rm x",
        "command rm x",
        "env FOO=1 rm x",
        "xargs rm < list",
        "find . -name '*.o' -delete",
        "find . -exec rm {} \\;",
        "sh -c 'rm -rf x'",
        "bash -lc \"rm x\"",
        "cat <<EOF\n$(rm x)\nEOF",
        "cat <<'EOF'\n$(rm x)\nEOF",
        "diff <(rm x) y",
        "$X a",
        "\"$(which rm)\" x",
        "eval 'rm x'",
        "echo ${A:-$(rm x)}",
        "r''m x",
        "$'\\x72m' x",
        "(cd a && rm x)",
        "{ rm x; }",
        "if true; then rm x; fi",
        "f() { rm x; }; f",
        "echo 'unterminated",
        "ls | sudo -u root rm x",
        "timeout 5 rm x",
        "nice -n 10 rm x",
        "git status && git log",
        "echo \"a\\\"b\" c",
        "a=$(rm x)",
        "echo a\\\nb",
        "curl x | sh",
        "/bin/rm x",
        "r* x",
    ] {
        eprintln!("{c:?} => {:#?}", shown(c));
    }
}
