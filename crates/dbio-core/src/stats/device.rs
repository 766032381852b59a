//! The block device under a path, from /proc/diskstats (kernel doc
//! Documentation/ABI/testing/procfs-diskstats: fields 4-14 are reads completed, reads merged,
//! sectors read, ms reading, writes completed, writes merged, sectors written, ms writing,
//! I/Os in progress, ms doing I/O, weighted ms). Sectors are 512 bytes whatever the device.
//!
//! PostgreSQL reads through the OS page cache, so its read counter is not the device's; the
//! device's own counters are the physical truth when the server runs on this host.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::stats::dbstats::DeviceMetrics;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskCounters {
    pub reads: u64,
    pub sectors_read: u64,
    pub ms_reading: u64,
    pub writes: u64,
    pub sectors_written: u64,
    pub ms_writing: u64,
    /// Field 13: ms the device had I/O in flight (iostat %util).
    pub ms_doing_io: u64,
    /// Field 14: weighted ms doing I/O, each ms counted once per I/O in flight (iostat aqu-sz).
    pub weighted_ms: u64,
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
    counters_in(&text, device)
}

/// The counters of `device` in a /proc/diskstats text (this host's or the server's).
pub fn counters_in(diskstats: &str, device: &Device) -> Option<DiskCounters> {
    parse_diskstats(diskstats)
        .into_iter()
        .find(|(d, _)| d == device)
        .map(|(_, c)| c)
}

/// One line of `/proc/<pid>/mountinfo` (proc_pid_mountinfo(5)): mount ID, parent ID,
/// major:minor, root, mount point, options, optional fields, `-`, fstype, source, options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub major: u32,
    pub minor: u32,
    /// The folder of the file system shown at the mount point (a bind mount's or a cgroup
    /// hierarchy's; `/` for a whole file system).
    pub root: String,
    pub mount_point: String,
    pub fstype: String,
    pub source: String,
    /// The file system's own options (a cgroup v1 hierarchy's controllers are among them).
    pub super_options: String,
}

pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let dash = f.iter().position(|x| *x == "-")?;
            let (major, minor) = f.get(2)?.split_once(':')?;
            Some(Mount {
                major: major.parse().ok()?,
                minor: minor.parse().ok()?,
                root: unescape_mount(f.get(3)?),
                mount_point: unescape_mount(f.get(4)?),
                fstype: f.get(dash + 1)?.to_string(),
                source: f
                    .get(dash + 2)
                    .map(|s| unescape_mount(s))
                    .unwrap_or_default(),
                super_options: f.get(dash + 3).map(|s| s.to_string()).unwrap_or_default(),
            })
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as octal escapes (`\040`).
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = u32::from(b[i + 1] - b'0') * 64
                + u32::from(b[i + 2] - b'0') * 8
                + u32::from(b[i + 3] - b'0');
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount that holds `path`: the longest mount point that is a path prefix of it, the
/// last listed when mounts are stacked on the same point.
pub fn mount_for<'a>(mounts: &'a [Mount], path: &str) -> Option<&'a Mount> {
    let under = |m: &Mount| {
        let mp = m.mount_point.trim_end_matches('/');
        mp.is_empty() || path == mp || path.starts_with(&format!("{mp}/"))
    };
    let mut best: Option<&Mount> = None;
    for m in mounts.iter().filter(|m| under(m)) {
        if best.is_none_or(|b| m.mount_point.len() >= b.mount_point.len()) {
            best = Some(m);
        }
    }
    best
}

/// The /proc/diskstats device of a mount: by its device number, or, for filesystems that
/// report an anonymous number (major 0: btrfs, overlay), by the source's device name.
pub fn device_of_mount(diskstats: &str, mount: &Mount) -> Option<Device> {
    let all = parse_diskstats(diskstats);
    if let Some((d, _)) = all
        .iter()
        .find(|(d, _)| d.major == mount.major && d.minor == mount.minor)
    {
        return Some(d.clone());
    }
    let name = mount.source.strip_prefix("/dev/")?;
    let name = name.rsplit('/').next()?;
    all.into_iter()
        .find(|(d, _)| d.name == name)
        .map(|(d, _)| d)
}

pub fn parse_diskstats(text: &str) -> Vec<(Device, DiskCounters)> {
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
                    ms_doing_io: n(12)?,
                    weighted_ms: n(13)?,
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
    cache_control: crate::stats::dbstats::CacheControl,
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
        cache_control,
        major_minor: Some(format!("{}:{}", device.major, device.minor)),
        source: None,
        read_mib_per_s: (seconds > 0.0)
            .then(|| d(after.sectors_read, before.sectors_read) * 512.0 / 1048576.0 / seconds),
        await_ms: (reads + writes > 0.0).then(|| {
            (d(after.ms_reading, before.ms_reading) + d(after.ms_writing, before.ms_writing))
                / (reads + writes)
        }),
        // iostat: aqu-sz = delta(weighted ms) / elapsed ms.
        avg_queue_depth: (seconds > 0.0)
            .then(|| d(after.weighted_ms, before.weighted_ms) / (seconds * 1000.0)),
        // iostat: %util = delta(ms doing I/O) / elapsed ms.
        busy_pct: (seconds > 0.0).then(|| {
            (100.0 * d(after.ms_doing_io, before.ms_doing_io) / (seconds * 1000.0)).min(100.0)
        }),
        tables: Vec::new(),
    }
}

/// Writes dirty pages and drops the OS page cache (root only): `sync` then
/// `echo 3 > /proc/sys/vm/drop_caches`.
pub fn drop_page_cache() -> std::io::Result<()> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n")
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
                ms_doing_io: 153444,
                weighted_ms: 266497,
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
            crate::stats::dbstats::CacheControl::None,
        );
        assert_eq!(m.reads_per_s, 200.0);
        assert_eq!(m.read_kib_per_op, Some(8.0));
        assert_eq!(m.avg_read_wait_ms, Some(0.5));
        assert_eq!(m.avg_write_wait_ms, Some(2.0));
        assert_eq!(m.physical_read_ratio, Some(0.5));
        assert_eq!(m.major_minor.as_deref(), Some("253:0"));
        assert_eq!(
            device_metrics(
                &dev,
                Path::new("/"),
                before,
                before,
                1.0,
                Some(0.0),
                crate::stats::dbstats::CacheControl::None
            )
            .physical_read_ratio,
            None
        );
    }

    #[test]
    fn mountinfo_finds_the_longest_mount_and_its_device() {
        let info = "\
22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
40 22 7:3 / /mnt/pg\\040data rw,relatime - ext4 /dev/loop3 rw
41 22 0:45 / /var/lib/docker rw - btrfs /dev/vda1 rw
";
        let mounts = parse_mountinfo(info);
        assert_eq!(mounts.len(), 3);
        assert_eq!(mounts[1].mount_point, "/mnt/pg data");
        let m = mount_for(&mounts, "/mnt/pg data/base/5").unwrap();
        assert_eq!((m.major, m.minor), (7, 3));
        assert_eq!(mount_for(&mounts, "/mnt/pg datax").unwrap().major, 253);
        let stats = format!("{SAMPLE}   7       3 loop3 10 0 80 5 0 0 0 0 0 5 5\n");
        assert_eq!(device_of_mount(&stats, m).unwrap().name, "loop3");
        let btrfs = mount_for(&mounts, "/var/lib/docker/x").unwrap();
        assert_eq!(device_of_mount(&stats, btrfs).unwrap().name, "vda1");
    }

    #[test]
    fn this_hosts_root_has_a_device_or_none_without_error() {
        // Either a real device or a virtual filesystem; both must be handled.
        if let Some(d) = device_for_path(Path::new("/")) {
            assert!(read_counters(&d).is_some());
        }
    }
}
