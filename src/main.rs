//! The `bertqa` binary: only glue. Everything lives in the library.

fn main() -> std::process::ExitCode {
    bertqa::cli::main()
}
