// glibc's malloc serialises the indexing threads on its arena locks (a
// fifth of a sync's client CPU went to it); mimalloc's heaps are per thread.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Freed memory is kept for reuse instead of being handed back to the
/// system and faulted in again (mimalloc's purge delay of -1), as the
/// 100k-note sync was measured to want. On a 10k-note cold index the
/// setting makes no difference measurable here once runs are ordered
/// ABBA with a pause between them (1.75-1.83 s either way); a plain
/// alternation favoured whichever process ran second.
///
/// mimalloc reads its options when it initialises, in a constructor of
/// priority 101 that runs before `main` (and before the Rust runtime's
/// first allocation); an option set in `main` came too late to take
/// effect. This constructor runs first (priority 100): the linker orders
/// `.init_array.NNNNN` sections by number.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array.00100")]
static CONFIGURE_ALLOCATOR: extern "C" fn() = configure_allocator;

/// `mi_option_purge_delay` in mimalloc's option enum; the crate has no
/// named constant for it. `tests/cli.rs` checks, through mimalloc's own
/// listing of its options at start-up, that this is the option set and
/// that it is set before mimalloc reads it.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// `mi_option_allow_thp`: with transparent huge pages, each first touch of
/// mimalloc's arena faulted in and zeroed 2 MB. A 10k-note search touches
/// little of each, and zeroing was 40% of its CPU (perf: `clear_page_erms`
/// under `do_huge_pmd_anonymous_page`): 48-56 -> 31-32 ms CPU a search;
/// a 10k cold index spends the same CPU either way (3.7 s) and peaks at
/// 170 MB instead of 230 MB.
const ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

extern "C" fn configure_allocator() {
    // SAFETY: mi_option_set only writes mimalloc's option table, which
    // needs no initialisation; nothing else runs this early.
    unsafe {
        libmimalloc_sys::mi_option_set(PURGE_DELAY, -1);
        libmimalloc_sys::mi_option_set(ALLOW_THP, 0);
    }
}

fn main() {
    #[cfg(not(target_os = "linux"))]
    configure_allocator();
    std::process::exit(ctxpack::cli::run(std::env::args_os().collect()));
}
