//! The `bertqa` binary: the command line (`cli`) over the library.

mod cli;

// The library's modules at the binary's root, so that `cli` names them as `crate::…`.
use bertqa::{backend, decode, evaluate, features, journal, logits_io, perf, pipeline, sha256};
use bertqa::{shard, squad, tokenize, types, Error, Result};

/// mimalloc instead of glibc's malloc: the pipeline allocates and frees many small
/// buffers on several threads (features, logits, request bodies), where glibc spent
/// about a fifth of the client's CPU in malloc, free and page faults (scripts/bench.sh).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let code = cli::main();
    exit_now(code)
}

/// Turns huge pages off before anything is allocated: the loader runs this with the
/// program's other constructors, before the standard library's start-up (which
/// allocates the main thread's name, and so makes mimalloc reserve and touch its first
/// arena). Switched off in `main` instead, that first touch still faulted in a whole
/// 2 MiB huge page, zeroed: about 12 ms of every run's start-up on these machines.
/// Commands that read a large input switch them on again once they know
/// (`cli::common::huge_pages_for`).
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static NO_HUGE_PAGES_BEFORE_MAIN: extern "C" fn() = {
    extern "C" fn before_main() {
        no_transparent_huge_pages();
    }
    before_main
};

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
/// region is resident and zeroed whole: a small command pays for megabytes it never
/// uses (and when the machine has no free 2 MiB blocks, for compaction). The
/// process-wide switch is checked at page-fault time, so it covers arenas reserved
/// before it, but not pages already faulted in; a command over a large input clears it
/// again, where huge pages save a page fault per 4 KiB (`cli::common::huge_pages_for`).
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
