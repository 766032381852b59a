//! This process's own resource use: CPU (getrusage) and peak resident set size.

use super::outcome::CpuUsage;

/// getrusage(2) for this process (all threads).
pub(super) fn rusage() -> Option<libc::rusage> {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a full rusage struct into the pointer it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    // SAFETY: when getrusage returns 0 the struct is initialised.
    (rc == 0).then(|| unsafe { ru.assume_init() })
}

/// This process's peak resident set size in KiB: VmHWM from /proc/self/status. Not
/// ru_maxrss: Linux carries that across execve, so it reports the launching process's peak
/// when that was larger (a Python harness made a 1-session dbio look 14 MiB instead of 8).
pub fn max_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok();
    status
        .as_deref()
        .and_then(vm_hwm_kib)
        .or_else(|| u64::try_from(rusage()?.ru_maxrss).ok())
}

/// The `VmHWM:` line of /proc/<pid>/status, in KiB.
pub(super) fn vm_hwm_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// This process's user and system CPU seconds (all threads).
pub fn cpu_now() -> Option<CpuUsage> {
    let ru = rusage()?;
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(CpuUsage {
        user_s: secs(ru.ru_utime),
        system_s: secs(ru.ru_stime),
    })
}

/// This process's CPU since `start`.
pub(super) fn cpu_since(start: Option<CpuUsage>) -> Option<CpuUsage> {
    match (start, cpu_now()) {
        (Some(a), Some(b)) => Some(CpuUsage {
            user_s: b.user_s - a.user_s,
            system_s: b.system_s - a.system_s,
        }),
        _ => None,
    }
}
