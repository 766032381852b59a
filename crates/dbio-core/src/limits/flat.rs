//! The shape of a cap in a ramp: device IOPS flat within a few % across steps whose sessions
//! at least doubled, while the read latency rose with them (Little's law: at a fixed
//! throughput, latency grows with the sessions). Real storage answers more outstanding I/O
//! with more IOPS until it saturates; a provisioned or cgroup limit holds the figure at its
//! number from the first step on. A cgroup throttle (blkio, io.max) holds I/Os before they
//! reach the device, so the device's own await stays flat and the latency the sessions see
//! (database-timed, else the client's p50) is the one that rises.

use crate::summary::{Stat, StepSummary};

use super::{Evidence, Limiter, LimiterVerdict};

/// Steps whose IOPS lie within this % of the lowest are flat (a throttle lets a burst
/// through after an idle spell: seen 8% above a 400 IOPS cgroup limit in a 2 s window).
pub const FLAT_PCT: f64 = 10.0;
/// Across flat steps the sessions grew at least this many times...
pub const MIN_SESSIONS_RISE: f64 = 2.0;
/// ...and the read latency at least this many times.
pub const MIN_LATENCY_RISE: f64 = 1.5;

fn mean(s: &Option<Stat>) -> Option<f64> {
    s.as_ref().map(|s| s.mean)
}

/// A step's IOPS (the device's reads, else the database's) and read latency in µs (the
/// database-timed read, else the client's p50), with their names.
fn figures(s: &StepSummary) -> Option<(f64, &'static str, f64, &'static str)> {
    let (iops, iops_name) = match mean(&s.device_read_iops) {
        Some(d) => (d, "device read IOPS"),
        None => (mean(&s.db_read_iops)?, "database read IOPS"),
    };
    let (lat, lat_name) = match mean(&s.db_avg_read_latency_us) {
        Some(l) => (l, "database-timed read latency"),
        None => (mean(&s.client_read_p50_us)?, "client read p50"),
    };
    (iops > 0.0 && lat > 0.0).then_some((iops, iops_name, lat, lat_name))
}

/// A step whose own verdict leaves room for a cap it could not see (its reads reached
/// storage, or nothing decided): not a CPU-, cache- or lock-bound step.
fn open_to_cap(s: &StepSummary) -> bool {
    s.limiter.as_ref().is_none_or(|v| {
        matches!(
            v.limiter,
            Limiter::Storage | Limiter::Unknown | Limiter::Cap
        )
    })
}

/// Finds the flat signature in each group of steps that differ only in readers, and marks
/// the flat steps' limiter as a cap ("flat at N IOPS: a provisioned limit?") where their own
/// figures could not name one (a cgroup limit that was read stays as it is). Returns one
/// line per flat stretch, for the ramp's warnings.
pub fn judge_ramp(steps: &mut [StepSummary]) -> Vec<String> {
    let mut groups: Vec<(u32, u32)> = Vec::new();
    for s in steps.iter() {
        let k = (s.key.writers, s.key.update_pct);
        if !groups.contains(&k) {
            groups.push(k);
        }
    }
    let mut out = Vec::new();
    for g in groups {
        let mut idx: Vec<usize> = (0..steps.len())
            .filter(|i| (steps[*i].key.writers, steps[*i].key.update_pct) == g)
            .collect();
        idx.sort_by_key(|i| steps[*i].key.readers + steps[*i].key.writers);
        if let Some(line) = flat_in(steps, &idx) {
            out.push(line);
        }
    }
    out
}

/// The longest flat stretch of `idx` (steps in session order), marked; its line.
fn flat_in(steps: &mut [StepSummary], idx: &[usize]) -> Option<String> {
    let sessions = |i: usize| (steps[i].key.readers + steps[i].key.writers) as f64;
    let mut best: Option<(usize, usize)> = None;
    for a in 0..idx.len() {
        let Some((ia, _, la, _)) = figures(&steps[idx[a]]) else {
            continue;
        };
        if !open_to_cap(&steps[idx[a]]) {
            continue;
        }
        let (mut lo, mut hi) = (ia, ia);
        for b in a + 1..idx.len() {
            let Some((ib, _, lb, _)) = figures(&steps[idx[b]]) else {
                break;
            };
            if !open_to_cap(&steps[idx[b]]) {
                break;
            }
            lo = lo.min(ib);
            hi = hi.max(ib);
            if 100.0 * (hi - lo) / lo > FLAT_PCT {
                break;
            }
            let rose = sessions(idx[b]) >= MIN_SESSIONS_RISE * sessions(idx[a])
                && lb >= MIN_LATENCY_RISE * la;
            if rose && best.is_none_or(|(x, y)| b - a > y - x) {
                best = Some((a, b));
            }
        }
    }
    let (a, b) = best?;
    let stretch: Vec<usize> = idx[a..=b].to_vec();
    let (_, iops_name, la, lat_name) = figures(&steps[stretch[0]])?;
    let (_, _, lb, _) = figures(&steps[stretch[stretch.len() - 1]])?;
    let values: Vec<f64> = stretch
        .iter()
        .filter_map(|i| figures(&steps[*i]).map(|f| f.0))
        .collect();
    let n = values.iter().sum::<f64>() / values.len() as f64;
    let spread = 100.0
        * (values.iter().cloned().fold(f64::MIN, f64::max)
            - values.iter().cloned().fold(f64::MAX, f64::min))
        / n;
    let (first, last) = (
        steps[stretch[0]].step.clone(),
        steps[stretch[stretch.len() - 1]].step.clone(),
    );
    let line = format!(
        "flat at {n:.0} IOPS: a provisioned limit? {iops_name} within {spread:.1}% from {first} to {last} \
         while the sessions grew {:.0}x and the {lat_name} rose from {la:.0} to {lb:.0} µs: \
         storage answers more outstanding I/O with more IOPS, a limit does not",
        sessions(stretch[stretch.len() - 1]) / sessions(stretch[0])
    );
    for i in &stretch {
        let s = &mut steps[*i];
        // A cap a step's own figures named (its cgroup's limit, read) is said better than a
        // guess from the shape.
        if s.limiter.as_ref().is_some_and(|v| {
            v.limiter == Limiter::Cap
                && v.evidence
                    .iter()
                    .any(|e| e.source.starts_with("limits.caps"))
        }) {
            continue;
        }
        let mut evidence: Vec<Evidence> = s
            .limiter
            .as_ref()
            .map(|v| v.evidence.clone())
            .unwrap_or_default();
        evidence.push(Evidence {
            figure: format!("{iops_name} across {first}..{last}"),
            value: n,
            unit: format!("IOPS, within {spread:.1}%"),
            source: "the ramp's steps".into(),
        });
        evidence.push(Evidence {
            figure: format!("{lat_name} rise across {first}..{last}"),
            value: lb / la,
            unit: "times".into(),
            source: "the ramp's steps".into(),
        });
        s.limiter = Some(LimiterVerdict {
            limiter: Limiter::Cap,
            line: line.clone(),
            evidence,
            missing: Vec::new(),
        });
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::RunStatus;
    use crate::summary::StepKey;

    fn stat(v: f64) -> Option<Stat> {
        Stat::of(vec![v])
    }

    fn step(readers: u32, iops: f64, lat_us: f64, limiter: Limiter) -> StepSummary {
        StepSummary {
            key: StepKey::closed(readers, 0, 0),
            step: format!("r{readers}-w0"),
            repeats: 1,
            status: RunStatus::Ok,
            elapsed_s: 3.0,
            client_ops_per_s: Stat::of(vec![iops / 10.0]).unwrap(),
            client_read_p50_us: stat(lat_us * 10.0),
            client_read_p99_us: None,
            db_read_iops: stat(iops),
            db_write_iops: None,
            db_avg_read_latency_us: stat(lat_us),
            device_read_iops: stat(iops),
            physical_read_ratio: Some(1.0),
            backends_physical_read_ratio: None,
            raw_device_iops: None,
            db_to_raw_iops_ratio: None,
            top_wait: None,
            storage: None,
            interval_ops_per_s: Vec::new(),
            read_histogram: String::new(),
            results: Vec::new(),
            warnings: Vec::new(),
            stalled_ops: 0,
            targets: Vec::new(),
            steady: None,
            device_await_ms: stat(0.3),
            device_queue_depth: None,
            device_reads_in_flight: None,
            db_reads_in_flight: None,
            limiter: Some(LimiterVerdict {
                limiter,
                line: String::new(),
                evidence: Vec::new(),
                missing: Vec::new(),
            }),
        }
    }

    #[test]
    fn a_throttled_device_is_flat_while_latency_rises() {
        // 400 IOPS at 1, 2 and 4 readers; latency 2.5, 5, 10 ms.
        let mut steps = vec![
            step(1, 401.0, 2500.0, Limiter::Storage),
            step(2, 399.0, 5000.0, Limiter::Storage),
            step(4, 400.5, 10_000.0, Limiter::Storage),
        ];
        let lines = judge_ramp(&mut steps);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with("flat at 400 IOPS: a provisioned limit?")
                && lines[0].contains("from r1-w0 to r4-w0"),
            "{}",
            lines[0]
        );
        assert!(
            steps
                .iter()
                .all(|s| s.limiter.as_ref().unwrap().limiter == Limiter::Cap)
        );
    }

    #[test]
    fn storage_that_scales_or_latency_that_stays_is_not_flat() {
        let mut scaling = vec![
            step(1, 5000.0, 200.0, Limiter::Storage),
            step(2, 9500.0, 210.0, Limiter::Storage),
            step(4, 17000.0, 235.0, Limiter::Storage),
        ];
        assert!(judge_ramp(&mut scaling).is_empty());
        assert_eq!(
            scaling[0].limiter.as_ref().unwrap().limiter,
            Limiter::Storage
        );
        // Flat IOPS with flat latency (the sessions did not add load): no cap.
        let mut idle = vec![
            step(1, 400.0, 500.0, Limiter::Storage),
            step(2, 400.0, 520.0, Limiter::Storage),
        ];
        assert!(judge_ramp(&mut idle).is_empty());
    }

    #[test]
    fn a_knee_after_scaling_is_found_and_cpu_bound_steps_are_left_alone() {
        // Scales to 4 readers, then flat to 16 while latency quadruples.
        let mut steps = vec![
            step(1, 3000.0, 300.0, Limiter::Storage),
            step(4, 10_000.0, 380.0, Limiter::Storage),
            step(8, 10_200.0, 760.0, Limiter::Storage),
            step(16, 10_100.0, 1550.0, Limiter::Storage),
        ];
        let lines = judge_ramp(&mut steps);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("from r4-w0 to r16-w0"), "{}", lines[0]);
        assert_eq!(steps[0].limiter.as_ref().unwrap().limiter, Limiter::Storage);
        // The same shape on a saturated client says nothing of the storage.
        let mut cpu: Vec<StepSummary> =
            [(1, 3000.0, 300.0), (2, 3050.0, 600.0), (4, 3020.0, 1200.0)]
                .iter()
                .map(|(r, i, l)| step(*r, *i, *l, Limiter::ClientCpu))
                .collect();
        assert!(judge_ramp(&mut cpu).is_empty());
    }
}
