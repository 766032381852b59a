//! Whether a data set will be read from storage on this server: judged against
//! shared_buffers and the RAM the OS page cache may use (PostgreSQL reads through the page
//! cache unless debug_io_direct=data, 16+). Setup prints the verdict, a run's preflight warns.

use dbio_core::dataset::{MIN_BUFFER_MULTIPLE, ServerRam, SizingVerdict};
use dbio_core::units::format_bytes;

/// The verdict on a data set of `data_bytes` on a server with `shared_buffers_bytes` whose
/// page cache may use `ram`. `drop_caches`: collector.drop_caches is on, so every run already starts with a cold page
/// cache and the advice says what that does not cover.
pub fn judge_size(
    data_bytes: u64,
    shared_buffers_bytes: u64,
    ram: Option<&ServerRam>,
    drop_caches: bool,
) -> SizingVerdict {
    let mut warnings = Vec::new();
    if data_bytes < MIN_BUFFER_MULTIPLE.saturating_mul(shared_buffers_bytes) {
        warnings.push(format!(
            "the data set ({}) is smaller than {MIN_BUFFER_MULTIPLE} x shared_buffers = {} (shared_buffers {}): \
             most reads will be buffer hits, not I/O. Raise --scale or --schemas, or lower shared_buffers.",
            format_bytes(data_bytes),
            format_bytes(MIN_BUFFER_MULTIPLE.saturating_mul(shared_buffers_bytes)),
            format_bytes(shared_buffers_bytes)
        ));
    }
    if let Some(ram) = ram
        && data_bytes < ram.bytes
    {
        let advice = if drop_caches {
            "collector.drop_caches is on, so each run starts with a cold page cache, but blocks read once \
             stay cached for the rest of the window. Make the data set larger than RAM, cap the server's \
             page cache with a memory cgroup, or on PostgreSQL 16+ start the server with \
             debug_io_direct=data (a developer option)."
        } else {
            "Make the data set larger than RAM, drop the page cache before each run (run --drop-caches, \
             or as root: sync; echo 3 > /proc/sys/vm/drop_caches), cap the server's page cache with a \
             memory cgroup, or on PostgreSQL 16+ start the server with debug_io_direct=data (a developer \
             option)."
        };
        warnings.push(format!(
            "the data set ({}) is smaller than {}: PostgreSQL reads through the OS page \
             cache, so many \"reads\" will be served from memory, not the device. {advice}",
            format_bytes(data_bytes),
            ram.describe()
        ));
    }
    SizingVerdict {
        data_bytes,
        shared_buffers_bytes,
        host_ram_bytes: ram.map(|r| r.bytes),
        ram_cgroup_file: ram.and_then(|r| r.cgroup_file.clone()),
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_data_sets_are_flagged() {
        let v = judge_size(64 << 20, 32 << 20, None, false);
        assert_eq!(v.warnings.len(), 1);
        assert!(
            v.warnings[0]
                .contains("smaller than 4 x shared_buffers = 128.0 MiB (shared_buffers 32.0 MiB)"),
            "{}",
            v.warnings[0]
        );
        let host = ServerRam::new(24 << 30, None);
        let v = judge_size(1 << 30, 32 << 20, Some(&host), false);
        assert_eq!(v.warnings.len(), 1);
        assert!(v.warnings[0].contains("page cache"));
        assert!(
            v.warnings[0].contains("the database host's RAM (24.0 GiB)"),
            "{}",
            v.warnings[0]
        );
        // A container's memory cap is the RAM its page cache may use: 1 GiB does not fit in
        // 256 MiB, and 128 MiB does, whatever the host has.
        let capped = ServerRam::new(
            24 << 30,
            Some((
                256 << 20,
                "/sys/fs/cgroup/memory/memory.limit_in_bytes".into(),
            )),
        );
        assert!(
            judge_size(1 << 30, 16 << 20, Some(&capped), false)
                .warnings
                .is_empty()
        );
        let v = judge_size(128 << 20, 16 << 20, Some(&capped), false);
        assert_eq!(v.host_ram_bytes, Some(256 << 20));
        assert!(
            v.warnings[0].contains("the server's memory cap (256.0 MiB, its cgroup's /sys/fs/cgroup/memory/memory.limit_in_bytes; the host has 24.0 GiB)"),
            "{}",
            v.warnings[0]
        );
        // A "limit" above the host's RAM (v1's unlimited) caps nothing.
        let unlimited = ServerRam::new(24 << 30, Some((0x7FFF_FFFF_FFFF_F000, "x".into())));
        assert_eq!((unlimited.bytes, unlimited.cgroup_file), (24 << 30, None));
        let cold = judge_size(1 << 30, 32 << 20, Some(&host), true);
        assert!(
            cold.warnings[0].contains("drop_caches is on") && !cold.warnings[0].contains("echo 3"),
            "{}",
            cold.warnings[0]
        );
        let v = judge_size(32 << 30, 32 << 20, Some(&host), false);
        assert!(v.warnings.is_empty());
    }
}
