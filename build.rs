//! Three things the program needs from the build:
//! - the embedded tool specs as JSON, converted from their YAML once here
//!   (`build/tool_specs.rs`), for every profile;
//! - for release builds, relative relocations packed as DT_RELR when the
//!   build machine's loader takes them (`pack_relative_relocations`;
//!   `CADRE_NO_RELR=1` turns it off);
//! - for release builds, the code laid out as described below
//!   (`CADRE_NO_SYMBOL_ORDER=1` turns it off).
//!
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

#[path = "build/tool_specs.rs"]
mod tool_specs;

const ORDER: &str = "build/symbol-order.txt";

fn main() {
    embed_tool_specs();
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CADRE_NO_SYMBOL_ORDER");
    println!("cargo:rerun-if-env-changed=CADRE_LINK_MAP");
    println!("cargo:rerun-if-env-changed=CADRE_NO_RELR");
    // scripts/symbol-order asks for the linker's map (every function's
    // name and address) of the binary as it is installed, stripped.
    if let Some(map) = env::var_os("CADRE_LINK_MAP") {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,-Map={}",
            Path::new(&map).display()
        );
    }
    if env::var("PROFILE").as_deref() != Ok("release") {
        return;
    }
    pack_relative_relocations();
    if env::var_os("CADRE_NO_SYMBOL_ORDER").is_some() {
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

/// Stores the binary's ~36,000 relative relocations (addresses the loader
/// adds the load address to: vtables, string tables) as a bitmap, DT_RELR,
/// instead of 24 bytes each: the loader then reads a few KiB at start
/// instead of ~860 KiB, which were resident for the whole run.
///
/// The loader must know the format (glibc 2.36 and later; the linker then
/// makes the binary require `GLIBC_ABI_DT_RELR`, so an older loader refuses
/// it with a clear message instead of misreading it). Only when building
/// for the machine the build runs on, and only when a probe program linked
/// this way also runs here; otherwise the plain table, as before.
fn pack_relative_relocations() {
    if env::var_os("CADRE_NO_RELR").is_some() || env::var("TARGET").ok() != env::var("HOST").ok() {
        return;
    }
    let arg = "-Wl,-z,pack-relative-relocs".to_string();
    let Some(probe) = link_probe("relr", std::slice::from_ref(&arg)) else {
        return;
    };
    if Command::new(probe)
        .output()
        .is_ok_and(|o| o.status.success())
    {
        println!("cargo:rustc-link-arg-bins={arg}");
    }
}

/// Whether a trivial program links with `args`, with this build's compiler,
/// target and flags.
fn linker_takes(args: &[String]) -> bool {
    link_probe("probe", args).is_some()
}

/// Links a trivial program named `name` with `args`, with this build's
/// compiler, target and flags; the program's path when that worked.
fn link_probe(name: &str, args: &[String]) -> Option<PathBuf> {
    let out = PathBuf::from(env::var_os("OUT_DIR")?);
    let rustc = env::var_os("RUSTC")?;
    let src = out.join(format!("{name}.rs"));
    std::fs::write(&src, "fn main() {}\n").ok()?;
    let exe = out.join(name);
    let mut cmd = Command::new(rustc);
    cmd.arg(format!("--crate-name={name}"))
        .arg("--crate-type=bin")
        .arg("-o")
        .arg(&exe)
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
    let linked = cmd.output().is_ok_and(|o| o.status.success());
    linked.then_some(exe)
}

/// The embedded tool specs as JSON (see `build/tool_specs.rs`), for every
/// profile.
fn embed_tool_specs() {
    println!("cargo:rerun-if-changed=build/tool_specs.rs");
    if let (Some(dir), Some(out)) = (env::var_os("CARGO_MANIFEST_DIR"), env::var_os("OUT_DIR")) {
        tool_specs::write(Path::new(&dir), Path::new(&out));
    }
}
