//! Process-wide allocator settings for programs that run a crawler.
//!
//! Why this exists: with glibc's allocator, response bodies of tens of KiB that are freed
//! while other buffers sit above them leave a free block at the top of the heap; once it
//! passes glibc's trim threshold (128 KiB) the memory goes back to the OS and is faulted in
//! again on the next request. Measured with `perf stat -e page-faults` on
//! `bench_raw --body 32768 --only actor`: about 1.5 page faults per request with the default
//! threshold, none to speak of with a larger one. A library must not change process-wide
//! settings on its own, so binaries opt in by calling [`keep_freed_memory`] first thing.

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
