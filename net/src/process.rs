//! Process-wide settings for programs that run a crawler. A library must not change them
//! on its own, so binaries opt in by calling these first thing.
//!
//! - [`keep_freed_memory`]: with glibc's allocator, response bodies of tens of KiB that
//!   are freed while other buffers sit above them leave a free block at the top of the
//!   heap; once it passes glibc's trim threshold (128 KiB) the memory goes back to the OS
//!   and is faulted in again on the next request. Measured with `perf stat -e page-faults`
//!   on `bench_raw --body 32768 --only actor`: about 1.5 page faults per request with the
//!   default threshold, none to speak of with a larger one.
//! - [`raise_open_files`]: a crawl over many hosts holds a socket per connection it keeps
//!   for reuse (up to `crawler.pool_hosts` hosts per exit) and one per request in flight;
//!   the soft open-file limit many systems start a shell with (1024) is below what four
//!   exits may hold at the defaults. The hard limit is the administrator's bound, and the
//!   soft one is raised to it, as Go's runtime does for every program on Linux.

/// Keep up to `bytes` of freed memory at the top of the heap instead of returning it to the
/// OS after each large free. Returns `true` when the setting took effect (glibc on Linux);
/// other allocators and platforms are left as they are.
pub fn keep_freed_memory(bytes: usize) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a tunable of the allocator; any value is valid.
        unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, bytes) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = bytes;
        false
    }
}

/// Raise the soft open-file limit (`RLIMIT_NOFILE`) to the hard one; returns the soft
/// limit in force afterwards (the old one when raising failed, `None` when it cannot be
/// read or the platform has none).
pub fn raise_open_files() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let soft = lim.rlim_cur;
            lim.rlim_cur = lim.rlim_max;
            // SAFETY: setrlimit reads the struct we own.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
                return Some(soft);
            }
        }
        Some(lim.rlim_cur)
    }
    #[cfg(not(unix))]
    {
        None
    }
}
