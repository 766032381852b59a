//! The path calibrate measures: what it holds (a new file, a file dbio created, a device, or
//! someone else's file) and so what may be done with it; dbio's mark in the files it creates;
//! opening with O_DIRECT; making and filling a new file.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::engine::{ALIGN, AlignedBuf};
use crate::{CalibrateError, CalibrateOptions, Result, io_err};

/// Refuses memory filesystems: tmpfs accepts O_DIRECT since Linux 6.6, but what it measures
/// is memory, not a device (statfs f_type TMPFS_MAGIC / RAMFS_MAGIC).
fn refuse_memory_fs(path: &Path) -> Result<()> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let probe = if path.exists() {
        path.to_path_buf()
    } else {
        path.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf()
    };
    let Ok(c_path) = std::ffi::CString::new(probe.as_os_str().as_encoded_bytes()) else {
        return Ok(());
    };
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: statfs writes a full struct into the pointer for a NUL-terminated path.
    let rc = unsafe { libc::statfs(c_path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Ok(());
    }
    // SAFETY: statfs returned 0, so the struct is initialised.
    // f_type is i64 on x86_64 glibc but a narrower type elsewhere; the cast is for them.
    #[allow(clippy::unnecessary_cast)]
    let f_type = unsafe { st.assume_init() }.f_type as i64;
    if f_type == TMPFS_MAGIC || f_type == RAMFS_MAGIC {
        return Err(CalibrateError::Usage(format!(
            "{} is on a memory filesystem (tmpfs/ramfs), which has no O_DIRECT device behind it: calibration measures storage; use a file on the disk you want to measure",
            path.display()
        )));
    }
    Ok(())
}

/// Opens with O_DIRECT; a filesystem without it gets a clear usage error. A block device is
/// opened with O_EXCL as mkfs does: the kernel refuses it (EBUSY) while a file system, swap,
/// device mapper or MD holds it, and nothing can mount or claim it while dbio measures.
pub(crate) fn open_direct(path: &Path, write: bool, device: bool) -> Result<File> {
    let flags = libc::O_DIRECT | if device { libc::O_EXCL } else { 0 };
    OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) => no_direct(path),
            Some(libc::EBUSY) if device => in_use(
                path,
                "the kernel reports it busy (held by a file system, swap, device mapper or MD)",
            ),
            _ => io_err(path, e),
        })
}

fn in_use(path: &Path, why: &str) -> CalibrateError {
    CalibrateError::Usage(format!(
        "{} is in use: {why}; dbio never measures a device in use, whatever the flags (as mkfs refuses it). \
         Unmount it, swapoff it or remove it from its volume group or array first, or measure a file on its file system (--create --size)",
        path.display()
    ))
}

/// The block devices `dev` stands for: itself and its partitions, as sysfs lists them
/// (/sys/dev/block/MAJ:MIN and its subfolders that hold a `partition` file); each with its
/// kernel name and device number.
fn device_and_partitions(dev: u64) -> Vec<(String, u64)> {
    let sys = std::path::PathBuf::from(format!(
        "/sys/dev/block/{}:{}",
        libc::major(dev),
        libc::minor(dev)
    ));
    let name = std::fs::canonicalize(&sys)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let mut out = vec![(name, dev)];
    for entry in std::fs::read_dir(&sys).into_iter().flatten().flatten() {
        let p = entry.path();
        if !p.join("partition").is_file() {
            continue;
        }
        let Some((maj, min)) = std::fs::read_to_string(p.join("dev")).ok().and_then(|d| {
            d.trim()
                .split_once(':')
                .map(|(a, b)| (a.to_string(), b.to_string()))
        }) else {
            continue;
        };
        if let (Ok(maj), Ok(min)) = (maj.parse(), min.parse()) {
            out.push((
                entry.file_name().to_string_lossy().into_owned(),
                libc::makedev(maj, min),
            ));
        }
    }
    out
}

/// The device number of a path that is a block device.
fn rdev_of(path: &str) -> Option<u64> {
    let m = std::fs::metadata(path).ok()?;
    m.file_type().is_block_device().then(|| m.rdev())
}

/// Refuses a block device that is mounted or holds a mounted partition (/proc/self/mountinfo:
/// the device number, and the source device), is swap (/proc/swaps), has holders (an LVM
/// physical volume, an MD member, dm-crypt: /sys/block/*/holders), or that the kernel will not
/// give dbio exclusively (an O_EXCL open, as mkfs does).
fn refuse_device_in_use(path: &Path, dev: u64) -> Result<()> {
    let devices = device_and_partitions(dev);
    let ours = |d: u64| {
        devices
            .iter()
            .find(|(_, n)| *n == d)
            .map(|(name, _)| name.clone())
    };
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let point = fields.get(4).copied().unwrap_or("?");
        let by_number = fields
            .get(2)
            .and_then(|mm| mm.split_once(':'))
            .and_then(|(a, b)| Some(libc::makedev(a.parse().ok()?, b.parse().ok()?)));
        // The source follows the " - " separator: fstype, then source.
        let source = fields
            .iter()
            .position(|f| *f == "-")
            .and_then(|i| fields.get(i + 2))
            .and_then(|s| rdev_of(s));
        if let Some(name) = by_number.and_then(ours).or_else(|| source.and_then(ours)) {
            return Err(in_use(path, &format!("{name} is mounted on {point}")));
        }
    }
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    for line in swaps.lines().skip(1) {
        let Some(file) = line.split_whitespace().next() else {
            continue;
        };
        if let Some(name) = rdev_of(file).and_then(ours) {
            return Err(in_use(path, &format!("{name} is a swap device")));
        }
    }
    for (name, d) in &devices {
        let holders = format!(
            "/sys/dev/block/{}:{}/holders",
            libc::major(*d),
            libc::minor(*d)
        );
        let held: Vec<String> = std::fs::read_dir(&holders)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if !held.is_empty() {
            return Err(in_use(
                path,
                &format!(
                    "{name} is held by {} (an LVM volume, an MD array or another device mapper target)",
                    held.join(", ")
                ),
            ));
        }
    }
    // What the files above cannot show (a mount in another mount namespace, a claim by a
    // driver): the kernel's own exclusive claim. Closed at once; the measurement reopens so.
    open_direct(path, false, true).map(drop)
}

fn no_direct(path: &Path) -> CalibrateError {
    CalibrateError::Usage(format!(
        "{} does not support O_DIRECT (tmpfs or another memory filesystem?): calibration must bypass the page cache; use a file on the disk you want to measure",
        path.display()
    ))
}

/// The first block of a file that `--create` made: this line, then one JSON line
/// ([`FileMark`]), then zeros. A user's file does not start so by accident, and the I/Os never
/// touch this block, so the mark stays for as long as the file does.
const MARK_MAGIC: &[u8] = b"dbio calibration file: created by `dbio calibrate --create`; measured I/O may overwrite everything after this block\n";
const MARK_KIND: &str = "dbio-calibration-file";
const MARK_BYTES: u64 = ALIGN as u64;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FileMark {
    /// Always [`MARK_KIND`].
    kind: String,
    format: u32,
    size_bytes: u64,
    created_at: String,
    dbio_version: String,
}

impl FileMark {
    fn block(size_bytes: u64) -> AlignedBuf {
        let mark = FileMark {
            kind: MARK_KIND.into(),
            format: 1,
            size_bytes,
            created_at: chrono::Utc::now().to_rfc3339(),
            dbio_version: env!("CARGO_PKG_VERSION").into(),
        };
        let mut text = MARK_MAGIC.to_vec();
        text.extend(serde_json::to_vec(&mark).unwrap_or_default());
        text.push(b'\n');
        let mut buf = AlignedBuf::new(MARK_BYTES as usize);
        let n = text.len().min(buf.as_slice().len());
        buf.as_mut_slice()[..n].copy_from_slice(&text[..n]);
        buf
    }

    /// The mark in a file's first block, if it is one.
    fn parse(block: &[u8]) -> Option<FileMark> {
        let rest = block.strip_prefix(MARK_MAGIC)?;
        let line = &rest[..rest.iter().position(|&b| b == b'\n')?];
        let mark: FileMark = serde_json::from_slice(line).ok()?;
        (mark.kind == MARK_KIND).then_some(mark)
    }

    /// Reads the mark of the file at `path` (a plain read of its first block).
    fn read(path: &Path) -> Result<Option<FileMark>> {
        let f = File::open(path).map_err(|e| io_err(path, e))?;
        let mut block = vec![0u8; MARK_BYTES as usize];
        let mut n = 0;
        while n < block.len() {
            match f.read_at(&mut block[n..], n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) => return Err(io_err(path, e)),
            }
        }
        Ok(FileMark::parse(&block[..n]))
    }

    /// Reads the mark through the descriptor the measurement uses (O_DIRECT), so the file
    /// that takes the writes is the one that was checked.
    pub(crate) fn read_direct(f: &File, path: &Path) -> Result<Option<FileMark>> {
        let mut buf = AlignedBuf::new(MARK_BYTES as usize);
        f.read_exact_at(buf.as_mut_slice(), 0)
            .map_err(|e| io_err(path, e))?;
        Ok(FileMark::parse(buf.as_slice()))
    }
}

/// What the path holds, and so what calibrate may do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Nothing there yet: `--create` makes dbio's own file of this many bytes.
    New { size: u64 },
    /// A file `--create` made earlier (its first block is dbio's mark): used as it is, and it
    /// may take writes.
    Own,
    /// A block device: read-only unless --destroy-data.
    Device,
    /// Any other regular file: read-only unless --destroy-data.
    Foreign,
}

impl Target {
    /// Where the measured I/Os start: after the mark in dbio's own files.
    pub(crate) fn base(self) -> u64 {
        match self {
            Target::New { .. } | Target::Own => MARK_BYTES,
            Target::Device | Target::Foreign => 0,
        }
    }
}

/// Decides what may be done with `o.path` without changing anything; every refusal is a
/// usage error that names the way out.
pub(crate) fn inspect(o: &CalibrateOptions) -> Result<Target> {
    let path = &o.path;
    let writes = o.write_pct > 0;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !o.create {
                return Err(CalibrateError::Usage(format!(
                    "{} does not exist; add --create --size SIZE to make a file there",
                    path.display()
                )));
            }
            let size = o.size.ok_or_else(|| {
                CalibrateError::Usage("--create needs --size (how big a file to write)".into())
            })?;
            refuse_memory_fs(path)?;
            return Ok(Target::New { size });
        }
        Err(e) => return Err(io_err(path, e)),
    };
    if meta.file_type().is_block_device() {
        if o.create {
            return Err(CalibrateError::Usage(
                "--create makes a file; a block device already exists".into(),
            ));
        }
        // Before any flag is looked at: no flag makes a device in use fair game.
        refuse_device_in_use(path, meta.rdev())?;
        if writes && !o.destroy_data {
            return Err(CalibrateError::Usage(format!(
                "{} is a block device: writes would destroy its data; add --destroy-data if that is what you want, or measure it read-only with --write-pct 0",
                path.display()
            )));
        }
        return Ok(Target::Device);
    }
    if !meta.is_file() {
        return Err(CalibrateError::Usage(format!(
            "{} is neither a regular file nor a block device; give a file (new with --create --size) or a device",
            path.display()
        )));
    }
    refuse_memory_fs(path)?;
    if let Some(mark) = FileMark::read(path)? {
        if o.create
            && let Some(size) = o.size
            && size > meta.len()
        {
            return Err(CalibrateError::Usage(format!(
                "{} is a calibration file dbio created earlier ({} bytes, on {}), smaller than --size {size}; --create never refills a file: remove it to make a bigger one, or leave out --size to use it as it is",
                path.display(),
                meta.len(),
                mark.created_at
            )));
        }
        return Ok(Target::Own);
    }
    if o.create {
        return Err(CalibrateError::Usage(format!(
            "{} already exists and is not a calibration file dbio created: --create never replaces a file; choose a new path, or leave out --create to measure this file read-only (--write-pct 0)",
            path.display()
        )));
    }
    if writes && !o.destroy_data {
        return Err(CalibrateError::Usage(format!(
            "{} is not a calibration file dbio created: writes would damage its content; measure it read-only (--write-pct 0), make a new file with --create --size, or add --destroy-data if its content may be destroyed",
            path.display()
        )));
    }
    Ok(Target::Foreign)
}

/// Makes a new file (never an existing one: O_CREAT | O_EXCL) of `size` bytes: dbio's mark
/// in the first block, then real (not sparse, not zero) data, written with O_DIRECT.
/// Returns it open for reads and writes with O_DIRECT; a failed fill removes the file.
pub(crate) fn create_file(path: &Path, size: u64, seed: u64) -> Result<File> {
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
    }
    // Created plainly, then switched to O_DIRECT: O_DIRECT with O_CREAT fails on some
    // filesystems, and reopening by name would let the name be swapped in between.
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                CalibrateError::Usage(format!(
                    "{} appeared while dbio was about to create it; --create never replaces a file: choose a new path",
                    path.display()
                ))
            } else {
                io_err(path, e)
            }
        })?;
    let filled = set_direct(&f, path).and_then(|()| fill(&f, path, size, seed));
    if let Err(e) = filled {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(f)
}

/// Turns O_DIRECT on for an open file (fcntl F_SETFL; Linux allows it).
fn set_direct(f: &File, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor this File owns; F_GETFL/F_SETFL take and return ints.
    let rc = unsafe {
        let flags = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        if flags < 0 {
            flags
        } else {
            libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags | libc::O_DIRECT)
        }
    };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL) {
            return Err(no_direct(path));
        }
        return Err(io_err(path, e));
    }
    Ok(())
}

/// The mark, then data up to `size` (rounded up to 4096 bytes), then fsync.
fn fill(f: &File, path: &Path, size: u64, seed: u64) -> Result<()> {
    let size = size.div_ceil(ALIGN as u64) * ALIGN as u64;
    let direct_err = |e: std::io::Error| {
        if e.raw_os_error() == Some(libc::EINVAL) {
            no_direct(path)
        } else {
            io_err(path, e)
        }
    };
    f.write_all_at(FileMark::block(size).as_slice(), 0)
        .map_err(direct_err)?;
    let chunk = 1u64 << 20;
    let mut buf = AlignedBuf::new(chunk as usize);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut off = MARK_BYTES;
    while off < size {
        let n = chunk.min(size - off) as usize;
        rng.fill(&mut buf.as_mut_slice()[..n]);
        f.write_all_at(&buf.as_slice()[..n], off)
            .map_err(direct_err)?;
        off += n as u64;
    }
    f.sync_all().map_err(|e| io_err(path, e))
}

/// Size of a block device (BLKGETSIZE64) or a file.
pub(crate) fn size_of(path: &Path, f: &File, is_block: bool) -> Result<u64> {
    if is_block {
        let mut bytes: u64 = 0;
        // BLKGETSIZE64 = _IOR(0x12, 114, size_t)
        const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
        use std::os::fd::AsRawFd;
        // SAFETY: the ioctl writes one u64 into `bytes`.
        let rc = unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut bytes) };
        if rc != 0 {
            return Err(io_err(path, std::io::Error::last_os_error()));
        }
        Ok(bytes)
    } else {
        Ok(f.metadata().map_err(|e| io_err(path, e))?.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_mark_is_dbio_s() {
        let block = FileMark::block(1 << 20);
        let mark = FileMark::parse(block.as_slice()).expect("a mark");
        assert_eq!((mark.kind.as_str(), mark.size_bytes), (MARK_KIND, 1 << 20));
        // The magic line alone, another kind, or a file that merely starts alike is not.
        assert_eq!(FileMark::parse(MARK_MAGIC), None);
        let mut other = MARK_MAGIC.to_vec();
        other
            .extend(br#"{"kind":"x","format":1,"size_bytes":1,"created_at":"","dbio_version":""}"#);
        other.push(b'\n');
        assert_eq!(FileMark::parse(&other), None);
        assert_eq!(FileMark::parse(b"dbio calibration file\n{}\n"), None);
        assert_eq!(FileMark::parse(&[0u8; 4096]), None);
    }
}
