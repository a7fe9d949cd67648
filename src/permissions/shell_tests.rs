//! What the parse extracts from command lines.

use super::*;

/// A doubt as the embedded `shell_doubt` template words it.
fn said(u: &ShellDoubt) -> String {
    static T: std::sync::OnceLock<crate::templates::Templates> = std::sync::OnceLock::new();
    u.words(T.get_or_init(|| crate::templates::Templates::load(None).0))
}

/// The simple commands of `cmd`, each displayed, and `?` + reason for each
/// uncertainty.
fn shown(cmd: &str) -> Vec<String> {
    let p = parse(cmd);
    p.commands
        .iter()
        .map(SimpleCommand::display)
        .chain(p.uncertain.iter().map(|u| format!("? {}", said(u))))
        .collect()
}

#[track_caller]
fn expect(cmd: &str, want: &[&str]) {
    assert_eq!(shown(cmd), want, "parsing {cmd:?}");
}

#[test]
fn separators_comments_and_quotes() {
    expect("echo a #'\ntouch x", &["echo a", "touch x"]);
    expect(r"echo $'\'' ; touch x", &[r"echo ''\'''", "touch x"]);
    expect(r#"echo "a\"b" c"#, &[r#"echo 'a"b' c"#]);
    expect("echo a\\\nb", &["echo ab"]);
    expect("git status && git log", &["git status", "git log"]);
    expect("FOO=1 BAR=$(date) rm x", &["date", "rm x"]);
    expect("a=$(rm x)", &["rm x"]);
}

#[test]
fn quoting_and_escapes_in_command_names() {
    for cmd in [
        r#""rm" x"#,
        r"\rm x",
        "r''m x",
        r"$'\x72m' x",
        r"$'\162\155' x",
        r#"'r'"m" x"#,
    ] {
        expect(cmd, &["rm x"]);
    }
    expect("/bin/rm x", &["/bin/rm x"]);
}

#[test]
fn substitutions_and_nesting() {
    expect("echo `rm x`", &["rm x", "echo `rm x`"]);
    expect("echo $(rm x)", &["rm x", "echo $(rm x)"]);
    expect("diff <(rm x) y", &["rm x", "diff <(…) y"]);
    expect("cat <<EOF\n$(rm x)\nEOF", &["rm x", "cat"]);
    // A quoted here-document delimiter turns expansion off.
    expect("cat <<'EOF'\n$(rm x)\nEOF", &["cat"]);
    expect("(cd a && rm x)", &["cd a", "rm x"]);
    expect("{ rm x; }", &["rm x"]);
    expect("if true; then rm x; fi", &["true", "rm x"]);
    expect("f() { rm x; }; f", &["rm x", "f"]);
}

#[test]
fn wrappers_and_command_strings() {
    expect("command rm x", &["command rm x", "rm x"]);
    expect("env FOO=1 rm x", &["env FOO=1 rm x", "rm x"]);
    expect("xargs rm < list", &["xargs rm", "rm <input from xargs>"]);
    expect("xargs", &["xargs", "echo"]);
    expect(
        "find . -name '*.o' -delete",
        &["find . -name '*.o' -delete", "rm ."],
    );
    expect(
        r"find . -exec rm {} \;",
        &["find . -exec rm {} ';'", "rm {}"],
    );
    expect("sh -c 'rm -rf x'", &["sh -c 'rm -rf x'", "rm -rf x"]);
    expect(r#"bash -lc "rm x""#, &["bash -lc 'rm x'", "rm x"]);
    expect("eval 'rm x'", &["eval 'rm x'", "rm x"]);
    expect(
        "ls | sudo -u root rm x",
        &["ls", "sudo -u root rm x", "rm x"],
    );
    expect("timeout 5 rm x", &["timeout 5 rm x", "rm x"]);
    expect("nice -n 10 rm x", &["nice -n 10 rm x", "rm x"]);
    expect("env -S 'rm x' y", &["env -S 'rm x' y", "rm x y"]);
    expect("trap 'rm x' EXIT", &["trap 'rm x' EXIT", "rm x"]);
    expect("command -v rm", &["command -v rm"]);
    expect("command -pv rm", &["command -pv rm"]);
    // A script file is a plain command: its content is not read.
    expect("bash build.sh", &["bash build.sh"]);
}

#[test]
fn what_cannot_be_known_is_reported() {
    expect(
        "$X a",
        &[
            "$X a",
            "? the command name `$X` is only known when the shell runs it",
        ],
    );
    expect(
        r#""$(which rm)" x"#,
        &[
            "which rm",
            r#""$(which rm)" x"#,
            r#"? the command name `"$(which rm)"` is only known when the shell runs it"#,
        ],
    );
    expect(
        "echo ${A:-$(rm x)}",
        &[
            "echo ${A:-$(rm x)}",
            "? a command substitution inside the expansion `${A:-$(rm x)}`",
        ],
    );
    expect(
        "curl x | sh",
        &[
            "curl x",
            "sh",
            "? `sh` runs commands read from its standard input",
        ],
    );
    expect(
        "r* x",
        &[
            "'r*' x",
            "? the command name `r*` would be expanded by the shell",
        ],
    );
    // dash does not read `$'…'` as bash does: `sh -c` hides `touch x` here.
    let p = parse(r#"sh -c "echo \$'a\\' ; touch x ; echo \\''""#);
    assert!(
        p.uncertain
            .iter()
            .any(|u| said(u).contains("`sh` may not read")),
        "{p:?}"
    );
    let p = parse("fish -c 'rm x'");
    assert!(said(&p.uncertain[0]).contains("fish"), "{p:?}");
    let p = parse("echo 'unterminated");
    assert!(p.commands.is_empty());
    assert!(
        said(&p.uncertain[0]).starts_with("cannot parse `echo 'unterminated`"),
        "{p:?}"
    );
}

#[test]
fn deep_nesting_stops_and_is_uncertain() {
    // Linear growth: each level wraps the last in `$(…)`.
    let cmd = format!("{}rm x{}", "echo $(".repeat(20), ")".repeat(20));
    let p = parse(&cmd);
    assert!(!p.uncertain.is_empty(), "{p:?}");
    assert!(said(&p.uncertain[0]).contains("nest"), "{p:?}");
}

#[test]
fn ansi_c_escapes() {
    assert_eq!(ansi_c(r"a\tb\n"), "a\tb\n");
    assert_eq!(ansi_c(r"\x41\101\u00e9\'"), "AAé'");
    assert_eq!(ansi_c(r"\q"), r"\q");
}

#[test]
fn deep_or_huge_input_is_uncertain_not_a_crash() {
    for (open, close) in [
        ("(", ")"),
        ("$(", ")"),
        ("{ ", "; }"),
        ("if true; then ", "; fi"),
        ("\"$(", ")\""),
        ("`", "`"),
    ] {
        // Deep enough to exhaust a 2 MiB stack in a debug build.
        let cmd = format!("{}rm x{}", open.repeat(1000), close.repeat(1000));
        let p = parse(&cmd);
        assert!(
            p.uncertain
                .iter()
                .any(|u| said(u).contains("too many to check")),
            "{open:?}: {:?}",
            p.uncertain
        );
    }
    // Nesting built through escapes that only `eval` decodes.
    let cmd = format!("eval $'{}rm x{}'", "\\x28".repeat(300), "\\x29".repeat(300));
    assert!(
        parse(&cmd)
            .uncertain
            .iter()
            .any(|u| said(u).contains("too many")),
        "{cmd}"
    );
    let p = parse(&"x".repeat(MAX_SOURCE_BYTES + 1));
    assert!(said(&p.uncertain[0]).contains("too long"), "{p:?}");
    // Below the limits, nesting parses on the parser's own stack.
    let cmd = format!("{}rm x{}", "{ ".repeat(150), "; }".repeat(150));
    let p = parse(&cmd);
    assert!(p.uncertain.is_empty(), "{:?}", p.uncertain);
    assert_eq!(p.commands.len(), 1);
}

#[test]
fn arithmetic_on_variables_is_uncertain() {
    // Bash runs the substitution hidden in `x`'s value.
    for cmd in [
        "x='a[$(rm y)]'; (( x ))",
        "x='a[$(rm y)]'; echo $((x))",
        "x='a[$(rm y)]'; [[ $x -eq 1 ]]",
        "x='a[$(rm y)]'; [[ x -eq 1 ]]",
        "x='a[$(rm y)]'; let x",
        "x='a[$(rm y)]'; declare -i n=x",
        "x='a[$(rm y)]'; a[x]=1",
        "x='a[$(rm y)]'; echo ${a[x]}",
        "x='a[$(rm y)]'; echo ${s:x}",
        "for ((i = 0; i < n; i++)); do :; done",
    ] {
        let p = parse(cmd);
        assert!(!p.uncertain.is_empty(), "{cmd}: {p:?}");
    }
    for cmd in [
        "echo $((1 + 2 * 0x1F))",
        "echo $HOME ${HOME} $1 \"$@\" ${#HOME} ${X:-default} ${X:+set}",
        "[[ -n $x ]]",
        "[[ $x == y ]]",
        "declare -r x=1",
    ] {
        let p = parse(cmd);
        assert!(p.uncertain.is_empty(), "{cmd}: {p:?}");
    }
}
