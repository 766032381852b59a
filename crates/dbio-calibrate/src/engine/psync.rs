//! The psync engine: `level` threads, each keeping one pread(2)/pwrite(2) outstanding, as
//! fio's psync engine at iodepth 1 per job.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use dbio_core::stats::new_histogram;
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::{AlignedBuf, Load, Measured, Stop};
use crate::{CalibrateError, Result};

/// `level` threads each keep one I/O of `bytes` at a random aligned offset outstanding.
pub(super) fn measure(f: &File, path: &Path, load: Load, stop: Stop<'_>) -> Result<Measured> {
    let Load {
        region,
        bytes,
        level,
        duration,
        write_pct,
        seed,
    } = load;
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
                        while Instant::now() < deadline && !stop() {
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
