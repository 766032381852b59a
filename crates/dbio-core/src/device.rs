//! The block device under a path, from /proc/diskstats (kernel doc
//! Documentation/ABI/testing/procfs-diskstats: fields 4-14 are reads completed, reads merged,
//! sectors read, ms reading, writes completed, writes merged, sectors written, ms writing,
//! I/Os in progress, ms doing I/O, weighted ms). Sectors are 512 bytes whatever the device.
//!
//! PostgreSQL reads through the OS page cache, so its read counter is not the device's; the
//! device's own counters are the physical truth when the server runs on this host.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::dbstats::DeviceMetrics;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskCounters {
    pub reads: u64,
    pub sectors_read: u64,
    pub ms_reading: u64,
    pub writes: u64,
    pub sectors_written: u64,
    pub ms_writing: u64,
}

/// A device found in /proc/diskstats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub major: u32,
    pub minor: u32,
}

/// The device that holds `path` (by its st_dev), if /proc/diskstats lists it. Paths on
/// virtual filesystems (tmpfs, overlay) have none.
pub fn device_for_path(path: &Path) -> Option<Device> {
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    parse_diskstats(&text)
        .into_iter()
        .find(|(d, _)| d.major == major && d.minor == minor)
        .map(|(d, _)| d)
}

pub fn read_counters(device: &Device) -> Option<DiskCounters> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    parse_diskstats(&text)
        .into_iter()
        .find(|(d, _)| d == device)
        .map(|(_, c)| c)
}

fn parse_diskstats(text: &str) -> Vec<(Device, DiskCounters)> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 14 {
                return None;
            }
            let n = |i: usize| f[i].parse::<u64>().ok();
            Some((
                Device {
                    major: f[0].parse().ok()?,
                    minor: f[1].parse().ok()?,
                    name: f[2].to_string(),
                },
                DiskCounters {
                    reads: n(3)?,
                    sectors_read: n(5)?,
                    ms_reading: n(6)?,
                    writes: n(7)?,
                    sectors_written: n(9)?,
                    ms_writing: n(10)?,
                },
            ))
        })
        .collect()
}

/// Device figures over `seconds`; `db_reads` is what the database counted as reads in the
/// same window, for the physical-read ratio.
pub fn device_metrics(
    device: &Device,
    path: &Path,
    before: DiskCounters,
    after: DiskCounters,
    seconds: f64,
    db_reads: Option<f64>,
    cache_control: &str,
) -> DeviceMetrics {
    let d = |a: u64, b: u64| a.saturating_sub(b) as f64;
    let reads = d(after.reads, before.reads);
    let writes = d(after.writes, before.writes);
    let rate = |x: f64| if seconds > 0.0 { x / seconds } else { 0.0 };
    DeviceMetrics {
        device: device.name.clone(),
        path: path.display().to_string(),
        seconds,
        reads_per_s: rate(reads),
        writes_per_s: rate(writes),
        read_kib_per_op: (reads > 0.0)
            .then(|| d(after.sectors_read, before.sectors_read) * 512.0 / 1024.0 / reads),
        avg_read_wait_ms: (reads > 0.0).then(|| d(after.ms_reading, before.ms_reading) / reads),
        avg_write_wait_ms: (writes > 0.0).then(|| d(after.ms_writing, before.ms_writing) / writes),
        physical_read_ratio: db_reads.filter(|r| *r > 0.0).map(|r| reads / r),
        cache_control: cache_control.to_string(),
    }
}

/// Writes dirty pages and drops the OS page cache (root only): `sync` then
/// `echo 3 > /proc/sys/vm/drop_caches`.
pub fn drop_page_cache() -> Result<(), String> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| {
        format!("cannot drop the page cache ({e}); --drop-caches needs root on the server's host")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
 253       0 vda 18735 3263 2093102 7790 144981 98702 8211656 245866 0 153444 266497 0 0 0 0 22000 12840
 253       1 vda1 18600 3263 2088000 7700 144981 98702 8211656 245866 0 153000 266000 0 0 0 0 0 0
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
";

    #[test]
    fn diskstats_lines_parse() {
        let all = parse_diskstats(SAMPLE);
        assert_eq!(all.len(), 3);
        let (d, c) = &all[0];
        assert_eq!((d.name.as_str(), d.major, d.minor), ("vda", 253, 0));
        assert_eq!(
            *c,
            DiskCounters {
                reads: 18735,
                sectors_read: 2093102,
                ms_reading: 7790,
                writes: 144981,
                sectors_written: 8211656,
                ms_writing: 245866,
            }
        );
    }

    #[test]
    fn metrics_from_two_readings() {
        let dev = Device {
            name: "vda".into(),
            major: 253,
            minor: 0,
        };
        let before = DiskCounters {
            reads: 1000,
            sectors_read: 16000,
            ms_reading: 500,
            ..DiskCounters::default()
        };
        let after = DiskCounters {
            reads: 3000,
            sectors_read: 48000,
            ms_reading: 1500,
            writes: 10,
            ms_writing: 20,
            ..DiskCounters::default()
        };
        let m = device_metrics(
            &dev,
            Path::new("/data"),
            before,
            after,
            10.0,
            Some(4000.0),
            "none",
        );
        assert_eq!(m.reads_per_s, 200.0);
        assert_eq!(m.read_kib_per_op, Some(8.0));
        assert_eq!(m.avg_read_wait_ms, Some(0.5));
        assert_eq!(m.avg_write_wait_ms, Some(2.0));
        assert_eq!(m.physical_read_ratio, Some(0.5));
        assert_eq!(
            device_metrics(&dev, Path::new("/"), before, before, 1.0, Some(0.0), "none")
                .physical_read_ratio,
            None
        );
    }

    #[test]
    fn this_hosts_root_has_a_device_or_none_without_error() {
        // Either a real device or a virtual filesystem; both must be handled.
        if let Some(d) = device_for_path(Path::new("/")) {
            assert!(read_counters(&d).is_some());
        }
    }
}
