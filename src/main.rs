// glibc's malloc serialises the indexing threads on its arena locks (a
// fifth of a sync's client CPU went to it); mimalloc's heaps are per thread.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc's option enum (between the crate's
/// `mi_option_eager_commit_delay`, 14, and `mi_option_use_numa_nodes`, 16).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() {
    // Freed memory is kept for reuse instead of being handed back to the
    // system and faulted in again: a 100k-note sync or cold index runs
    // 10-25% faster, for a higher peak (cold index 650 -> 780 MB).
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, -1) };
    std::process::exit(ctxpack::cli::run(std::env::args_os().collect()));
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // Its default in mimalloc 3 is 1000 ms; the neighbouring options' are 1 and 0.
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) },
            1000
        );
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY - 1) },
            1
        );
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY + 1) },
            0
        );
    }
}
