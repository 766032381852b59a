//! The io_uring engine: one thread keeps `level` I/Os in flight through one ring, as fio's
//! io_uring engine at iodepth `level`.
//!
//! Every I/O is O_DIRECT, so the kernel reads into (or writes from) the buffer itself while
//! the request is in flight: the buffer's pages are pinned for the device's DMA, not copied.
//! Freeing such a buffer hands memory that a device is still writing to back to the
//! allocator. So no path out of [`measure`] frees a buffer whose request has not completed:
//! after the first error (a failed submission, a negative completion, a short transfer) no
//! new I/O is started and every request already in flight is waited for; if the ring itself
//! can no longer be waited on, the buffers still in flight are leaked rather than freed.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use dbio_core::stats::new_histogram;
use io_uring::{IoUring, opcode, types};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::{AlignedBuf, Load, Measured, Stop};
use crate::{CalibrateError, Result};

/// One thread keeps `load.level` I/Os in flight with io_uring; each completion is timed from
/// its submission and replaced by a new I/O until the deadline.
pub(super) fn measure(f: &File, path: &Path, load: Load, stop: Stop<'_>) -> Result<Measured> {
    let mut ring =
        IoUring::new(load.level.next_power_of_two().max(8)).map_err(|e| CalibrateError::Io {
            path: path.to_path_buf(),
            message: format!("io_uring is not available here ({e}); use --engine psync"),
        })?;
    let (measured, _drained) = run(&mut ring, f, load, stop);
    measured.map_err(|message| CalibrateError::Io {
        path: path.to_path_buf(),
        message,
    })
}

/// How the requests of one measurement ended: every submitted request was completed (the
/// buffers were freed after the last completion), or `in_flight` requests could not be
/// waited for and their buffers were leaked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Drained {
    submitted: u64,
    completed: u64,
    leaked: usize,
}

/// The buffer and the state of each slot's request. Dropping it never frees a buffer whose
/// request may still be in flight.
struct Slots {
    bufs: Vec<AlignedBuf>,
    started: Vec<Instant>,
    offsets: Vec<u64>,
    in_flight: Vec<bool>,
    submitted: u64,
    completed: u64,
}

impl Slots {
    fn new(level: usize, bytes: u64) -> Slots {
        Slots {
            bufs: (0..level)
                .map(|_| AlignedBuf::new(bytes as usize))
                .collect(),
            started: vec![Instant::now(); level],
            offsets: vec![0; level],
            in_flight: vec![false; level],
            submitted: 0,
            completed: 0,
        }
    }

    fn any_in_flight(&self) -> bool {
        self.in_flight.iter().any(|&b| b)
    }

    /// Frees the buffers if no request is in flight, else leaks those that are; says which.
    fn release(mut self) -> Drained {
        let leaked = self.leak_in_flight();
        Drained {
            submitted: self.submitted,
            completed: self.completed,
            leaked,
        }
    }

    fn leak_in_flight(&mut self) -> usize {
        let mut leaked = 0;
        for (slot, buf) in std::mem::take(&mut self.bufs).into_iter().enumerate() {
            if self.in_flight[slot] {
                // The kernel may still write into it: memory lost is better than memory
                // overwritten after it was reused.
                std::mem::forget(buf);
                leaked += 1;
            }
        }
        leaked
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        self.leak_in_flight();
    }
}

/// The measurement proper, on a ring the caller made. Returns the measurement or the first
/// error, and how the requests ended (for tests: `completed == submitted` proves the drain).
fn run(
    ring: &mut IoUring,
    f: &File,
    load: Load,
    stop: Stop<'_>,
) -> (std::result::Result<Measured, String>, Drained) {
    let Load {
        region,
        bytes,
        level,
        duration,
        write_pct,
        seed,
    } = load;
    let fd = types::Fd(f.as_raw_fd());
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut slots = Slots::new(level as usize, bytes);
    let mut hist = new_histogram();
    let mut ops = 0u64;
    let start = Instant::now();
    let deadline = start + duration;
    // The first error; once set, no new I/O starts and the loop only drains.
    let mut failure: Option<String> = None;

    let mut submit =
        |ring: &mut IoUring, slots: &mut Slots, slot: usize| -> std::result::Result<(), String> {
            let off = region.offset(&mut rng, bytes);
            let write = write_pct > 0 && rng.random_range(0..100u32) < write_pct;
            let ptr = slots.bufs[slot].ptr;
            let entry = if write {
                opcode::Write::new(fd, ptr, bytes as u32)
                    .offset(off)
                    .build()
            } else {
                opcode::Read::new(fd, ptr, bytes as u32).offset(off).build()
            }
            .user_data(slot as u64);
            slots.started[slot] = Instant::now();
            slots.offsets[slot] = off;
            // SAFETY: the buffer stays in `slots` until this request completes: `in_flight`
            // marks it, and neither `release` nor `Drop` frees a buffer so marked.
            unsafe { ring.submission().push(&entry) }
                .map_err(|_| "io_uring submission queue full".to_string())?;
            slots.in_flight[slot] = true;
            slots.submitted += 1;
            Ok(())
        };

    for slot in 0..level as usize {
        if let Err(e) = submit(ring, &mut slots, slot) {
            failure = Some(e);
            break;
        }
    }
    while slots.any_in_flight() {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            // A signal interrupted the wait; the requests are still there to wait for.
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => {
                // The ring cannot be waited on: what is in flight stays so, and `release`
                // leaks those buffers.
                failure.get_or_insert(format!("io_uring: {e}"));
                break;
            }
        }
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (slot, res) in done {
            let slot = slot as usize;
            if !slots.in_flight.get(slot).copied().unwrap_or(false) {
                continue;
            }
            slots.in_flight[slot] = false;
            slots.completed += 1;
            if failure.is_some() {
                continue;
            }
            if res < 0 {
                failure = Some(format!(
                    "I/O at offset {}: {}",
                    slots.offsets[slot],
                    std::io::Error::from_raw_os_error(-res)
                ));
                continue;
            }
            if res as u64 != bytes {
                failure = Some(format!(
                    "short I/O at offset {}: {res} of {bytes} bytes (beyond the end of the file or device?)",
                    slots.offsets[slot]
                ));
                continue;
            }
            hist.saturating_record((slots.started[slot].elapsed().as_micros() as u64).max(1));
            ops += 1;
            if Instant::now() < deadline
                && !stop()
                && let Err(e) = submit(ring, &mut slots, slot)
            {
                failure = Some(e);
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let drained = slots.release();
    let measured = match failure {
        Some(e) => Err(e),
        None => Ok(Measured { ops, seconds, hist }),
    };
    (measured, drained)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::OpenOptionsExt;
    use std::time::Duration;

    use super::*;
    use crate::engine::Region;

    /// A 1 MiB file opened with O_DIRECT on a disk (not tmpfs).
    fn direct_file(write: bool) -> (tempfile::TempDir, File) {
        let dir = crate::disk_tempdir();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .unwrap();
        (dir, f)
    }

    fn ring() -> Option<IoUring> {
        match IoUring::new(16) {
            Ok(r) => Some(r),
            // A kernel or sandbox without io_uring cannot run this engine at all.
            Err(e) if std::env::var_os("CI").is_none() => {
                eprintln!("io_uring unavailable ({e}): test skipped");
                None
            }
            Err(e) => panic!("io_uring unavailable under CI: {e}"),
        }
    }

    fn load(region: Region, write_pct: u32) -> Load {
        Load {
            region,
            bytes: 4096,
            level: 16,
            duration: Duration::from_secs(5),
            write_pct,
            seed: 3,
        }
    }

    // Seen: the first short read returned at once, freeing the buffers of the 15 reads still
    // in flight while the kernel could still write into them.
    #[test]
    fn a_short_read_drains_every_read_in_flight_before_returning() {
        let Some(mut ring) = ring() else { return };
        let (_dir, f) = direct_file(false);
        // Every offset is at or past the end of the 1 MiB file: each read returns 0 bytes.
        let region = Region {
            base: 1 << 20,
            len: 64 << 20,
        };
        let (measured, drained) = run(&mut ring, &f, load(region, 0), &|| false);
        let e = measured.err().expect("a read beyond the end fails");
        assert!(e.contains("short I/O"), "{e}");
        assert_eq!(
            drained,
            Drained {
                submitted: 16,
                completed: 16,
                leaked: 0
            },
            "every submitted read completes before a buffer is freed, and none starts after the error"
        );
    }

    #[test]
    fn a_failed_completion_drains_every_request_in_flight_before_returning() {
        let Some(mut ring) = ring() else { return };
        // Writes on a descriptor opened read-only: every completion is -EBADF.
        let (_dir, f) = direct_file(false);
        let region = Region {
            base: 0,
            len: 1 << 20,
        };
        let (measured, drained) = run(&mut ring, &f, load(region, 100), &|| false);
        let e = measured
            .err()
            .expect("a write on a read-only descriptor fails");
        assert!(e.contains("Bad file descriptor"), "{e}");
        assert_eq!(drained.submitted, 16);
        assert_eq!(drained.completed, 16);
        assert_eq!(drained.leaked, 0);
    }

    #[test]
    fn a_good_run_completes_every_request_it_submitted() {
        let Some(mut ring) = ring() else { return };
        let (_dir, f) = direct_file(true);
        let region = Region {
            base: 0,
            len: 1 << 20,
        };
        let mut l = load(region, 50);
        l.duration = Duration::from_millis(200);
        let (measured, drained) = run(&mut ring, &f, l, &|| false);
        let m = measured.expect("reads and writes inside the file succeed");
        assert!(m.ops >= 16, "{} ops", m.ops);
        assert_eq!(m.ops, drained.completed);
        assert_eq!((drained.submitted, drained.leaked), (drained.completed, 0));
    }
}
