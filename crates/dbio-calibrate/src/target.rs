//! The path calibrate measures: what it holds (a new file, a file dbio created, a device, or
//! someone else's file) and so what may be done with it; dbio's mark in the files it creates;
//! opening with O_DIRECT; making and filling a new file.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
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

/// Opens with O_DIRECT; a filesystem without it gets a clear usage error.
pub(crate) fn open_direct(path: &Path, write: bool) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::EINVAL) {
                no_direct(path)
            } else {
                io_err(path, e)
            }
        })
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
