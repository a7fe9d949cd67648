//! Lays out the release binary's code so that what a run executes lies
//! together: the linker places the functions named in
//! `build/symbol-order.txt` first, in that order (see
//! `scripts/symbol-order`, which writes the list, and bench/turn-notes.md).
//!
//! Why: the kernel maps a program's code 64 KiB at a time around each page
//! it touches, so the ~4 MB of functions a run executes, scattered across
//! ~20 MB of code, kept ~16 MB of the binary resident; packed together they
//! keep ~5 MB.
//!
//! Only for release builds, and only when the linker takes the option: a
//! tiny program is linked with it first, so a toolchain or a configured
//! linker without `--symbol-ordering-file` (GNU ld) builds as before. Names
//! the list has and the binary lacks (other dependency versions, another
//! compiler) are skipped by the linker without a warning.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const ORDER: &str = "build/symbol-order.txt";

fn main() {
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CADRE_NO_SYMBOL_ORDER");
    println!("cargo:rerun-if-env-changed=CADRE_LINK_MAP");
    // scripts/symbol-order asks for the linker's map (every function's
    // name and address) of the binary as it is installed, stripped.
    if let Some(map) = env::var_os("CADRE_LINK_MAP") {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,-Map={}",
            Path::new(&map).display()
        );
    }
    if env::var("PROFILE").as_deref() != Ok("release")
        || env::var_os("CADRE_NO_SYMBOL_ORDER").is_some()
    {
        return;
    }
    let Some(dir) = env::var_os("CARGO_MANIFEST_DIR") else {
        return;
    };
    let order = PathBuf::from(dir).join(ORDER);
    if !order.is_file() {
        return;
    }
    let args = [
        format!("-Wl,--symbol-ordering-file={}", order.display()),
        "-Wl,--no-warn-symbol-ordering".to_string(),
    ];
    if !linker_takes(&args) {
        println!(
            "cargo:warning=the linker does not take --symbol-ordering-file; the binary's code keeps the compiler's order"
        );
        return;
    }
    for a in &args {
        println!("cargo:rustc-link-arg-bins={a}");
    }
}

/// Whether a trivial program links with `args`, with this build's compiler,
/// target and flags.
fn linker_takes(args: &[String]) -> bool {
    let (Some(out), Some(rustc)) = (env::var_os("OUT_DIR"), env::var_os("RUSTC")) else {
        return false;
    };
    let out = Path::new(&out);
    let src = out.join("probe.rs");
    if std::fs::write(&src, "fn main() {}\n").is_err() {
        return false;
    }
    let mut cmd = Command::new(rustc);
    cmd.arg("--crate-name=probe")
        .arg("--crate-type=bin")
        .arg("-o")
        .arg(out.join("probe"))
        .arg(&src);
    if let Ok(target) = env::var("TARGET") {
        cmd.arg("--target").arg(target);
    }
    // A linker configured for the target, and the build's own flags.
    if let Ok(linker) = env::var("RUSTC_LINKER") {
        cmd.arg(format!("-Clinker={linker}"));
    }
    if let Ok(flags) = env::var("CARGO_ENCODED_RUSTFLAGS") {
        cmd.args(flags.split('\u{1f}').filter(|f| !f.is_empty()));
    }
    for a in args {
        cmd.arg("-C").arg(format!("link-arg={a}"));
    }
    cmd.output().is_ok_and(|o| o.status.success())
}
