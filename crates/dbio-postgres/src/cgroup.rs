//! A process's control groups: where the files of a controller are for that process, from its
//! `/proc/<pid>/cgroup` and the mounts of the cgroup file systems (mountinfo), and the limits
//! read there. Used for the memory controller (the server's memory cap, `host::memory_cap`);
//! the I/O controllers' limits (blkio, io) are found by `caps`, with a lookup of its own.
//!
//! `/proc/<pid>/cgroup` names the process's cgroup per hierarchy, relative to the root of the
//! reader's cgroup namespace (cgroups(7)): `ID:controllers:path` on v1, `0::path` on v2. A
//! mount of that hierarchy shows the folder `root` (mountinfo's 4th field) at its mount
//! point, so the process's folder is `mount point + (path - root)`. Inside a container
//! without a cgroup namespace (cgroup v1, podman and runc) the path is the host's
//! (`/libpod_parent/libpod-<id>`) and so is the mount's root, so the folder is the mount
//! point itself; with a namespace both are `/`. The same rule serves the server's view
//! (its /proc/self/cgroup and mountinfo read through the connection) and this host's.
//!
//! A limit set on an ancestor applies too, so every folder from the process's own up to the
//! mount's root is read and the lowest limit wins.

use std::path::PathBuf;

use dbio_core::stats::device::{self, Mount};

/// A cgroup hierarchy's version: v1 has one hierarchy per controller (or group of them),
/// v2 one for all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// One cgroup folder of a process, as a path in the mount namespace whose mountinfo was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupDir {
    pub version: Version,
    pub path: PathBuf,
}

impl CgroupDir {
    pub fn file(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }
}

/// The folders of the hierarchy that holds `controller` (`memory`, `io`, `blkio`) for the
/// process whose /proc/<pid>/cgroup is `proc_cgroup`, from its own folder up to the mount's
/// root: v2's first (where the v2 hierarchy is mounted), then v1's. Empty when neither
/// hierarchy is mounted where `mountinfo` says.
pub fn controller_dirs(controller: &str, proc_cgroup: &str, mountinfo: &str) -> Vec<CgroupDir> {
    let mounts = device::parse_mountinfo(mountinfo);
    // A controller is bound to one hierarchy: where a v1 hierarchy has it (systemd's hybrid
    // layout), the v2 one, mounted beside it, does not.
    let in_v1 = proc_cgroup.lines().any(|l| {
        let mut f = l.splitn(3, ':');
        f.next() != Some("0")
            && f.next()
                .is_some_and(|c| c.split(',').any(|c| c == controller))
    });
    let mut out = Vec::new();
    for line in proc_cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let (version, candidates): (Version, Vec<&Mount>) = if id == "0" && controllers.is_empty() {
            if in_v1 {
                continue;
            }
            let v2 = mounts.iter().filter(|m| m.fstype == "cgroup2").collect();
            (Version::V2, v2)
        } else if controllers.split(',').any(|c| c == controller) {
            let v1 = mounts
                .iter()
                .filter(|m| {
                    m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == controller)
                })
                .collect();
            (Version::V1, v1)
        } else {
            continue;
        };
        // The mount whose root holds the path most closely (several may show one hierarchy).
        let Some((mount, rest)) = candidates
            .iter()
            .filter_map(|m| within(path, &m.root).map(|rest| (*m, rest)))
            .max_by_key(|(m, _)| m.root.len())
        else {
            continue;
        };
        let top = PathBuf::from(&mount.mount_point);
        let mut dir = top.join(rest);
        loop {
            out.push(CgroupDir {
                version,
                path: dir.clone(),
            });
            if dir == top || !dir.pop() {
                break;
            }
        }
    }
    out.sort_by_key(|d| d.version == Version::V1);
    out
}

/// `path` below `root`, as a relative path ("" for the root itself); None when outside it.
fn within<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    let root = root.trim_end_matches('/');
    let rest = path.strip_prefix(root)?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return None;
    }
    Some(rest.trim_start_matches('/'))
}

/// The file that holds a memory limit in `dir`: memory.max (v2), memory.limit_in_bytes (v1).
pub fn memory_limit_file(dir: &CgroupDir) -> String {
    match dir.version {
        Version::V2 => dir.file("memory.max"),
        Version::V1 => dir.file("memory.limit_in_bytes"),
    }
}

/// A memory limit file's value in bytes; None for none (`max` on v2; v1 writes its own
/// largest value, 0x7FFFFFFFFFFFF000 on 4 kB pages, which the caller compares with the RAM).
pub fn parse_limit(text: &str) -> Option<u64> {
    let v = text.trim();
    if v == "max" {
        return None;
    }
    v.parse().ok()
}

/// A memory cap: the lowest limit found, and the file it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryCap {
    pub bytes: u64,
    pub file: String,
}

/// The lowest of the limits read (`(file, text)` of each file that could be read).
pub fn lowest_limit<'a>(read: impl IntoIterator<Item = (String, &'a str)>) -> Option<MemoryCap> {
    read.into_iter()
        .filter_map(|(file, text)| parse_limit(text).map(|bytes| MemoryCap { bytes, file }))
        .min_by_key(|c| c.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Seen from inside a podman 4.3 container (runc, cgroup v1, no cgroup namespace): the
    // path is the host's, and so is each mount's root.
    const CONTAINER_CGROUP: &str = "9:name=systemd:/libpod_parent/libpod-85\n\
        4:memory:/libpod_parent/libpod-85\n\
        1:cpu:/libpod_parent/libpod-85\n\
        0::/libpod_parent/libpod-85\n";
    const CONTAINER_MOUNTINFO: &str = "89 81 0:47 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755\n\
        90 89 0:29 /libpod_parent/libpod-85 /sys/fs/cgroup/cpu ro,nosuid - cgroup cgroup rw,cpu\n\
        93 89 0:32 /libpod_parent/libpod-85 /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n\
        99 78 254:0 /var/tmp/v/_data /var/lib/postgresql/data rw - ext4 /dev/vda rw\n";

    #[test]
    fn a_container_s_own_folder_is_the_mount_point() {
        let dirs = controller_dirs("memory", CONTAINER_CGROUP, CONTAINER_MOUNTINFO);
        assert_eq!(
            dirs,
            vec![CgroupDir {
                version: Version::V1,
                path: PathBuf::from("/sys/fs/cgroup/memory"),
            }]
        );
        assert_eq!(
            memory_limit_file(&dirs[0]),
            "/sys/fs/cgroup/memory/memory.limit_in_bytes"
        );
    }

    // This host's view (systemd's hybrid layout): a v1 memory hierarchy at its root, and
    // the v2 one (no controllers) at /sys/fs/cgroup/unified.
    #[test]
    fn the_host_s_view_walks_up_to_the_mount_s_root() {
        let cgroup = "4:memory:/process_api/62ed\n0::/process_api/62ed\n";
        let mountinfo = "35 30 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
            40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let dirs = controller_dirs("memory", cgroup, mountinfo);
        let paths: Vec<(Version, String)> = dirs
            .iter()
            .map(|d| (d.version, d.path.display().to_string()))
            .collect();
        // The memory controller is v1's here: the v2 hierarchy beside it has none.
        assert_eq!(
            paths,
            vec![
                (Version::V1, "/sys/fs/cgroup/memory/process_api/62ed".into()),
                (Version::V1, "/sys/fs/cgroup/memory/process_api".into()),
                (Version::V1, "/sys/fs/cgroup/memory".into()),
            ]
        );
        // A controller no v1 hierarchy has is looked for in v2.
        let io: Vec<String> = controller_dirs("io", cgroup, mountinfo)
            .iter()
            .map(|d| d.path.display().to_string())
            .collect();
        assert_eq!(
            io,
            [
                "/sys/fs/cgroup/unified/process_api/62ed",
                "/sys/fs/cgroup/unified/process_api",
                "/sys/fs/cgroup/unified"
            ]
        );
    }

    // A v2 container with its own cgroup namespace: `0::/` and a mount of root `/`.
    #[test]
    fn a_cgroup_namespace_shows_its_root() {
        let dirs = controller_dirs(
            "memory",
            "0::/\n",
            "30 25 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
        );
        assert_eq!(dirs.len(), 1);
        assert_eq!(memory_limit_file(&dirs[0]), "/sys/fs/cgroup/memory.max");
        // A path outside every mount's root (a mount of a sibling) gives no folder.
        assert!(
            controller_dirs(
                "memory",
                "4:memory:/a/b\n",
                "35 30 0:32 /c /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
            )
            .is_empty()
        );
        // /ab is not below /a.
        assert_eq!(within("/ab", "/a"), None);
        assert_eq!(within("/a/b", "/a"), Some("b"));
        assert_eq!(within("/a", "/"), Some("a"));
    }

    #[test]
    fn the_lowest_limit_wins_and_max_is_none() {
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("268435456\n"), Some(268435456));
        assert_eq!(parse_limit("garbage"), None);
        let cap = lowest_limit([
            (
                "a/memory.limit_in_bytes".to_string(),
                "9223372036854771712\n",
            ),
            ("b/memory.limit_in_bytes".to_string(), "268435456\n"),
            ("c/memory.max".to_string(), "max\n"),
        ]);
        assert_eq!(
            cap,
            Some(MemoryCap {
                bytes: 268435456,
                file: "b/memory.limit_in_bytes".into()
            })
        );
        assert_eq!(lowest_limit([("c/memory.max".to_string(), "max")]), None);
    }
}
