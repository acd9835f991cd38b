//! The `bertqa` binary: only glue. Everything lives in the library.

/// mimalloc instead of glibc's malloc: the pipeline allocates and frees many small
/// buffers on several threads (features, logits, request bodies), where glibc spent
/// about a fifth of the client's CPU in malloc, free and page faults (scripts/bench.sh).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    no_transparent_huge_pages();
    let code = bertqa::cli::main();
    exit_now(code)
}

/// Ends the process without the exit-time work a normal return does: nothing is left to
/// clean up (every output file is written by now, the answer files synced and renamed), but mimalloc's
/// exit handler would still walk and release every arena, about 2% of the client's CPU
/// on SQuAD dev (scripts/bench.sh). Standard output and error are flushed first.
fn exit_now(code: u8) -> ! {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    #[cfg(unix)]
    {
        extern "C" {
            fn _exit(status: std::ffi::c_int) -> !;
        }
        // SAFETY: _exit ends the process at once; every Rust buffer that matters was
        // flushed above and no other thread is writing output at this point.
        unsafe { _exit(std::ffi::c_int::from(code)) }
    }
    #[cfg(not(unix))]
    std::process::exit(i32::from(code))
}

/// mimalloc asks for transparent huge pages on its arenas; then every touched 2 MiB
/// region is resident and zeroed whole, which cost about 50 MB of peak RSS and a tenth of
/// the CPU on SQuAD dev. The process-wide switch is checked at page-fault time, so it
/// also covers the arena reserved before `main`.
#[cfg(target_os = "linux")]
fn no_transparent_huge_pages() {
    extern "C" {
        fn prctl(option: std::ffi::c_int, ...) -> std::ffi::c_int;
    }
    const PR_SET_THP_DISABLE: std::ffi::c_int = 41;
    // SAFETY: prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) only sets a flag of this process;
    // failure (an old kernel) leaves huge pages on, which is harmless.
    unsafe {
        prctl(
            PR_SET_THP_DISABLE,
            1 as std::ffi::c_ulong,
            0 as std::ffi::c_ulong,
            0 as std::ffi::c_ulong,
            0 as std::ffi::c_ulong,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn no_transparent_huge_pages() {}
