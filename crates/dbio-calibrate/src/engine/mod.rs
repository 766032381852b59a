//! The two I/O engines and what they share: O_DIRECT-aligned buffers, the region the I/Os
//! may touch, and what one measurement returns.

mod psync;
mod uring;

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;
use rand::RngExt;
use rand::rngs::SmallRng;

use crate::{Engine, Result};

/// O_DIRECT alignment of buffers, offsets and sizes: 4096 bytes, the largest common logical
/// block size.
pub(crate) const ALIGN: usize = 4096;

/// A buffer aligned for O_DIRECT (4096 bytes, the largest common logical block size).
pub(crate) struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

impl AlignedBuf {
    pub(crate) fn new(len: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len.max(ALIGN), ALIGN)
            .unwrap_or_else(|_| std::process::abort());
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, len }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr points to `len` initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
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

/// The bytes the I/Os may touch: `len` bytes from offset `base`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Region {
    pub(crate) base: u64,
    pub(crate) len: u64,
}

impl Region {
    /// A random offset of an I/O of `bytes`, aligned to `bytes` from the region's start.
    fn offset(self, rng: &mut SmallRng, bytes: u64) -> u64 {
        self.base + rng.random_range(0..self.len / bytes) * bytes
    }
}

pub(crate) struct Measured {
    pub(crate) ops: u64,
    pub(crate) seconds: f64,
    pub(crate) hist: Histogram<u64>,
}

/// What one measurement asks for: `level` outstanding I/Os of `bytes` at random aligned
/// offsets in `region` for `duration`, `write_pct` percent of them writes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    pub(crate) region: Region,
    pub(crate) bytes: u64,
    pub(crate) level: u32,
    pub(crate) duration: Duration,
    pub(crate) write_pct: u32,
    pub(crate) seed: u64,
}

/// Asked to stop (Ctrl-C): checked between I/Os, so a measurement ends within one I/O.
pub(crate) type Stop<'a> = &'a (dyn Fn() -> bool + Sync);

/// Measures `load` on `f` with `engine`; ends early when `stop` says so (the caller drops
/// that measurement: it did not last its duration).
pub(crate) fn measure(
    engine: Engine,
    f: &File,
    path: &Path,
    load: Load,
    stop: Stop<'_>,
) -> Result<Measured> {
    match engine {
        Engine::Psync => psync::measure(f, path, load, stop),
        Engine::IoUring => uring::measure(f, path, load, stop),
    }
}
