//! Progress display on stderr: one indicatif bar per schema during setup. When stderr is not
//! a terminal the bars stay hidden and a line per finished schema is printed instead.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use dbio_core::dataset::{LoadObserver, SchemaOutcome};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct LoadBars {
    multi: MultiProgress,
    bars: Mutex<HashMap<String, ProgressBar>>,
    style: ProgressStyle,
}

impl LoadBars {
    pub fn new() -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let style = ProgressStyle::with_template(
            "{prefix:>10} [{bar:30}] {pos:>9}/{len:9} rows  {per_sec:>12}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        LoadBars {
            multi: MultiProgress::with_draw_target(target),
            bars: Mutex::new(HashMap::new()),
            style,
        }
    }

    fn with_bar(&self, schema: &str, f: impl FnOnce(&ProgressBar)) {
        if let Ok(bars) = self.bars.lock()
            && let Some(b) = bars.get(schema)
        {
            f(b);
        }
    }

    fn line(&self, text: &str) {
        self.multi.suspend(|| errln!("{text}"));
    }
}

impl LoadObserver for LoadBars {
    fn schema_started(&self, schema: &str, rows: u64) {
        let bar = self.multi.add(ProgressBar::new(rows));
        bar.set_style(self.style.clone());
        bar.set_prefix(schema.to_string());
        bar.set_message("copy");
        bar.enable_steady_tick(Duration::from_millis(250));
        if let Ok(mut bars) = self.bars.lock() {
            bars.insert(schema.to_string(), bar);
        }
    }

    fn rows_loaded(&self, schema: &str, rows: u64) {
        self.with_bar(schema, |b| b.inc(rows));
    }

    fn schema_phase(&self, schema: &str, phase: &str) {
        self.with_bar(schema, |b| b.set_message(phase.to_string()));
    }

    fn schema_finished(&self, schema: &str, o: &SchemaOutcome) {
        self.with_bar(schema, |b| b.finish_and_clear());
        let mib = o.table_bytes as f64 / (1 << 20) as f64;
        self.line(&format!(
            "{schema}: loaded {} rows ({mib:.1} MiB) in {:.1} s, {:.1} MiB/s",
            o.rows,
            o.seconds,
            if o.seconds > 0.0 {
                mib / o.seconds
            } else {
                0.0
            }
        ));
    }

    fn note(&self, text: &str) {
        self.line(text);
    }
}
