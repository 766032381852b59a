//! The capacity verdict: the highest figure (DB read IOPS, device IOPS or operations/s) whose
//! step meets a latency target (`p99<=2ms`), found by search. The search doubles the session
//! count (or the open-loop rate) until a step misses the target, then bisects between the
//! last step that met it and the first that missed, each step a full measured window, and
//! stops once the figure at the two ends of the bracket differs by no more than the
//! resolution (a finer step could not raise the answer by more) or the bracket cannot be
//! split. The answer's step then runs again (`capacity.repeat`): the spread of its runs is
//! the answer's interval. Same files as a ramp: a capacity result is a ramp with its answer.

use serde::{Deserialize, Serialize};

use crate::CoreError;
use crate::config::{CapacityConfig, CapacityMetric, Config, SearchOver, Slo, SloSource, SloStat};
use crate::stats::dbstats::CalibrationCompare;
use crate::stats::decode_histogram;
use crate::summary::StepSummary;

/// One value the search tries: a session count, or an open-loop rate (per second).
pub type Point = u64;

/// Where the search is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Doubling,
    Bisecting,
    /// Runs left at the answer.
    Repeating(u32),
    Done,
}

/// The search over one value, driven by whether each step met the target.
#[derive(Debug, Clone)]
pub struct Search {
    max: Point,
    /// Stop bisecting when the figures at the bracket's ends are within this share.
    resolution: f64,
    /// Bisecting a rate also stops when the rates are within it.
    continuous: bool,
    repeat: u32,
    phase: Phase,
    next: Point,
    /// The highest point that met the target, with its figure.
    met: Option<(Point, Option<f64>)>,
    /// The lowest point above it that missed, with its figure.
    missed: Option<(Point, Option<f64>)>,
}

impl Search {
    /// A search from `start` up to `max`; `repeat` runs at the answer in all.
    pub fn new(
        start: Point,
        max: Point,
        resolution_pct: f64,
        continuous: bool,
        repeat: u32,
    ) -> Search {
        Search {
            max: max.max(start),
            resolution: resolution_pct / 100.0,
            continuous,
            repeat: repeat.max(1),
            phase: Phase::Doubling,
            next: start.max(1),
            met: None,
            missed: None,
        }
    }

    /// The point to run first.
    pub fn first(&self) -> Point {
        self.next
    }

    /// The outcome of the run at `at`: whether it met the target and its figure. Returns the
    /// next point to run, or None when the search is over.
    pub fn next(&mut self, at: Point, met: bool, figure: Option<f64>) -> Option<Point> {
        match self.phase {
            Phase::Done => return None,
            Phase::Repeating(left) => {
                if left <= 1 {
                    self.phase = Phase::Done;
                    return None;
                }
                self.phase = Phase::Repeating(left - 1);
                return self.met.map(|m| m.0);
            }
            Phase::Doubling | Phase::Bisecting => {}
        }
        if met {
            if self.met.is_none_or(|(p, _)| at >= p) {
                self.met = Some((at, figure));
            }
        } else if self.missed.is_none_or(|(p, _)| at <= p) {
            self.missed = Some((at, figure));
        }
        if self.phase == Phase::Doubling {
            if met && at < self.max {
                self.next = at.saturating_mul(2).min(self.max);
                return Some(self.next);
            }
            self.phase = Phase::Bisecting;
        }
        match (self.met, self.missed) {
            (Some((lo, f_lo)), Some((hi, f_hi))) if self.worth_splitting(lo, f_lo, hi, f_hi) => {
                self.next = lo + (hi - lo) / 2;
                Some(self.next)
            }
            // Nothing met the target: no answer, no repeats.
            (None, _) => {
                self.phase = Phase::Done;
                None
            }
            _ => self.start_repeats(),
        }
    }

    /// Whether a step between `lo` (met) and `hi` (missed) could raise the answer by more
    /// than the resolution.
    fn worth_splitting(&self, lo: Point, f_lo: Option<f64>, hi: Point, f_hi: Option<f64>) -> bool {
        if hi <= lo + 1 {
            return false;
        }
        if self.continuous && (hi - lo) as f64 <= self.resolution * lo as f64 {
            return false;
        }
        match (f_lo, f_hi) {
            (Some(a), Some(b)) if a > 0.0 => b > a * (1.0 + self.resolution),
            _ => true,
        }
    }

    fn start_repeats(&mut self) -> Option<Point> {
        if self.repeat <= 1 {
            self.phase = Phase::Done;
            return None;
        }
        self.phase = Phase::Repeating(self.repeat - 1);
        self.met.map(|m| m.0)
    }

    /// The repeats at the answer have begun (the next runs are not search steps).
    pub fn repeating(&self) -> bool {
        matches!(self.phase, Phase::Repeating(_))
    }

    /// The most runs still to come: the bisection left, and the repeats.
    pub fn left_hint(&self) -> u64 {
        let bisect = match (self.met, self.missed) {
            (Some((lo, _)), Some((hi, _))) if hi > lo + 1 => {
                ((hi - lo) as f64).log2().ceil() as u64
            }
            (_, None) => (self.max as f64 / self.next.max(1) as f64).log2().ceil() as u64 + 2,
            _ => 0,
        };
        match self.phase {
            Phase::Done => 0,
            Phase::Repeating(left) => left as u64,
            _ => bisect + self.repeat as u64,
        }
    }

    /// The highest point that met the target.
    pub fn answer(&self) -> Option<Point> {
        self.met.map(|m| m.0)
    }

    /// The lowest point above the answer that missed it.
    pub fn first_miss(&self) -> Option<Point> {
        self.missed.map(|m| m.0)
    }

    /// The search reached its largest point and still met the target there.
    pub fn capped(&self) -> bool {
        self.missed.is_none() && self.met.is_some_and(|m| m.0 >= self.max)
    }
}

/// A step's latency as the target states it, µs; None when the step cannot say (no read
/// completed, the database's read time is not measured).
pub fn latency_us(slo: &Slo, s: &StepSummary) -> Option<f64> {
    match (slo.source, slo.stat) {
        (SloSource::Db, _) => s.db_avg_read_latency_us.as_ref().map(|v| v.mean),
        (SloSource::Client, stat) => {
            let h = decode_histogram(&s.read_histogram).ok()?;
            if h.is_empty() {
                return None;
            }
            Some(match stat {
                SloStat::Avg => h.mean(),
                SloStat::Percentile(q) => h.value_at_quantile(q / 100.0) as f64,
            })
        }
    }
}

/// A step's figure in the answer's metric; None when the step did not measure it.
pub fn figure(metric: CapacityMetric, s: &StepSummary) -> Option<f64> {
    match metric {
        CapacityMetric::DbReadIops => s.db_read_iops.as_ref().map(|v| v.mean),
        CapacityMetric::DeviceIops => s.device_read_iops.as_ref().map(|v| v.mean),
        CapacityMetric::Ops => Some(s.client_ops_per_s.mean),
    }
}

/// One measured window of the search, in the order it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// 1-based, in the order the windows ran.
    pub window: u32,
    /// The step's label (`r8-w0`, `r8-w0-rate500`).
    pub step: String,
    pub readers: u32,
    /// The open-loop rate, per second (a rate search, or `run.rate`).
    pub rate_per_s: Option<u64>,
    /// The latency the target bounds, µs; null when the step could not say.
    pub latency_us: Option<f64>,
    /// The step's figure in the answer's metric.
    pub figure: Option<f64>,
    /// Met the target (latency at most the bound); null when it could not be judged.
    pub met: Option<bool>,
    /// A run at the answer after the search, for its interval.
    #[serde(default)]
    pub repeat: bool,
}

/// The answer a DBA asks for, recorded in ramp.json's `capacity`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityResult {
    /// The target, as written: `p99<=2ms`.
    pub slo: String,
    /// In words: `p99 client read latency at most 2ms`.
    pub slo_text: String,
    pub metric: CapacityMetric,
    pub search: SearchOver,
    /// The highest figure meeting the target: the mean over the answer step's runs. Null
    /// when no step met it.
    pub answer: Option<f64>,
    /// The lowest and highest of the answer step's runs, and their sample sd (0 for one).
    pub answer_min: Option<f64>,
    pub answer_max: Option<f64>,
    pub answer_sd: Option<f64>,
    /// How many of the answer step's runs met the target on their own.
    pub answer_runs_met: u32,
    pub answer_runs: u32,
    /// The step that met the target with the most load: its label.
    pub answer_step: Option<String>,
    /// The bracket: the highest step that met the target and the lowest above it that
    /// missed; null where there is none (nothing met, or nothing tried missed).
    pub met_step: Option<Probe>,
    pub missed_step: Option<Probe>,
    /// When no step met the target: the one closest to it (lowest latency against the bound).
    pub best_step: Option<Probe>,
    /// The search met the target at its largest step (capacity.max_sessions or
    /// capacity.max_rate): the capacity may be higher.
    pub capped: bool,
    /// Measured windows the search took, and the runs at the answer after it.
    pub search_windows: u32,
    pub repeat_windows: u32,
    /// Every window, in the order it ran.
    pub probes: Vec<Probe>,
    /// The raw device's figures at the answer's outstanding I/O (a calibration given with
    /// `--calibration`), and how that outstanding I/O was counted.
    pub device: Option<CalibrationCompare>,
    pub device_outstanding_basis: Option<String>,
    /// What the answer needs said beside it.
    pub notes: Vec<String>,
}

/// Judges each window of a capacity search and builds the answer from them.
#[derive(Debug, Clone)]
pub struct CapacityPlan {
    pub slo: Slo,
    pub metric: CapacityMetric,
    pub over: SearchOver,
    pub search: Search,
    pub probes: Vec<Probe>,
    /// Why the search stopped before its end, when it did (a step it could not judge).
    pub stopped: Option<String>,
}

impl CapacityPlan {
    /// The search `config.capacity` asks for; an error names what is missing.
    pub fn new(config: &Config) -> Result<CapacityPlan, CoreError> {
        let c: &CapacityConfig = &config.capacity;
        let slo = c.slo.ok_or_else(|| {
            CoreError::invalid(
                "capacity.slo",
                "capacity needs a latency target: --slo 'p99<=2ms', e.g. p95<=500us, avg<=1ms, db.avg<=5ms",
            )
        })?;
        let search = match c.search {
            SearchOver::Sessions => Search::new(
                c.start_sessions as Point,
                c.max_sessions as Point,
                c.resolution_pct,
                false,
                c.repeat,
            ),
            SearchOver::Rate => {
                let start = c
                    .start_rate
                    .or(config.run.rate)
                    .map(|r| r.per_s())
                    .unwrap_or(DEFAULT_START_RATE);
                Search::new(
                    start.round().max(1.0) as Point,
                    c.max_rate.per_s().round() as Point,
                    c.resolution_pct,
                    true,
                    c.repeat,
                )
            }
        };
        Ok(CapacityPlan {
            slo,
            metric: c.metric,
            over: c.search,
            search,
            probes: Vec::new(),
            stopped: None,
        })
    }

    /// Judges the window just run at `at` (summarised on its own) and returns the next point.
    pub fn judge(&mut self, at: Point, s: &StepSummary) -> Option<Point> {
        let latency = latency_us(&self.slo, s);
        let fig = figure(self.metric, s);
        let met = latency.map(|l| l <= self.slo.max_us);
        let repeat = self.search.repeating();
        self.probes.push(Probe {
            window: self.probes.len() as u32 + 1,
            step: s.step.clone(),
            readers: s.key.readers,
            rate_per_s: s.key.rate_per_s,
            latency_us: latency,
            figure: fig,
            met,
            repeat,
        });
        let Some(met) = met else {
            self.stopped = Some(format!(
                "step {} could not be judged: {}; the search stopped there",
                s.step,
                match self.slo.source {
                    SloSource::Db =>
                        "the database did not time its reads (track_io_timing off?) or read nothing",
                    SloSource::Client => "no read completed in its window",
                }
            ));
            return None;
        };
        if fig.is_none() && !repeat {
            self.stopped = Some(format!(
                "step {} has no {} figure ({}); the search stopped there: choose another --metric",
                s.step,
                self.metric.as_str(),
                match self.metric {
                    CapacityMetric::DeviceIops =>
                        "the device under the data was not measured: tmpfs, another host, or no rights",
                    _ => "the collector did not measure it",
                }
            ));
            return None;
        }
        self.search.next(at, met, fig)
    }

    /// The answer, from every step's summary (the answer step's repeats merged).
    pub fn result(&self, steps: &[StepSummary]) -> CapacityResult {
        let probe_of = |at: Option<Point>| -> Option<Probe> {
            let at = at?;
            self.probes
                .iter()
                .rev()
                .find(|p| !p.repeat && self.point_of(p) == at)
                .cloned()
        };
        let answer_at = self.search.answer();
        let met_step = probe_of(answer_at);
        let missed_step = probe_of(self.search.first_miss());
        let answer_runs: Vec<&Probe> = match &met_step {
            Some(m) => self.probes.iter().filter(|p| p.step == m.step).collect(),
            None => Vec::new(),
        };
        let values: Vec<f64> = answer_runs.iter().filter_map(|p| p.figure).collect();
        let stat = crate::summary::Stat::of(values.clone());
        let best_step = if met_step.is_none() {
            self.probes
                .iter()
                .filter(|p| p.latency_us.is_some())
                .min_by(|a, b| {
                    a.latency_us
                        .unwrap_or(f64::INFINITY)
                        .total_cmp(&b.latency_us.unwrap_or(f64::INFINITY))
                })
                .cloned()
        } else {
            None
        };
        let mut notes = Vec::new();
        if let Some(why) = &self.stopped {
            notes.push(why.clone());
        }
        let capped = self.search.capped();
        if capped {
            notes.push(format!(
                "the target was still met at the largest step tried ({}): the capacity may be higher; raise {}",
                met_step.as_ref().map(|p| p.step.as_str()).unwrap_or("-"),
                match self.over {
                    SearchOver::Sessions => "capacity.max_sessions (--max-sessions)",
                    SearchOver::Rate => "capacity.max_rate (--max-rate)",
                }
            ));
        }
        let met_runs = answer_runs.iter().filter(|p| p.met == Some(true)).count() as u32;
        if answer_runs.len() > 1 && (met_runs as usize) < answer_runs.len() {
            notes.push(format!(
                "{} of the {} runs at the answer met the target on their own: the answer sits at the edge of the target, \
                 and its figure is the mean of all of them",
                met_runs,
                answer_runs.len()
            ));
        }
        let answer_summary = met_step
            .as_ref()
            .and_then(|m| steps.iter().find(|s| s.step == m.step));
        if let Some(s) = answer_summary
            && s.steady == Some(false)
        {
            notes.push(format!(
                "the answer's step {} was not steady: its window opened without its steady-state rule holding",
                s.step
            ));
        }
        CapacityResult {
            slo: self.slo.to_string(),
            slo_text: format!(
                "{} at most {}",
                self.slo.describe(),
                crate::config::capacity::fmt_us(self.slo.max_us)
            ),
            metric: self.metric,
            search: self.over,
            answer: stat.as_ref().map(|s| s.mean),
            answer_min: values.iter().copied().reduce(f64::min),
            answer_max: values.iter().copied().reduce(f64::max),
            answer_sd: stat.as_ref().map(|s| s.sd),
            answer_runs_met: met_runs,
            answer_runs: answer_runs.len() as u32,
            answer_step: met_step.as_ref().map(|p| p.step.clone()),
            met_step,
            missed_step,
            best_step,
            capped,
            search_windows: self.probes.iter().filter(|p| !p.repeat).count() as u32,
            repeat_windows: self.probes.iter().filter(|p| p.repeat).count() as u32,
            probes: self.probes.clone(),
            device: None,
            device_outstanding_basis: None,
            notes,
        }
    }

    fn point_of(&self, p: &Probe) -> Point {
        match self.over {
            SearchOver::Sessions => p.readers as Point,
            SearchOver::Rate => p.rate_per_s.unwrap_or(0),
        }
    }
}

/// A rate search's first rate when neither capacity.start_rate nor run.rate gives one.
pub const DEFAULT_START_RATE: f64 = 100.0;

impl CapacityResult {
    /// The target's bound, µs.
    pub fn slo_max_us(&self) -> f64 {
        Slo::parse(&self.slo).map(|s| s.max_us).unwrap_or(f64::NAN)
    }

    /// `answer: 398 DB read IOPS ...`, the lines ramp.txt and stdout open with.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let unit = self.metric.label();
        let probe = |p: &Probe| {
            format!(
                "{} ({} reader(s){}): {} {}, {} {}",
                p.step,
                p.readers,
                p.rate_per_s
                    .map(|r| format!(" at {r}/s"))
                    .unwrap_or_default(),
                p.figure
                    .map(|f| format!("{f:.1}"))
                    .unwrap_or_else(|| "-".into()),
                unit,
                p.latency_us
                    .map(|l| format!("{:.0} µs", l))
                    .unwrap_or_else(|| "-".into()),
                match p.met {
                    Some(true) => "met",
                    Some(false) => "missed",
                    None => "not judged",
                }
            )
        };
        match self.answer {
            Some(a) => {
                out.push(format!(
                    "capacity: {a:.1} {unit} with {} (step {})",
                    self.slo_text,
                    self.answer_step.as_deref().unwrap_or("-")
                ));
                if self.answer_runs > 1 {
                    out.push(format!(
                        "  interval over its {} runs: {:.1} .. {:.1} (sd {:.1}); {} of them met the target",
                        self.answer_runs,
                        self.answer_min.unwrap_or(a),
                        self.answer_max.unwrap_or(a),
                        self.answer_sd.unwrap_or(0.0),
                        self.answer_runs_met
                    ));
                }
            }
            None => out.push(format!(
                "capacity: NO STEP MET the target ({}){}",
                self.slo_text,
                self.best_step
                    .as_ref()
                    .map(|b| format!("; the best step was {}", probe(b)))
                    .unwrap_or_default()
            )),
        }
        if let Some(m) = &self.met_step {
            out.push(format!("  met:    {}", probe(m)));
        }
        if let Some(m) = &self.missed_step {
            out.push(format!("  missed: {}", probe(m)));
        }
        out.push(format!(
            "  search over {}: {} window(s), then {} run(s) at the answer",
            self.search.as_str(),
            self.search_windows,
            self.repeat_windows
        ));
        if let Some(d) = &self.device {
            out.push(format!(
                "  the raw device at {} outstanding I/O ({}): {:.1} IOPS{} (calibration {}){}",
                d.level,
                self.device_outstanding_basis.as_deref().unwrap_or("-"),
                d.raw_small_iops,
                d.raw_mean_latency_us
                    .map(|l| format!(", mean {l:.0} µs"))
                    .unwrap_or_default(),
                d.file,
                d.iops_ratio
                    .map(|r| format!("; DB reads / device: {r:.2}"))
                    .unwrap_or_default()
            ));
        }
        for n in &self.notes {
            out.push(format!("  note: {n}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a system whose latency at a point is `lat(x)` and figure `fig(x)`.
    fn drive(
        mut s: Search,
        bound: f64,
        lat: impl Fn(Point) -> f64,
        fig: impl Fn(Point) -> f64,
    ) -> (Search, Vec<Point>) {
        let mut tried = vec![s.first()];
        let mut at = s.first();
        while let Some(next) = s.next(at, lat(at) <= bound, Some(fig(at))) {
            tried.push(next);
            at = next;
            assert!(tried.len() < 100, "the search ends: {tried:?}");
        }
        (s, tried)
    }

    #[test]
    fn sessions_double_to_the_first_miss_and_stop_when_the_figure_is_saturated() {
        // A device capped at 400 IOPS: every session count gives 400, latency 2.5 ms per
        // session; 50 ms is met up to 20 sessions.
        let (s, tried) = drive(
            Search::new(1, 256, 5.0, false, 3),
            50_000.0,
            |x| 2500.0 * x as f64,
            |_| 400.0,
        );
        // 1..16 met, 32 missed, 400 at both ends: no finer step could raise the answer.
        assert_eq!(tried, vec![1, 2, 4, 8, 16, 32, 16, 16]);
        assert_eq!(s.answer(), Some(16));
        assert_eq!(s.first_miss(), Some(32));
        // log2(256) + 2 = 10 windows at most, plus the repeats: here 6 + 2.
        assert!(tried.len() - 2 <= 10);
    }

    #[test]
    fn bisection_narrows_while_the_figure_still_grows() {
        // IOPS grow with sessions to 40, then flatten; latency passes the bound at 24.
        let fig = |x: Point| 100.0 * (x.min(40)) as f64;
        let (s, tried) = drive(
            Search::new(1, 256, 5.0, false, 1),
            1000.0,
            |x| if x <= 23 { 500.0 } else { 2000.0 },
            fig,
        );
        assert_eq!(s.answer(), Some(23), "{tried:?}");
        assert_eq!(s.first_miss(), Some(24));
        assert_eq!(&tried[..6], &[1, 2, 4, 8, 16, 32]);
        // 16..32: 24 (miss), 20 (met), 22 (met), 23 (met): 4 more windows.
        assert_eq!(&tried[6..], &[24, 20, 22, 23]);
    }

    #[test]
    fn a_rate_search_stops_at_the_resolution() {
        // Capacity 1,000/s: below it latency is low and the figure is the rate; above it the
        // queue grows and the figure stays 1,000.
        let (s, tried) = drive(
            Search::new(100, 1_000_000, 5.0, true, 1),
            10_000.0,
            |r| if r <= 950 { 1000.0 } else { 1e6 },
            |r| r.min(1000) as f64,
        );
        let a = s.answer().unwrap();
        assert!((903..=950).contains(&a), "{a} {tried:?}");
        assert!(tried.len() <= 12, "{tried:?}");
    }

    #[test]
    fn nothing_met_is_no_answer_and_no_repeats() {
        let (s, tried) = drive(
            Search::new(1, 64, 5.0, false, 3),
            100.0,
            |_| 2500.0,
            |_| 400.0,
        );
        assert_eq!(tried, vec![1]);
        assert_eq!(s.answer(), None);
        assert!(!s.capped());
    }

    #[test]
    fn met_at_the_largest_step_is_capped() {
        let (s, tried) = drive(Search::new(1, 8, 5.0, false, 1), 1e9, |_| 1.0, |x| x as f64);
        assert_eq!(tried, vec![1, 2, 4, 8]);
        assert!(s.capped());
        assert_eq!(s.answer(), Some(8));
    }

    fn summary(readers: u32, iops: f64, latencies_us: &[u64]) -> StepSummary {
        let mut h = crate::stats::new_histogram();
        for v in latencies_us {
            h.saturating_record(*v);
        }
        StepSummary {
            key: crate::summary::StepKey::closed(readers, 0, 0),
            step: format!("r{readers}-w0"),
            repeats: 1,
            status: crate::driver::RunStatus::Ok,
            elapsed_s: 5.0,
            client_ops_per_s: crate::summary::Stat::of(vec![iops]).unwrap(),
            client_read_p50_us: None,
            client_read_p99_us: None,
            db_read_iops: crate::summary::Stat::of(vec![iops]),
            db_write_iops: None,
            db_avg_read_latency_us: None,
            device_read_iops: None,
            physical_read_ratio: None,
            backends_physical_read_ratio: None,
            raw_device_iops: None,
            db_to_raw_iops_ratio: None,
            top_wait: None,
            storage: None,
            interval_ops_per_s: vec![],
            read_histogram: crate::stats::encode_histogram(&h),
            results: vec![],
            warnings: vec![],
            stalled_ops: 0,
            targets: vec![],
            device_await_ms: None,
            device_queue_depth: None,
            device_reads_in_flight: None,
            db_reads_in_flight: None,
            limiter: None,
            steady: None,
        }
    }

    #[test]
    fn the_plan_judges_windows_by_the_target_and_names_the_bracket() {
        let mut c = Config::default();
        c.capacity.slo = Some(Slo::parse("p99<=50ms").unwrap());
        c.capacity.max_sessions = 64;
        c.capacity.repeat = 2;
        let mut plan = CapacityPlan::new(&c).unwrap();
        let mut at = plan.search.first();
        let mut steps = Vec::new();
        loop {
            // p99 2.5 ms per session; 396..399 IOPS.
            let lat = vec![2_500 * at; 100];
            let s = summary(at as u32, 396.0 + (at % 4) as f64, &lat);
            steps.push(s.clone());
            match plan.judge(at, &s) {
                Some(n) => at = n,
                None => break,
            }
        }
        let r = plan.result(&steps);
        assert_eq!(r.answer_step.as_deref(), Some("r16-w0"));
        assert_eq!(r.met_step.as_ref().map(|p| p.readers), Some(16));
        assert_eq!(r.missed_step.as_ref().map(|p| p.readers), Some(32));
        assert_eq!((r.search_windows, r.repeat_windows), (6, 1));
        assert_eq!((r.answer_runs, r.answer_runs_met), (2, 2));
        assert_eq!(r.answer, Some(396.0));
        assert!(r.best_step.is_none() && !r.capped);
        let text = r.lines().join("\n");
        assert!(text.contains("capacity: 396.0 DB read IOPS"), "{text}");
        assert!(
            text.contains("p99 client read latency at most 50ms"),
            "{text}"
        );
        assert!(text.contains("missed: r32-w0"), "{text}");
    }

    #[test]
    fn no_step_met_names_the_best_one() {
        let mut c = Config::default();
        c.capacity.slo = Some(Slo::parse("p99<=1ms").unwrap());
        let mut plan = CapacityPlan::new(&c).unwrap();
        let s = summary(1, 400.0, &[2_500; 50]);
        assert_eq!(plan.judge(1, &s), None);
        let r = plan.result(&[s]);
        assert_eq!(r.answer, None);
        assert_eq!(r.best_step.as_ref().map(|p| p.step.as_str()), Some("r1-w0"));
        let text = r.lines().join("\n");
        assert!(
            text.contains("NO STEP MET") && text.contains("best step was r1-w0"),
            "{text}"
        );
    }

    #[test]
    fn a_step_without_the_figure_stops_the_search_and_says_why() {
        let mut c = Config::default();
        c.capacity.slo = Some(Slo::parse("p99<=50ms").unwrap());
        c.capacity.metric = CapacityMetric::DeviceIops;
        let mut plan = CapacityPlan::new(&c).unwrap();
        let s = summary(1, 400.0, &[2_500; 50]);
        assert_eq!(plan.judge(1, &s), None);
        assert!(
            plan.stopped
                .as_deref()
                .unwrap_or("")
                .contains("device under the data")
        );
        assert!(
            CapacityPlan::new(&Config::default())
                .unwrap_err()
                .to_string()
                .contains("--slo")
        );
    }

    #[test]
    fn latency_by_the_target_statistic() {
        let s = summary(1, 400.0, &(1..=100).map(|v| v * 100).collect::<Vec<_>>());
        let at = |t: &str| latency_us(&Slo::parse(t).unwrap(), &s).unwrap();
        assert!(
            (at("p99<=1ms") - 9_900.0).abs() <= 10.0,
            "{}",
            at("p99<=1ms")
        );
        assert!((at("p50<=1ms") - 5_000.0).abs() <= 5.0);
        assert!((at("avg<=1ms") - 5_050.0).abs() <= 5.0);
        assert_eq!(latency_us(&Slo::parse("db.avg<=1ms").unwrap(), &s), None);
    }
}
