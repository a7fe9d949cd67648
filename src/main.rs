//! The `cadre` binary: everything lives in the library; see `cadre --help`.

fn main() -> std::process::ExitCode {
    cadre::cli::main()
}
