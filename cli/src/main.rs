//! The `bertqa` binary: the command line (`bertqa_cli`, the library of this package)
//! with its allocator.

/// mimalloc instead of glibc's malloc: the pipeline allocates and frees many small
/// buffers on several threads (features, logits, request bodies).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    no_transparent_huge_pages();
    std::process::ExitCode::from(bertqa_cli::main())
}

/// mimalloc asks for transparent huge pages on its arenas; then every touched 2 MiB
/// region is resident and zeroed whole: a small command pays for megabytes it never
/// uses. A command over a large input switches them on again
/// (`cli/common.rs`, `huge_pages_for`).
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) only sets a flag of this process;
    // failure (an old kernel) leaves huge pages on, which is harmless.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
