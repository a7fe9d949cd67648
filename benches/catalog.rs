//! Benchmarks of `catalog::load` over generated catalogs of 1,000 and
//! 10,000 agent files (a mix of .md, .yaml and .toml in nested folders),
//! and 100,000 in an ignored benchmark (`cargo bench --bench catalog --
//! --ignored`; `bench/run-all` runs it): generating its files alone takes
//! a while.
//!
//! For profiling, `CADRE_CATALOG_PROFILE=DIR,N,LOADS cargo bench --bench
//! catalog` skips divan: it generates `N` files into `DIR` once (kept for
//! later runs), then loads them `LOADS` times and prints each load's wall
//! time and the process's CPU time, for `perf stat`/`perf record` without
//! the generation in the figures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use cadre::catalog::{CatalogInput, Source, SourceDir, load};

fn main() {
    if let Ok(spec) = std::env::var("CADRE_CATALOG_PROFILE") {
        profile(&spec);
        return;
    }
    divan::main();
}

/// See the module comment: `DIR,N,LOADS`.
fn profile(spec: &str) {
    let parts: Vec<&str> = spec.split(',').collect();
    let [dir, n, loads] = parts[..] else {
        panic!("CADRE_CATALOG_PROFILE: expected DIR,N,LOADS, got {spec}");
    };
    let (dir, n, loads): (&Path, usize, usize) =
        (Path::new(dir), n.parse().unwrap(), loads.parse().unwrap());
    let done = dir.join(format!(".generated-{n}"));
    if !done.exists() {
        generate(dir, n);
        std::fs::write(&done, "").unwrap();
    }
    let input = CatalogInput {
        dirs: vec![SourceDir {
            source: Source::Project,
            path: dir.to_path_buf(),
        }],
        ..Default::default()
    };
    for _ in 0..loads {
        let (cpu, start) = (cpu_ms(), std::time::Instant::now());
        let cat = load(&input);
        let wall = start.elapsed();
        let cpu = cpu_ms() - cpu;
        assert_eq!(cat.files, n);
        assert!(cat.diagnostics.is_empty(), "{:?}", cat.diagnostics.first());
        println!("load of {n} files: {wall:.2?} wall, {cpu} ms CPU");
        drop(divan::black_box(cat));
    }
}

/// User plus system CPU time of the whole process, in milliseconds (clock
/// ticks of 10 ms, from /proc/self/stat).
fn cpu_ms() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line.
    (fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()) * 10
}

/// Writes `n` agent files under `dir`, a third of each format, 100 per folder.
fn generate(dir: &Path, n: usize) {
    let body = "You are a careful specialist. Read the code, think, then answer.\n".repeat(20);
    for i in 0..n {
        let sub = dir.join(format!("group{:03}", i / 100));
        std::fs::create_dir_all(&sub).unwrap();
        let (file, text) = match i % 3 {
            0 => (
                format!("agent{i}.md"),
                format!(
                    "---\nname: agent{i}\ndescription: Use when: the task is number {i}. Handles it end to end.\ntools: Read, Grep, Glob, Bash(git log:*)\nmodel: sonnet\ncolor: blue\n---\n\n{body}"
                ),
            ),
            1 => (
                format!("agent{i}.yaml"),
                format!(
                    "name: agent{i}\ndescription: \"Agent {i}\"\ntools:\n  - Read\n  - Grep\nmaxTurns: 20\nprompt: |\n  {}\n",
                    body.trim_end().replace('\n', "\n  ")
                ),
            ),
            _ => (
                format!("agent{i}.toml"),
                format!(
                    "name = \"agent{i}\"\ndescription = \"Agent {i}\"\ndisallowedTools = [\"Edit\", \"Write\"]\nmodel = \"haiku\"\nprompt = \"\"\"\n{body}\"\"\"\n"
                ),
            ),
        };
        std::fs::write(sub.join(file), text).unwrap();
    }
}

#[divan::bench(args = [1_000, 10_000], sample_count = 10)]
fn load_catalog(bencher: divan::Bencher, n: usize) {
    bench_load(bencher, n);
}

#[divan::bench(args = [100_000], sample_count = 3, sample_size = 1, ignore)]
fn load_catalog_large(bencher: divan::Bencher, n: usize) {
    bench_load(bencher, n);
}

fn bench_load(bencher: divan::Bencher, n: usize) {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path(), n);
    let input = CatalogInput {
        dirs: vec![SourceDir {
            source: Source::Project,
            path: tmp.path().to_path_buf(),
        }],
        ..Default::default()
    };
    bencher.bench(|| {
        let cat = load(divan::black_box(&input));
        assert_eq!(cat.files, n);
        assert!(cat.diagnostics.is_empty(), "{:?}", cat.diagnostics.first());
        cat
    });
}

/// One file of each format, parsed from memory (no I/O).
#[divan::bench(args = ["md", "yaml", "toml"])]
fn parse_one(bencher: divan::Bencher, ext: &str) {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path(), 3);
    let i = ["md", "yaml", "toml"]
        .iter()
        .position(|e| *e == ext)
        .unwrap();
    let path = tmp.path().join("group000").join(format!("agent{i}.{ext}"));
    let text = std::fs::read_to_string(&path).unwrap();
    bencher.bench(|| {
        cadre::catalog::parse_agent_file(&path, divan::black_box(&text), Source::Project)
    });
}
