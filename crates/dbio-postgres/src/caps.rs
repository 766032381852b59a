//! The server's cgroup I/O limits on the device under the data set, and the cgroup's own I/O
//! over the window, read where the server runs (through the connection, or on this host for
//! a server proven to run here): the server's `/proc/<pid>/cgroup` names its cgroup, its
//! mountinfo where the hierarchy is mounted, and the hierarchy's files hold the limits.
//!
//! - cgroup v1, blkio controller (Documentation/admin-guide/cgroup-v1/blkio-controller.rst):
//!   `blkio.throttle.{read,write}_{iops,bps}_device` (`MAJ:MIN VALUE` lines),
//!   `blkio.throttle.io_serviced[_recursive]` (`MAJ:MIN Read N` ...).
//! - cgroup v2, io controller (Documentation/admin-guide/cgroup-v2.rst): `io.max`
//!   (`MAJ:MIN rbps=max wbps=max riops=400 wiops=max`), `io.stat` (`MAJ:MIN rbytes= wbytes=
//!   rios= wios= ...`), `io.pressure` (`some avg10=.. total=US`, `full ...`).
//!
//! Limits apply to a whole disk, not a partition (blkg_conf_prep refuses partitions), so a
//! partition's limits are looked up on its disk. The tightest limit over the cgroup and its
//! ancestors applies. A throttle holds I/Os before the device: the device's await does not
//! show the wait, the sessions' read latency does.

use dbio_core::limits::{IoCaps, IoLimit};
use dbio_core::stats::device::{Device, parse_diskstats};
use tokio_postgres::Client;

use crate::host::HostAccess;

/// One line of mountinfo, the fields cgroup lookup needs (proc_pid_mountinfo(5)).
#[derive(Debug, Clone, PartialEq, Eq)]
struct CgroupMount {
    /// The mount's root within its filesystem (field 4): a container's view of a subtree.
    root: String,
    mount_point: String,
    /// `cgroup` (v1) or `cgroup2`.
    fstype: String,
    /// Super options (v1: the controllers, `rw,blkio`).
    options: String,
}

fn cgroup_mounts(mountinfo: &str) -> Vec<CgroupMount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let dash = f.iter().position(|x| *x == "-")?;
            let fstype = *f.get(dash + 1)?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(CgroupMount {
                root: f.get(3)?.to_string(),
                mount_point: f.get(4)?.to_string(),
                fstype: fstype.to_string(),
                options: f.get(dash + 3).unwrap_or(&"").to_string(),
            })
        })
        .collect()
}

/// The server's cgroup in the blkio (v1) and unified (v2) hierarchies, from
/// /proc/<pid>/cgroup (`hierarchy-ID:controllers:path`; v2 is `0::path`).
fn parse_proc_cgroup(text: &str) -> (Option<String>, Option<String>) {
    let mut v1 = None;
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(ctl), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if ctl.is_empty() {
            v2 = Some(path.to_string());
        } else if ctl.split(',').any(|c| c == "blkio") {
            v1 = Some(path.to_string());
        }
    }
    (v1, v2)
}

/// The directory of cgroup `path` under a mount of its hierarchy, then each ancestor up to
/// the mount point; None when the mount does not show that cgroup (another subtree).
fn cgroup_dirs(mount: &CgroupMount, path: &str) -> Option<Vec<String>> {
    let root = mount.root.trim_end_matches('/');
    let rel = if root.is_empty() {
        path
    } else if path == root {
        ""
    } else {
        path.strip_prefix(&format!("{root}/"))
            .map(|_| &path[root.len()..])?
    };
    let mp = mount.mount_point.trim_end_matches('/');
    let mut dirs = Vec::new();
    let mut cur = rel.trim_end_matches('/').to_string();
    loop {
        dirs.push(format!("{mp}{cur}"));
        match cur.rfind('/') {
            Some(i) => cur.truncate(i),
            None => break,
        }
        if cur.is_empty() {
            dirs.push(mp.to_string());
            break;
        }
    }
    dirs.dedup();
    Some(dirs)
}

/// The whole disk of `device` (itself when it is one): the diskstats device of the same major
/// whose name is the partition's stem (`vda` of `vda1`, `nvme0n1` of `nvme0n1p2`; `loop1` is
/// not `loop10`'s).
fn whole_disk(diskstats: &str, device: &Device) -> Device {
    parse_diskstats(diskstats)
        .into_iter()
        .map(|(d, _)| d)
        .filter(|d| d.major == device.major && d.name != device.name)
        .filter(|d| {
            let Some(rest) = device.name.strip_prefix(&d.name) else {
                return false;
            };
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            if d.name.ends_with(|c: char| c.is_ascii_digit()) {
                rest.strip_prefix('p').is_some_and(digits)
            } else {
                digits(rest)
            }
        })
        .max_by_key(|d| d.name.len())
        .unwrap_or_else(|| device.clone())
}

/// `MAJ:MIN VALUE` lines (v1 throttle files): the value for `dev`.
fn v1_limit(text: &str, dev: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        (f.next()? == dev).then_some(())?;
        f.next()?.parse().ok()
    })
}

/// `MAJ:MIN Read N` lines (v1 io_serviced): (reads, writes) of `dev`.
fn v1_serviced(text: &str, dev: &str) -> Option<(u64, u64)> {
    let mut r = None;
    let mut w = None;
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 3 && f[0] == dev {
            match f[1] {
                "Read" => r = f[2].parse().ok(),
                "Write" => w = f[2].parse().ok(),
                _ => {}
            }
        }
    }
    Some((r?, w.unwrap_or(0)))
}

/// The `key=value` pairs of `dev`'s line in io.max or io.stat (v2); `max` is no limit.
fn v2_line(text: &str, dev: &str) -> Vec<(String, u64)> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(dev))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_string(), v.parse().ok()?))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `total=` µs of the `some` and `full` lines of io.pressure.
fn pressure_totals(text: &str) -> (Option<u64>, Option<u64>) {
    let total = |kind: &str| {
        text.lines()
            .find(|l| l.starts_with(kind))?
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("total="))?
            .parse()
            .ok()
    };
    (total("some "), total("full "))
}

/// Which hierarchy holds the server's I/O limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// Where the server's cgroup I/O files are, found before the window.
#[derive(Debug, Clone)]
pub struct CapsProbe {
    version: Version,
    /// As /proc/<pid>/cgroup names it.
    cgroup: String,
    /// The server's cgroup directory first, then its ancestors.
    dirs: Vec<String>,
    /// The whole disk the limits are keyed by (`MAJ:MIN`).
    device: String,
    source: String,
    limits: Vec<IoLimit>,
    notes: Vec<String>,
}

/// The cgroup's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CapCounters {
    read_ios: Option<u64>,
    write_ios: Option<u64>,
    pressure_some_us: Option<u64>,
    pressure_full_us: Option<u64>,
}

const V1_LIMITS: [(&str, &str); 4] = [
    ("read_iops", "blkio.throttle.read_iops_device"),
    ("write_iops", "blkio.throttle.write_iops_device"),
    ("read_bps", "blkio.throttle.read_bps_device"),
    ("write_bps", "blkio.throttle.write_bps_device"),
];

const V2_KEYS: [(&str, &str); 4] = [
    ("read_iops", "riops"),
    ("write_iops", "wiops"),
    ("read_bps", "rbps"),
    ("write_bps", "wbps"),
];

/// The cgroup relative path of a directory, for the report (`/bench` of
/// `/sys/fs/cgroup/blkio/bench`).
fn relative(dir: &str, mount_point: &str) -> String {
    let r = dir
        .strip_prefix(mount_point.trim_end_matches('/'))
        .unwrap_or(dir);
    if r.is_empty() { "/".into() } else { r.into() }
}

impl CapsProbe {
    /// Finds the server's cgroup and reads its I/O limits on `device` (the device under the
    /// data set): `pid` is a server process (the collector's backend), `access` where its
    /// files are read. Err: why the limits cannot be read.
    pub async fn find(
        client: &Client,
        access: &HostAccess,
        pid: i32,
        device: &Device,
    ) -> Result<CapsProbe, String> {
        let cgroup = access
            .read(client, &format!("/proc/{pid}/cgroup"))
            .await
            .map_err(|e| format!("the server's /proc/{pid}/cgroup could not be read: {e}"))?;
        let mountinfo = match access {
            HostAccess::Server => access.read(client, "/proc/self/mountinfo").await,
            HostAccess::Local { .. } => {
                access.read(client, &format!("/proc/{pid}/mountinfo")).await
            }
        }
        .map_err(|e| format!("the server's mountinfo could not be read: {e}"))?;
        let diskstats = access.read(client, "/proc/diskstats").await?;
        let disk = whole_disk(&diskstats, device);
        let dev = format!("{}:{}", disk.major, disk.minor);
        let mounts = cgroup_mounts(&mountinfo);
        let (v1, v2) = parse_proc_cgroup(&cgroup);
        let blkio = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "blkio"));
        let unified = mounts.iter().find(|m| m.fstype == "cgroup2");
        let (version, path, mount) = match (v1, blkio, v2, unified) {
            (Some(p), Some(m), _, _) => (Version::V1, p, m),
            (_, _, Some(p), Some(m)) => (Version::V2, p, m),
            (Some(p), None, _, _) | (_, _, Some(p), None) => {
                return Err(format!(
                    "the server is in cgroup {p}, but its mount namespace has no cgroup hierarchy with I/O \
                     limits mounted (a container without /sys/fs/cgroup): a limit set outside cannot be read \
                     from the server; a ramp's shape still shows one"
                ));
            }
            _ => {
                return Err(
                    "the server's /proc/<pid>/cgroup names no blkio or unified cgroup".into(),
                );
            }
        };
        let dirs = cgroup_dirs(mount, &path).ok_or_else(|| {
            format!(
                "the server's cgroup {path} is outside the hierarchy its namespace mounts at {} (root {})",
                mount.mount_point, mount.root
            )
        })?;
        let mut probe = CapsProbe {
            version,
            cgroup: path,
            dirs,
            device: dev,
            source: format!(
                "the server's /proc/{pid}/cgroup and its cgroup files under {}, {}",
                mount.mount_point,
                match access {
                    HostAccess::Server => "read through the connection (pg_read_file)".to_string(),
                    HostAccess::Local { .. } =>
                        "read on this host (server proven local)".to_string(),
                }
            ),
            limits: Vec::new(),
            notes: Vec::new(),
        };
        if disk != *device {
            probe.notes.push(format!(
                "the data is on partition {} ({}:{}); cgroup limits apply to its disk {} ({})",
                device.name, device.major, device.minor, disk.name, probe.device
            ));
        }
        probe
            .read_limits(client, access, &mount.mount_point)
            .await?;
        Ok(probe)
    }

    async fn read_limits(
        &mut self,
        client: &Client,
        access: &HostAccess,
        mount_point: &str,
    ) -> Result<(), String> {
        let own = self.dirs.first().cloned().unwrap_or_default();
        for dir in &self.dirs {
            let files: Vec<(&str, String)> = match self.version {
                Version::V1 => V1_LIMITS
                    .iter()
                    .map(|(k, f)| (*k, format!("{dir}/{f}")))
                    .collect(),
                Version::V2 => vec![("", format!("{dir}/io.max"))],
            };
            for (kind, file) in files {
                let text = match access.read(client, &file).await {
                    Ok(t) => t,
                    // cgroup v2's root has no io.max: no limit can be set there.
                    Err(e)
                        if e.contains("No such file")
                            && *dir == mount_point.trim_end_matches('/') =>
                    {
                        continue;
                    }
                    // The server's own cgroup decides: without its files the limits are unknown.
                    Err(e) if *dir == own => {
                        return Err(format!(
                            "the server's cgroup {} has limit files the server may not read ({file}: {e})",
                            self.cgroup
                        ));
                    }
                    Err(e) => {
                        self.notes.push(format!(
                            "the limits of the ancestor cgroup {} could not be read ({e}): a limit set there is not seen",
                            relative(dir, mount_point)
                        ));
                        continue;
                    }
                };
                let found: Vec<(&str, u64, &str)> = match self.version {
                    Version::V1 => v1_limit(&text, &self.device)
                        .filter(|v| *v > 0)
                        .map(|v| vec![(kind, v, file.rsplit('/').next().unwrap_or(""))])
                        .unwrap_or_default(),
                    Version::V2 => {
                        let pairs = v2_line(&text, &self.device);
                        V2_KEYS
                            .iter()
                            .filter_map(|(k, key)| {
                                pairs
                                    .iter()
                                    .find(|(p, _)| p == key)
                                    .map(|(_, v)| (*k, *v, "io.max"))
                            })
                            .collect()
                    }
                };
                for (kind, value, name) in found {
                    self.limits.push(IoLimit {
                        kind: kind.to_string(),
                        value,
                        file: name.to_string(),
                        cgroup: relative(dir, mount_point),
                    });
                }
            }
        }
        // The tightest of each kind applies.
        let mut tightest: Vec<IoLimit> = Vec::new();
        for l in std::mem::take(&mut self.limits) {
            match tightest.iter_mut().find(|t| t.kind == l.kind) {
                Some(t) if t.value <= l.value => {}
                Some(t) => *t = l,
                None => tightest.push(l),
            }
        }
        self.limits = tightest;
        Ok(())
    }

    /// The cgroup's own I/O counters on the device now (and its I/O pressure on v2).
    pub async fn counters(&self, client: &Client, access: &HostAccess) -> CapCounters {
        let Some(dir) = self.dirs.first() else {
            return CapCounters::default();
        };
        let mut c = CapCounters::default();
        match self.version {
            Version::V1 => {
                let mut text = access
                    .read(
                        client,
                        &format!("{dir}/blkio.throttle.io_serviced_recursive"),
                    )
                    .await;
                if text.is_err() {
                    text = access
                        .read(client, &format!("{dir}/blkio.throttle.io_serviced"))
                        .await;
                }
                if let Some((r, w)) = text.ok().and_then(|t| v1_serviced(&t, &self.device)) {
                    (c.read_ios, c.write_ios) = (Some(r), Some(w));
                }
            }
            Version::V2 => {
                if let Ok(t) = access.read(client, &format!("{dir}/io.stat")).await {
                    let pairs = v2_line(&t, &self.device);
                    let get = |k: &str| pairs.iter().find(|(p, _)| p == k).map(|(_, v)| *v);
                    // A cgroup that did no I/O on the device has no line: zero.
                    c.read_ios = Some(get("rios").unwrap_or(0));
                    c.write_ios = Some(get("wios").unwrap_or(0));
                }
                if let Ok(t) = access.read(client, &format!("{dir}/io.pressure")).await {
                    (c.pressure_some_us, c.pressure_full_us) = pressure_totals(&t);
                }
            }
        }
        c
    }

    /// The caps over a window of `seconds` between two readings of the counters.
    pub fn caps(&self, before: CapCounters, after: CapCounters, seconds: f64) -> IoCaps {
        let rate = |a: Option<u64>, b: Option<u64>| {
            let d = b?.checked_sub(a?)?;
            (seconds > 0.0).then(|| d as f64 / seconds)
        };
        let pct = |a: Option<u64>, b: Option<u64>| {
            let d = b?.checked_sub(a?)?;
            (seconds > 0.0).then(|| (100.0 * d as f64 / (seconds * 1e6)).min(100.0))
        };
        let mut notes = self.notes.clone();
        if self.version == Version::V1 {
            notes.push(
                "cgroup v1 throttles reads and direct writes; buffered writes are charged to the flusher, not the server"
                    .into(),
            );
        }
        IoCaps {
            source: self.source.clone(),
            cgroup_version: match self.version {
                Version::V1 => "v1".into(),
                Version::V2 => "v2".into(),
            },
            cgroup: self.cgroup.clone(),
            device: Some(self.device.clone()),
            limits: self.limits.clone(),
            read_ios_per_s: rate(before.read_ios, after.read_ios),
            write_ios_per_s: rate(before.write_ios, after.write_ios),
            pressure_some_pct: pct(before.pressure_some_us, after.pressure_some_us),
            pressure_full_pct: pct(before.pressure_full_us, after.pressure_full_us),
            notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
37 30 0:33 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
38 30 0:34 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 30 0:36 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn the_servers_cgroup_is_found_in_its_hierarchy() {
        let mounts = cgroup_mounts(MOUNTINFO);
        assert_eq!(mounts.len(), 3);
        let (v1, v2) = parse_proc_cgroup("7:blkio:/bench/pg\n4:memory:/x\n0::/user.slice\n");
        assert_eq!(v1.as_deref(), Some("/bench/pg"));
        assert_eq!(v2.as_deref(), Some("/user.slice"));
        let blkio = &mounts[0];
        assert_eq!(
            cgroup_dirs(blkio, "/bench/pg").unwrap(),
            vec![
                "/sys/fs/cgroup/blkio/bench/pg",
                "/sys/fs/cgroup/blkio/bench",
                "/sys/fs/cgroup/blkio"
            ]
        );
        assert_eq!(
            cgroup_dirs(blkio, "/").unwrap(),
            vec!["/sys/fs/cgroup/blkio"]
        );
        // A container's mount of its own subtree.
        let sub = CgroupMount {
            root: "/docker/abc".into(),
            mount_point: "/sys/fs/cgroup".into(),
            fstype: "cgroup2".into(),
            options: "rw".into(),
        };
        assert_eq!(
            cgroup_dirs(&sub, "/docker/abc/pg").unwrap(),
            vec!["/sys/fs/cgroup/pg", "/sys/fs/cgroup"]
        );
        assert_eq!(cgroup_dirs(&sub, "/other"), None);
    }

    #[test]
    fn limits_and_counters_parse() {
        assert_eq!(v1_limit("7:0 400\n8:0 1000\n", "7:0"), Some(400));
        assert_eq!(v1_limit("8:0 1000\n", "7:0"), None);
        let serviced = "7:0 Read 4888\n7:0 Write 12\n7:0 Sync 4888\n7:0 Total 4900\nTotal 4900\n";
        assert_eq!(v1_serviced(serviced, "7:0"), Some((4888, 12)));
        let max = "259:0 rbps=max wbps=max riops=400 wiops=max\n";
        assert_eq!(v2_line(max, "259:0"), vec![("riops".to_string(), 400)]);
        let stat = "259:0 rbytes=8192 wbytes=0 rios=2 wios=0 dbytes=0 dios=0\n";
        assert_eq!(
            v2_line(stat, "259:0")
                .iter()
                .find(|(k, _)| k == "rios")
                .map(|(_, v)| *v),
            Some(2)
        );
        let pressure = "some avg10=1.00 avg60=0.50 avg300=0.10 total=2000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=500000\n";
        assert_eq!(pressure_totals(pressure), (Some(2_000_000), Some(500_000)));
    }

    #[test]
    fn a_partitions_limits_are_its_disks() {
        let stats = "\
 259 0 nvme0n1 1 0 0 0 0 0 0 0 0 0 0
 259 1 nvme0n1p1 1 0 0 0 0 0 0 0 0 0 0
   8 0 sda 1 0 0 0 0 0 0 0 0 0 0
   8 1 sda1 1 0 0 0 0 0 0 0 0 0 0
   7 1 loop1 1 0 0 0 0 0 0 0 0 0 0
   7 10 loop10 1 0 0 0 0 0 0 0 0 0 0
";
        let dev = |name: &str, major, minor| Device {
            name: name.into(),
            major,
            minor,
        };
        assert_eq!(whole_disk(stats, &dev("nvme0n1p1", 259, 1)).name, "nvme0n1");
        assert_eq!(whole_disk(stats, &dev("sda1", 8, 1)).name, "sda");
        assert_eq!(whole_disk(stats, &dev("loop10", 7, 10)).name, "loop10");
        assert_eq!(whole_disk(stats, &dev("sda", 8, 0)).name, "sda");
    }

    #[test]
    fn the_window_s_rates_and_pressure() {
        let probe = CapsProbe {
            version: Version::V2,
            cgroup: "/bench".into(),
            dirs: vec!["/sys/fs/cgroup/bench".into()],
            device: "7:0".into(),
            source: "t".into(),
            limits: vec![],
            notes: vec![],
        };
        let a = CapCounters {
            read_ios: Some(100),
            write_ios: Some(0),
            pressure_some_us: Some(0),
            pressure_full_us: Some(0),
        };
        let b = CapCounters {
            read_ios: Some(4100),
            write_ios: Some(10),
            pressure_some_us: Some(9_000_000),
            pressure_full_us: Some(1_000_000),
        };
        let c = probe.caps(a, b, 10.0);
        assert_eq!(c.read_ios_per_s, Some(400.0));
        assert_eq!(c.pressure_some_pct, Some(90.0));
        assert_eq!(c.pressure_full_pct, Some(10.0));
        assert_eq!(c.cgroup_version, "v2");
    }
}
