//! The benchmark process's descriptors, CPU time and memory.

use std::time::Duration;

/// This process's user + system CPU time so far.
pub(crate) fn cpu_time() -> Duration {
    // SAFETY: an all-zero rusage is a valid value; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Bytes the allocator has handed out and not had back (glibc's `mallinfo2`): what
/// the process holds, whether or not freed memory went back to the OS.
pub(crate) fn heap_in_use() -> u64 {
    // SAFETY: mallinfo2 takes nothing and returns a plain struct.
    unsafe { libc::mallinfo2() }.uordblks as u64
}

/// /proc/self/status, kept open and read again from the start each time.
pub(crate) struct ProcStatus(Option<std::fs::File>);

impl ProcStatus {
    pub(crate) fn open() -> ProcStatus {
        ProcStatus(std::fs::File::open("/proc/self/status").ok())
    }

    /// A `Vm…:` line, in KiB (0 if it cannot be read).
    pub(crate) fn kib(&mut self, field: &str) -> u64 {
        use std::io::{Read, Seek};
        let mut text = String::new();
        let Some(f) = self.0.as_mut() else { return 0 };
        if f.rewind()
            .and_then(|()| f.read_to_string(&mut text))
            .is_err()
        {
            return 0;
        }
        text.lines()
            .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}
