//! The `bertqa` binary: only glue. Everything lives in the library.

/// mimalloc instead of glibc's malloc: the pipeline allocates and frees many small
/// buffers on several threads (features, logits, request bodies), where glibc spent
/// about a fifth of the client's CPU in malloc, free and page faults (scripts/bench.sh).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    bertqa::cli::main()
}
