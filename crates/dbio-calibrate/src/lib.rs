//! dbio-calibrate: what the storage does without a database, the way Oracle's Orion measures
//! it. At each load level (outstanding I/Os), small random reads give IOPS and a latency
//! distribution, large random reads give MB/s. Every I/O is O_DIRECT, so the page cache never
//! answers. The psync engine keeps `level` I/Os outstanding with `level` threads doing
//! pread(2)/pwrite(2); the io_uring engine keeps them in flight from one thread.
//!
//! Writes never land in data that is not dbio's: `--create` makes a new file (never an
//! existing one) whose first block is dbio's mark, and only such a file takes writes unless
//! the user says `--destroy-data`. Any other file or device is measured read-only.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dbio_core::stats::{LatencySummary, encode_histogram, new_histogram};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CalibrateError {
    /// Bad usage: exit 2.
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
}

impl CalibrateError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CalibrateError::Usage(_) => 2,
            CalibrateError::Io { .. } => 1,
        }
    }
}

type Result<T> = std::result::Result<T, CalibrateError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// One thread per outstanding I/O, pread/pwrite.
    Psync,
    /// One thread keeping `level` I/Os in flight through io_uring.
    IoUring,
}

impl Engine {
    /// The spelling `--engine` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Psync => "psync",
            Engine::IoUring => "io_uring",
        }
    }
}

#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    pub path: PathBuf,
    /// Size to create, or the part of an existing file or device to use.
    pub size: Option<u64>,
    pub create: bool,
    pub block: u64,
    pub large: u64,
    pub levels: Vec<u32>,
    pub duration: Duration,
    /// Percent of the small I/Os that are writes.
    pub write_pct: u32,
    /// Allows writes to a block device or to a file dbio did not create, destroying its data.
    pub destroy_data: bool,
    pub engine: Engine,
    pub seed: u64,
}

/// One load level's measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub level: u32,
    pub small_iops: f64,
    pub small_latency_us: Option<LatencySummary>,
    /// HDR histogram of the small I/Os' latency in µs (V2 + deflate, base64).
    pub small_histogram: String,
    pub large_mbps: f64,
    pub large_latency_us: Option<LatencySummary>,
    pub large_histogram: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub format: u32,
    /// Always "calibrate".
    pub kind: String,
    pub path: String,
    pub device_kind: String,
    pub size_bytes: u64,
    pub block_bytes: u64,
    pub large_bytes: u64,
    pub engine: Engine,
    pub direct_io: bool,
    pub write_pct: u32,
    pub seconds_per_point: f64,
    pub points: Vec<Point>,
}

/// A buffer aligned for O_DIRECT (4096 bytes, the largest common logical block size).
struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

const ALIGN: usize = 4096;

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len.max(ALIGN), ALIGN)
            .unwrap_or_else(|_| std::process::abort());
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, len }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr points to `len` initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr points to `len` initialised bytes owned exclusively by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len.max(ALIGN), ALIGN)
            .unwrap_or_else(|_| std::process::abort());
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

// SAFETY: the buffer is plain memory owned by one thread at a time.
unsafe impl Send for AlignedBuf {}

fn io_err(path: &Path, e: std::io::Error) -> CalibrateError {
    CalibrateError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

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
fn open_direct(path: &Path, write: bool) -> Result<File> {
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
struct FileMark {
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
        let n = text.len().min(buf.len);
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
    fn read_direct(f: &File, path: &Path) -> Result<Option<FileMark>> {
        let mut buf = AlignedBuf::new(MARK_BYTES as usize);
        f.read_exact_at(buf.as_mut_slice(), 0)
            .map_err(|e| io_err(path, e))?;
        Ok(FileMark::parse(buf.as_slice()))
    }
}

/// What the path holds, and so what calibrate may do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
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
    fn base(self) -> u64 {
        match self {
            Target::New { .. } | Target::Own => MARK_BYTES,
            Target::Device | Target::Foreign => 0,
        }
    }
}

/// Decides what may be done with `o.path` without changing anything; every refusal is a
/// usage error that names the way out.
fn inspect(o: &CalibrateOptions) -> Result<Target> {
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

/// Checks the options and what the path holds, changing nothing (the CLI calls it before it
/// makes the result folder).
pub fn preflight(o: &CalibrateOptions) -> Result<()> {
    validate(o)?;
    inspect(o).map(|_| ())
}

/// Makes a new file (never an existing one: O_CREAT | O_EXCL) of `size` bytes: dbio's mark
/// in the first block, then real (not sparse, not zero) data, written with O_DIRECT.
/// Returns it open for reads and writes with O_DIRECT; a failed fill removes the file.
fn create_file(path: &Path, size: u64, seed: u64) -> Result<File> {
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
fn size_of(path: &Path, f: &File, is_block: bool) -> Result<u64> {
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

fn validate(o: &CalibrateOptions) -> Result<()> {
    for (name, v) in [("--block", o.block), ("--large", o.large)] {
        if v == 0 || v % ALIGN as u64 != 0 {
            return Err(CalibrateError::Usage(format!(
                "{name} must be a multiple of 4096 bytes (O_DIRECT alignment), not {v}"
            )));
        }
    }
    if o.levels.is_empty() || o.levels.iter().any(|l| *l == 0 || *l > 1024) {
        return Err(CalibrateError::Usage(
            "--levels must list load levels between 1 and 1024".into(),
        ));
    }
    if o.write_pct > 100 {
        return Err(CalibrateError::Usage(format!(
            "--write-pct {} is out of range; allowed 0..=100",
            o.write_pct
        )));
    }
    if o.duration < Duration::from_millis(100) {
        return Err(CalibrateError::Usage(
            "--duration must be at least 100ms".into(),
        ));
    }
    Ok(())
}

/// Measures every level; `progress` is told about each point as it starts.
pub fn calibrate(o: &CalibrateOptions, progress: &dyn Fn(&str)) -> Result<Calibration> {
    validate(o)?;
    let target = inspect(o)?;
    let writes = o.write_pct > 0;
    let f = match target {
        Target::New { size } => {
            progress(&format!(
                "writing {} MiB of data to the new file {}",
                size >> 20,
                o.path.display()
            ));
            create_file(&o.path, size, o.seed)?
        }
        Target::Own => {
            if o.create {
                progress(&format!(
                    "{} is a calibration file dbio created earlier: using it as it is",
                    o.path.display()
                ));
            }
            let f = open_direct(&o.path, writes)?;
            if writes && FileMark::read_direct(&f, &o.path)?.is_none() {
                return Err(CalibrateError::Usage(format!(
                    "{} changed while dbio opened it and is no longer a calibration file dbio created; nothing was written",
                    o.path.display()
                )));
            }
            f
        }
        Target::Device | Target::Foreign => open_direct(&o.path, writes)?,
    };
    let is_block = target == Target::Device;
    let full = size_of(&o.path, &f, is_block)?;
    let size = o.size.map(|s| s.min(full)).unwrap_or(full);
    let base = target.base();
    let region = size.saturating_sub(base);
    if region < o.large.max(o.block) * 16 {
        return Err(CalibrateError::Usage(format!(
            "{} holds {size} bytes: too small for {}-byte I/Os; use --size of at least {} bytes",
            o.path.display(),
            o.large,
            o.large * 16 + base
        )));
    }
    let mut points = Vec::new();
    for &level in &o.levels {
        progress(&format!(
            "level {level}: small {} KiB random I/O for {:?}",
            o.block >> 10,
            o.duration
        ));
        let region = Region { base, len: region };
        let run = |bytes: u64, write_pct: u32, seed: u64| match o.engine {
            Engine::Psync => measure(
                &f, &o.path, region, bytes, level, o.duration, write_pct, seed,
            ),
            Engine::IoUring => measure_uring(
                &f, &o.path, region, bytes, level, o.duration, write_pct, seed,
            ),
        };
        let small = run(o.block, o.write_pct, o.seed)?;
        progress(&format!(
            "level {level}: large {} KiB random reads for {:?}",
            o.large >> 10,
            o.duration
        ));
        let large = run(o.large, 0, o.seed ^ 0xA5A5)?;
        points.push(Point {
            level,
            small_iops: small.ops as f64 / small.seconds,
            small_latency_us: LatencySummary::from_histogram(&small.hist),
            small_histogram: encode_histogram(&small.hist),
            large_mbps: (large.ops * o.large) as f64 / large.seconds / (1 << 20) as f64,
            large_latency_us: LatencySummary::from_histogram(&large.hist),
            large_histogram: encode_histogram(&large.hist),
        });
    }
    Ok(Calibration {
        format: 1,
        kind: "calibrate".into(),
        path: o.path.display().to_string(),
        device_kind: if is_block {
            "block device".into()
        } else {
            "file".into()
        },
        size_bytes: size,
        block_bytes: o.block,
        large_bytes: o.large,
        engine: o.engine,
        direct_io: true,
        write_pct: o.write_pct,
        seconds_per_point: o.duration.as_secs_f64(),
        points,
    })
}

/// The bytes the I/Os may touch: `len` bytes from offset `base`.
#[derive(Debug, Clone, Copy)]
struct Region {
    base: u64,
    len: u64,
}

impl Region {
    /// A random offset of an I/O of `bytes`, aligned to `bytes` from the region's start.
    fn offset(self, rng: &mut SmallRng, bytes: u64) -> u64 {
        self.base + rng.random_range(0..self.len / bytes) * bytes
    }
}

struct Measured {
    ops: u64,
    seconds: f64,
    hist: Histogram<u64>,
}

/// `level` threads each keep one I/O of `bytes` at a random aligned offset outstanding.
#[allow(clippy::too_many_arguments)]
fn measure(
    f: &File,
    path: &Path,
    region: Region,
    bytes: u64,
    level: u32,
    duration: Duration,
    write_pct: u32,
    seed: u64,
) -> Result<Measured> {
    let start = Instant::now();
    let deadline = start + duration;
    let results: Vec<std::result::Result<(u64, Histogram<u64>), String>> =
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..level)
                .map(|t| {
                    s.spawn(move || {
                        let mut rng =
                            SmallRng::seed_from_u64(seed.wrapping_add(t as u64 * 0x9E37_79B9));
                        let mut buf = AlignedBuf::new(bytes as usize);
                        let mut hist = new_histogram();
                        let mut ops = 0u64;
                        while Instant::now() < deadline {
                            let off = region.offset(&mut rng, bytes);
                            let write = write_pct > 0 && rng.random_range(0..100u32) < write_pct;
                            let t0 = Instant::now();
                            let r = if write {
                                f.write_all_at(buf.as_slice(), off)
                            } else {
                                f.read_exact_at(buf.as_mut_slice(), off)
                            };
                            let us = t0.elapsed().as_micros() as u64;
                            r.map_err(|e| e.to_string())?;
                            hist.saturating_record(us.max(1));
                            ops += 1;
                        }
                        Ok((ops, hist))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("an I/O thread panicked".into()))
                })
                .collect()
        });
    let seconds = start.elapsed().as_secs_f64();
    let mut hist = new_histogram();
    let mut ops = 0;
    for r in results {
        let (n, h) = r.map_err(|message| CalibrateError::Io {
            path: path.to_path_buf(),
            message,
        })?;
        ops += n;
        let _ = hist.add(&h);
    }
    Ok(Measured { ops, seconds, hist })
}

/// One thread keeps `level` I/Os of `bytes` in flight with io_uring; each completion is
/// timed from its submission and replaced by a new I/O until the deadline.
#[allow(clippy::too_many_arguments)]
fn measure_uring(
    f: &File,
    path: &Path,
    region: Region,
    bytes: u64,
    level: u32,
    duration: Duration,
    write_pct: u32,
    seed: u64,
) -> Result<Measured> {
    use io_uring::{IoUring, opcode, types};
    use std::os::fd::AsRawFd;
    let err = |message: String| CalibrateError::Io {
        path: path.to_path_buf(),
        message,
    };
    let mut ring = IoUring::new(level.next_power_of_two().max(8)).map_err(|e| {
        err(format!(
            "io_uring is not available here ({e}); use --engine psync"
        ))
    })?;
    let fd = types::Fd(f.as_raw_fd());
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut bufs: Vec<AlignedBuf> = (0..level)
        .map(|_| AlignedBuf::new(bytes as usize))
        .collect();
    let mut started = vec![Instant::now(); level as usize];
    let mut hist = new_histogram();
    let mut ops = 0u64;
    let start = Instant::now();
    let deadline = start + duration;
    let mut in_flight = 0u32;
    let mut submit = |ring: &mut IoUring,
                      slot: usize,
                      bufs: &mut [AlignedBuf],
                      started: &mut [Instant]|
     -> Result<()> {
        let off = region.offset(&mut rng, bytes);
        let write = write_pct > 0 && rng.random_range(0..100u32) < write_pct;
        let buf = &mut bufs[slot];
        let entry = if write {
            opcode::Write::new(fd, buf.ptr, bytes as u32)
                .offset(off)
                .build()
        } else {
            opcode::Read::new(fd, buf.ptr, bytes as u32)
                .offset(off)
                .build()
        }
        .user_data(slot as u64);
        started[slot] = Instant::now();
        // SAFETY: the buffer lives in `bufs` until this I/O completes (the loop below waits
        // for every submitted I/O before `bufs` is dropped), and nothing else touches it.
        unsafe { ring.submission().push(&entry) }
            .map_err(|_| err("io_uring submission queue full".into()))
    };
    for slot in 0..level as usize {
        submit(&mut ring, slot, &mut bufs, &mut started)?;
        in_flight += 1;
    }
    while in_flight > 0 {
        ring.submit_and_wait(1)
            .map_err(|e| err(format!("io_uring: {e}")))?;
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (slot, res) in done {
            in_flight -= 1;
            let slot = slot as usize;
            if res < 0 {
                return Err(err(std::io::Error::from_raw_os_error(-res).to_string()));
            }
            if res as u64 != bytes {
                return Err(err(format!("short I/O: {res} of {bytes} bytes")));
            }
            hist.saturating_record((started[slot].elapsed().as_micros() as u64).max(1));
            ops += 1;
            if Instant::now() < deadline {
                submit(&mut ring, slot, &mut bufs, &mut started)?;
                in_flight += 1;
            }
        }
    }
    Ok(Measured {
        ops,
        seconds: start.elapsed().as_secs_f64(),
        hist,
    })
}

impl Calibration {
    /// Orion's summary lines.
    pub fn summary(&self) -> String {
        let mut o = format!(
            "dbio calibrate {} ({}, {} MiB used), engine {}, O_DIRECT, {:.1} s per point, small {} KiB{}, large {} KiB\n",
            self.path,
            self.device_kind,
            self.size_bytes >> 20,
            self.engine.as_str(),
            self.seconds_per_point,
            self.block_bytes >> 10,
            if self.write_pct > 0 {
                format!(" ({}% writes)", self.write_pct)
            } else {
                String::new()
            },
            self.large_bytes >> 10
        );
        if let Some(best) = self
            .points
            .iter()
            .max_by(|a, b| a.small_iops.total_cmp(&b.small_iops))
        {
            o.push_str(&format!(
                "Maximum Small IOPS={:.0} @ Small={}\n",
                best.small_iops, best.level
            ));
        }
        if let Some(min) = self
            .points
            .iter()
            .filter_map(|p| p.small_latency_us.map(|l| (p.level, l.mean)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
        {
            o.push_str(&format!(
                "Minimum Small Latency={:.2} us @ Small={}\n",
                min.1, min.0
            ));
        }
        if let Some(best) = self
            .points
            .iter()
            .max_by(|a, b| a.large_mbps.total_cmp(&b.large_mbps))
        {
            o.push_str(&format!(
                "Maximum Large MBPS={:.2} @ Large={}\n",
                best.large_mbps, best.level
            ));
        }
        o
    }

    pub fn iops_csv(&self) -> String {
        let mut o = String::from("level,small_iops\n");
        for p in &self.points {
            o.push_str(&format!("{},{:.1}\n", p.level, p.small_iops));
        }
        o
    }

    pub fn mbps_csv(&self) -> String {
        let mut o = String::from("level,large_mbps\n");
        for p in &self.points {
            o.push_str(&format!("{},{:.2}\n", p.level, p.large_mbps));
        }
        o
    }

    pub fn lat_csv(&self) -> String {
        let mut o = String::from(
            "level,small_p50_us,small_p90_us,small_p99_us,small_p999_us,small_mean_us\n",
        );
        for p in &self.points {
            if let Some(l) = p.small_latency_us {
                o.push_str(&format!(
                    "{},{},{},{},{},{:.1}\n",
                    p.level, l.p50, l.p90, l.p99, l.p999, l.mean
                ));
            }
        }
        o
    }

    /// The point measured at `level`, or the nearest level below it.
    pub fn at_level(&self, level: u32) -> Option<&Point> {
        self.points
            .iter()
            .filter(|p| p.level <= level)
            .max_by_key(|p| p.level)
    }

    pub fn read(path: &Path) -> std::result::Result<Calibration, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("calibration {}: cannot read it: {e}", path.display()))?;
        let c: Calibration = serde_json::from_str(&text).map_err(|e| {
            format!(
                "calibration {}: not a dbio calibrate.json ({e})",
                path.display()
            )
        })?;
        if c.kind != "calibrate" {
            return Err(format!(
                "calibration {}: not a dbio calibrate.json",
                path.display()
            ));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(path: PathBuf) -> CalibrateOptions {
        CalibrateOptions {
            path,
            size: Some(64 << 20),
            create: true,
            block: 8192,
            large: 1 << 20,
            levels: vec![1, 2],
            duration: Duration::from_millis(300),
            write_pct: 0,
            destroy_data: false,
            engine: Engine::Psync,
            seed: 1,
        }
    }

    #[test]
    fn both_engines_measure_a_file() {
        let base = std::env::var_os("CARGO_TARGET_TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/tmp"));
        let dir = tempfile::Builder::new()
            .prefix("dbio-cal-unit-")
            .tempdir_in(base)
            .unwrap();
        let mut o = opts(dir.path().join("f"));
        o.size = Some(32 << 20);
        for engine in [Engine::Psync, Engine::IoUring] {
            o.engine = engine;
            let c = match calibrate(&o, &|_| {}) {
                Ok(c) => c,
                Err(e)
                    if engine == Engine::IoUring
                        && e.to_string().contains("io_uring is not available") =>
                {
                    continue;
                }
                Err(e) => panic!("{engine:?}: {e}"),
            };
            o.create = false;
            for p in &c.points {
                assert!(
                    p.small_iops > 0.0 && p.large_mbps > 0.0,
                    "{engine:?}: {p:?}"
                );
            }
        }
    }

    #[test]
    fn bad_options_are_usage_errors() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path().join("f"));
        o.block = 1000;
        assert_eq!(calibrate(&o, &|_| {}).unwrap_err().exit_code(), 2);
        let mut o = opts(dir.path().join("f"));
        o.levels = vec![];
        assert!(
            calibrate(&o, &|_| {})
                .unwrap_err()
                .to_string()
                .contains("--levels")
        );
        let mut o = opts(dir.path().join("missing"));
        o.create = false;
        assert!(
            calibrate(&o, &|_| {})
                .unwrap_err()
                .to_string()
                .contains("--create")
        );
    }

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

    #[test]
    fn summary_lines_follow_orion() {
        let c = Calibration {
            format: 1,
            kind: "calibrate".into(),
            path: "/x".into(),
            device_kind: "file".into(),
            size_bytes: 1 << 30,
            block_bytes: 8192,
            large_bytes: 1 << 20,
            engine: Engine::Psync,
            direct_io: true,
            write_pct: 0,
            seconds_per_point: 1.0,
            points: vec![
                Point {
                    level: 1,
                    small_iops: 1000.0,
                    small_latency_us: Some(LatencySummary {
                        mean: 990.0,
                        ..LatencySummary::default()
                    }),
                    small_histogram: String::new(),
                    large_mbps: 100.0,
                    large_latency_us: None,
                    large_histogram: String::new(),
                },
                Point {
                    level: 2,
                    small_iops: 1800.0,
                    small_latency_us: Some(LatencySummary {
                        mean: 1100.0,
                        ..LatencySummary::default()
                    }),
                    small_histogram: String::new(),
                    large_mbps: 150.0,
                    large_latency_us: None,
                    large_histogram: String::new(),
                },
            ],
        };
        let s = c.summary();
        assert!(s.contains("Maximum Small IOPS=1800 @ Small=2"), "{s}");
        assert!(
            s.contains("Minimum Small Latency=990.00 us @ Small=1"),
            "{s}"
        );
        assert!(s.contains("Maximum Large MBPS=150.00 @ Large=2"), "{s}");
        assert_eq!(c.at_level(3).map(|p| p.level), Some(2));
        assert_eq!(c.at_level(0), None);
    }
}
