//! Command-line arguments. Every flag overrides the same key of the YAML config; the help of
//! each flag names that key.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use dbio_calibrate::Engine as IoEngine;
use dbio_core::Config;
use dbio_core::config::{
    Arrival, CapacityMetric, OnError, OnStepFailure, Rate, ReadPath, RedoStress, SearchOver,
    SessionEngine, SessionLoop, Slo, Snapshots, SteadyRule,
};
use dbio_core::units::{Dur, SizeSpec};

const ABOUT: &str = "SLOB-method database physical-I/O benchmark driver";

const LONG_ABOUT: &str =
    "dbio builds per-user tables much larger than the buffer cache (one row per \
block, keys in random physical order, an index on the key), drives reader and writer sessions \
against them, and reports what the storage under the database delivers.

Connection: --dsn (libpq key=value string or postgresql:// URL, every libpq keyword: host lists, \
sslmode, sslrootcert, options, target_session_attrs, service, ...), the PG* environment variables \
(PGHOST, PGPORT, PGUSER, PGPASSWORD, PGSSLMODE, PGSERVICE, ...), pg_service.conf and ~/.pgpass, \
and target.dsn in the config file. Precedence per setting: flag > environment > config file > \
default. sslmode defaults to prefer, as in libpq.

Sizes take units (64MB, 2GiB, 8192blocks; MB and MiB both mean 1024^2 as in PostgreSQL); \
durations take units (500ms, 30s, 5m).

Exit codes: 0 ok; 1 the work or a check failed; 2 bad usage, bad config or unreachable target.";

#[derive(Debug, Parser)]
#[command(name = "dbio", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Silent but for errors: no progress, notes or report (the result files are still
    /// written; --format json still prints the document).
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build the data set: N schemas of one-row-per-block tables, loaded with binary COPY.
    ///
    /// Schemas <prefix>1..<prefix>N each get table cf1 (bigint key custid, filler columns,
    /// fillfactor 10 so one row fills one 8 kB block) and index i_cf1; keys are stored in a
    /// random physical order. After the load: VACUUM (FREEZE, ANALYZE) and CHECKPOINT. A
    /// complete data set is kept as it is unless --force. An interrupted or failed load leaves
    /// its schema marked incomplete; the next setup rebuilds it.
    Setup {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        data: DataArgs,
        #[command(flatten)]
        load: LoadArgs,
        /// Rebuild dbio's schemas even when they are complete (never touches other objects).
        #[arg(long)]
        force: bool,
        /// When rebuilding, also drop the objects you made on dbio's tables (an index, a
        /// trigger, a view on cf1); without it they stop setup before anything changes.
        #[arg(long)]
        drop_dependents: bool,
    },

    /// Every dbio data set on the target: prefix, schemas, scale, the tablespace its tables
    /// are really in, state, size, when it was loaded and by which dbio version.
    List {
        #[command(flatten)]
        common: CommonArgs,
        /// text, or json (one object per data set)
        #[arg(long, value_name = "FORMAT", value_enum, default_value_t = Format::Text)]
        format: Format,
    },

    /// Verify the data set: rows = scale, one row per block, index valid and used, vacuumed
    /// and analyzed, load complete. One line per schema; exit 1 on any mismatch.
    Check {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        data: DataArgs,
    },

    /// Drop one data set: the schemas whose dbio mark names --prefix (only objects dbio marked
    /// as its own). Without --yes, list what would be dropped and exit 1. Objects you made on
    /// dbio's tables (an index, a trigger, a view on cf1) stop it unless --drop-dependents; a
    /// schema holding other objects of yours stays, without dbio's mark.
    Teardown {
        #[command(flatten)]
        common: CommonArgs,
        /// Schema name prefix [config: data.prefix]
        #[arg(long, value_name = "NAME")]
        prefix: Option<String>,
        /// Really drop.
        #[arg(long)]
        yes: bool,
        /// Also drop the objects you made on dbio's tables (DROP TABLE ... CASCADE).
        #[arg(long)]
        drop_dependents: bool,
    },

    /// Drive reader and writer sessions against the data set and measure them.
    ///
    /// R readers (each mixing in updates at --update-pct) and W writers, one connection each
    /// (application_name dbio-reader-<n> / dbio-writer-<n>), mapped to the schemas
    /// round-robin. All connect and prepare first (32 at a time), then start together; the
    /// window is --run-time, or --work-loop operations per session. Writes result.json and
    /// report.txt to --out (default results/<UTC timestamp>-<label>/). Ctrl-C stops the sessions,
    /// cancels their statements and writes the result with status `interrupted`.
    Run {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        data: DataArgs,
        #[command(flatten)]
        sessions: SessionArgs,
        #[command(flatten)]
        run: Box<RunArgs>,
        #[command(flatten)]
        record: crate::cmd::history::RecordArgs,
    },

    /// Run the same workload over a list of reader counts (and optionally writer counts or
    /// update percentages), --repeat times per step.
    ///
    /// Each step is a full `dbio run` with its own result folder under --out (default
    /// results/<UTC timestamp>-<label>/). The ramp writes ramp.json (every step summarised,
    /// self-contained for compare and regress), ramp.csv and ramp.txt (one line per step:
    /// readers, writers, elapsed, DB read and write IOPS, read latency, client p50/p99,
    /// device reads, top wait), iops.svg, latency.svg, latency-vs-iops.svg and report.html.
    Ramp {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        data: DataArgs,
        #[command(flatten)]
        ramp: RampArgs,
        #[command(flatten)]
        run: Box<RunArgs>,
        #[command(flatten)]
        record: crate::cmd::history::RecordArgs,
    },

    /// Find the highest read IOPS (or device IOPS, or operations/s) that meets a latency
    /// target: `dbio capacity --slo 'p99<=2ms'`.
    ///
    /// A ramp whose steps a search chooses: the reader sessions double from --start-sessions
    /// until a step misses the target, then the search bisects between the last step that
    /// met it and the first that missed, until the figure at the two ends differs by at most
    /// --resolution or the bracket cannot be split; each step is a full measured window (with
    /// --steady, one that opens at steady state). The answer's step then runs --repeat times
    /// in all: the spread of its runs is the answer's interval. --search rate searches the
    /// open-loop rate over --readers sessions instead. Writes the ramp's files (ramp.json with
    /// the answer in `capacity`, ramp.txt opening with it, capacity.svg: latency against the
    /// figure with the target drawn). Exit 0 with an answer, 1 when no step met the target
    /// (the best one is named) or a step failed.
    Capacity {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        data: DataArgs,
        #[command(flatten)]
        capacity: CapacityArgs,
        #[command(flatten)]
        run: Box<RunArgs>,
        #[command(flatten)]
        record: crate::cmd::history::RecordArgs,
    },

    /// Put runs or ramps side by side: key figures, % changes against the first input, and
    /// whether each difference is significant, naming the test.
    ///
    /// Inputs are result.json or ramp.json files (or folders holding one). Ramp steps are
    /// matched by readers, writers and update_pct. Throughput: Welch's t-test on per-interval
    /// throughput, autocorrelation-corrected; latency: Mann-Whitney U on the HDR
    /// distributions; database figures: Welch's t-test on repeat values (ramp --repeat 2+).
    Compare {
        /// Two or more result.json / ramp.json files; the first is the reference.
        #[arg(value_name = "RESULT", num_args = 2.., required = true)]
        inputs: Vec<PathBuf>,
        /// Output format on stdout.
        #[arg(long, value_name = "FORMAT", value_enum, default_value_t = CompareFormat::Text)]
        format: CompareFormat,
        /// Also write compare.txt, compare.csv and compare.html into this folder.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },

    /// Gate on performance: exit 1 when CURRENT falls short of BASELINE beyond the
    /// thresholds (per step), 0 otherwise.
    ///
    /// Checks DB read IOPS and client ops/s for drops, DB read latency and client read p99
    /// for rises; a baseline step missing from CURRENT is a regression.
    Regress {
        /// The baseline result.json or ramp.json.
        #[arg(long, value_name = "BASE")]
        baseline: PathBuf,
        /// The result.json or ramp.json to check.
        #[arg(value_name = "CURRENT")]
        current: PathBuf,
        /// Config file for the thresholds (regress: section).
        #[arg(short = 'c', long = "config", value_name = "FILE")]
        config: Option<PathBuf>,
        /// Largest allowed drop of IOPS, % or `off` [config: regress.max_iops_drop_pct; default 10]
        #[arg(long, value_name = "PCT")]
        max_iops_drop: Option<dbio_core::report::regress::Threshold>,
        /// Largest allowed rise of latency, % or `off` (gate on throughput alone, e.g. on a
        /// shared, noisy system) [config: regress.max_latency_rise_pct; default 20]
        #[arg(long, value_name = "PCT")]
        max_latency_rise: Option<dbio_core::report::regress::Threshold>,
        /// Write JUnit XML for CI systems.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Facts that may differ between BASE and CURRENT (e.g. `work_unit,server_major`);
        /// any other difference in what they measure is refused with exit 2.
        #[arg(long, value_name = "FACT", value_delimiter = ',')]
        accept_difference: Vec<String>,
        /// What stdout gets: text, or json (every checked figure with its verdict).
        #[arg(long, value_name = "FORMAT", value_enum, default_value_t = Format::Text)]
        format: Format,
    },

    /// The results store: record runs and ramps, list and show them, check each series'
    /// newest runs for change points over its history, and chart the trends.
    ///
    /// Store: results/history.sqlite (SQLite), or --store postgresql://... for a team; one
    /// schema with versioned migrations, documented in docs/REGRESSION.md.
    History {
        #[command(subcommand)]
        action: crate::cmd::history::HistoryAction,
    },

    /// Combine the results of one run's shards (several `dbio run` processes) into one
    /// result: operation counts, rates and HDR histograms added exactly, the collector's
    /// figures kept; results of different runs or shapes, or whose windows do not overlap,
    /// are refused.
    Merge(crate::cmd::merge::MergeArgs),

    /// The nightly performance gate: a PostgreSQL to measure, `setup`, the ramp recorded in
    /// the results store, then `history check` (exit 0 ok, 1 regression or failed ramp, 2 bad
    /// input or a server that did not start).
    ///
    /// The server: --dsn; or with --container podman|docker a fresh container (image, port,
    /// shared_buffers, memory cap and settings from the config's container: section; the
    /// host's network, 127.0.0.1 only; a volume of its own for the data; removed with its
    /// volumes at the end, its log kept as server.log in the night's folder; a server that
    /// does not come up is exit 2 with its last log lines); else a scratch cluster. Each
    /// night's files go to RESULTS/<UTC timestamp>/ (ramp files and junit.xml), recorded in
    /// the store. scripts/nightly.sh calls it.
    Nightly(crate::cmd::nightly::NightlyArgs),

    /// Re-render a result.json or a ramp.json (or a folder holding one): text (report.txt or
    /// ramp.txt), json (the document), csv (the awr_info line of a run; ramp.csv of a ramp)
    /// or html (a ramp's report.html, charts inline).
    Report {
        /// A result.json from `dbio run`, a ramp.json from `dbio ramp`, or their folder.
        #[arg(value_name = "RESULT")]
        result: PathBuf,
        /// Output format.
        #[arg(long, value_name = "FORMAT", value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },

    /// Measure the raw device (Orion-style): small random I/O IOPS and latency and large
    /// I/O MB/s at each load level, O_DIRECT, without a database.
    ///
    /// Writes summary.txt ("Maximum Small IOPS=N @ Small=L", ...), iops.csv, mbps.csv,
    /// lat.csv, calibrate.json (with the HDR histograms) and iops.svg, latency.svg, mbps.svg
    /// to --out (default results/<UTC timestamp>-calibrate/). Give calibrate.json to `run` or
    /// `ramp` with --calibration to see database and device side by side.
    Calibrate {
        /// File or block device to measure.
        #[arg(long, value_name = "FILE|DEVICE")]
        path: PathBuf,
        /// Size to create, or how much of the file or device to use.
        #[arg(long, value_name = "SIZE")]
        size: Option<SizeSpec>,
        /// Create a new file with real (non-sparse) data first; needs --size. Never replaces a
        /// file: an existing one is refused, unless it is a calibration file dbio created,
        /// which is used as it is.
        #[arg(long)]
        create: bool,
        /// Small I/O size.
        #[arg(long, value_name = "SIZE", default_value = "8kB")]
        block: SizeSpec,
        /// Large I/O size.
        #[arg(long, value_name = "SIZE", default_value = "1MB")]
        large: SizeSpec,
        /// Load levels: outstanding I/Os.
        #[arg(
            long,
            value_name = "LIST",
            value_delimiter = ',',
            default_value = "1,2,4,8,16,32"
        )]
        levels: Vec<u32>,
        /// Time per point.
        #[arg(long, value_name = "DUR", default_value = "10s")]
        duration: Dur,
        /// Percent of small I/Os that are writes (default none).
        #[arg(long, value_name = "P", default_value = "0")]
        write_pct: u32,
        /// Allow writes (--write-pct) to a block device or to a file that `--create` did not
        /// make, destroying its data. Without it only dbio's own calibration file takes writes.
        #[arg(long)]
        destroy_data: bool,
        /// I/O engine: psync (one thread per outstanding I/O, pread/pwrite) or io_uring (one
        /// thread keeping the I/Os in flight).
        #[arg(long, value_name = "ENGINE", value_enum, default_value_t = IoEngineArg::Psync)]
        engine: IoEngineArg,
        /// Result folder, new or empty (default results/<UTC timestamp>-calibrate/).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Write into a result folder that already holds files, replacing those of the same name.
        #[arg(long)]
        overwrite: bool,
        #[command(flatten)]
        record: crate::cmd::history::RecordArgs,
    },

    /// Print the effective configuration with the source of every value (flag, environment,
    /// file, default), or one value, or the whole as YAML.
    ///
    /// Give a command line after the options to see what that command would run with:
    /// `dbio config ramp -c my.yaml --run-time 2s`.
    Config {
        /// YAML config file.
        #[arg(short = 'c', long = "config", value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print only this dotted key's value, e.g. run.readers or container.image.
        #[arg(long, value_name = "KEY")]
        get: Option<String>,
        /// Print the effective configuration as YAML (parses back as a config file).
        #[arg(long)]
        yaml: bool,
        /// A setup, check, run or ramp command line, e.g. `ramp -c my.yaml --readers 1,2`.
        #[arg(
            value_name = "COMMAND",
            trailing_var_arg = true,
            allow_hyphen_values = true
        )]
        command: Vec<String>,
    },

    /// Print a shell completion script: `dbio completions bash > /etc/bash_completion.d/dbio`,
    /// zsh: into a folder of $fpath as _dbio, fish: ~/.config/fish/completions/dbio.fish.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },

    /// Print the manual page (roff) of dbio, or with --out write dbio.1 and one
    /// dbio-<command>.1 per command into a folder: `dbio man | man -l -`.
    Man {
        /// Folder for dbio.1 and dbio-<command>.1.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },

    /// Manage a throwaway local PostgreSQL cluster (initdb + pg_ctl).
    Scratch {
        #[command(subcommand)]
        action: ScratchAction,
    },

    /// Start a scratch PostgreSQL, load a small data set larger than its buffer cache, check it,
    /// run 2 readers and 1 writer for 10 s, then ramp 1, 2 and 4 readers (5 s each) and print
    /// the path of the ramp's report.html (settings: configs/quickstart.yaml when given).
    Quickstart {
        /// Config file for the data set (target.dsn is ignored: the scratch cluster is used).
        #[arg(short = 'c', long = "config", value_name = "FILE")]
        config: Option<PathBuf>,
        #[command(flatten)]
        scratch: ScratchArgs,
        /// Leave the scratch server running at the end (default: stop it, keep its files).
        #[arg(long)]
        keep: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScratchAction {
    /// initdb (when the folder holds no cluster) and start the server on 127.0.0.1.
    Start {
        #[command(flatten)]
        scratch: ScratchArgs,
    },
    /// Stop the server cleanly (fast shutdown); the files stay.
    Stop {
        /// Folder of the cluster.
        #[arg(long, value_name = "DIR", default_value = ".dbio/scratch")]
        dir: PathBuf,
    },
    /// Print the PG* variables that point psql, pgbench and dbio at the cluster:
    /// `eval "$(dbio scratch env)"`; exit 1 when the server is not running.
    Env {
        /// Folder of the cluster.
        #[arg(long, value_name = "DIR", default_value = ".dbio/scratch")]
        dir: PathBuf,
    },
    /// Say whether the server runs and print the DSN to use.
    Status {
        /// Folder of the cluster.
        #[arg(long, value_name = "DIR", default_value = ".dbio/scratch")]
        dir: PathBuf,
        /// Print only the DSN (for scripts); exit 1 when the server is not running.
        #[arg(long)]
        dsn_only: bool,
    },
}

#[derive(Debug, Args, Clone)]
pub struct ScratchArgs {
    /// Folder of the cluster: data/, server.log, scratch.json.
    #[arg(long, value_name = "DIR", default_value = ".dbio/scratch")]
    pub dir: PathBuf,
    /// Port on 127.0.0.1 (default: a free one).
    #[arg(long, value_name = "P")]
    pub port: Option<u16>,
    /// shared_buffers of the server.
    #[arg(long, value_name = "SIZE", default_value = "32MB")]
    pub shared_buffers: SizeSpec,
    /// Folder with initdb, pg_ctl and postgres (default: $DBIO_PG_BIN, pg_config --bindir,
    /// the highest /usr/lib/postgresql/*/bin, then PATH).
    #[arg(long, value_name = "DIR")]
    pub pg_bin: Option<PathBuf>,
    /// Extra server setting, repeatable: --set debug_io_direct=data
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub settings: Vec<String>,
    /// Make every read that misses shared_buffers a device read: debug_io_direct=data
    /// (O_DIRECT on data files; PostgreSQL 16+). PostgreSQL documents it as a developer
    /// option that reduces performance; it is here so a scratch cluster measures storage,
    /// not the OS page cache. Needs a file system with O_DIRECT (not tmpfs).
    #[arg(long)]
    pub direct_io: bool,
}

/// The run keys; each flag names the config key it overrides.
#[derive(Debug, Args, Clone, Default)]
pub struct RunArgs {
    /// Where the operation loop runs: client (dbio times every round trip) or server (one
    /// procedure per session loops inside the database, as SLOB and pgio do; coarse latency)
    /// [config: run.engine; default client]
    #[arg(long, value_name = "ENGINE", value_enum)]
    pub engine: Option<SessionLoopArg>,
    /// How the client loop's sessions map to OS threads: threads (one per session), events
    /// (an event loop per core over non-blocking sockets) or auto (threads below 16
    /// sessions, events from 16; threads for run.rate and run.steady/precondition)
    /// [config: run.session_engine; default auto]
    #[arg(long, value_name = "ENGINE", value_enum)]
    pub session_engine: Option<SessionEngineArg>,
    /// Length of the measured window [config: run.run_time; default 30s]
    #[arg(long, value_name = "DUR", conflicts_with = "work_loop")]
    pub run_time: Option<Dur>,
    /// Operations per session instead of a time window [config: run.work_loop]
    #[arg(long, value_name = "N")]
    pub work_loop: Option<u64>,
    /// Keys (= blocks) per read [config: run.work_unit; default 64]
    #[arg(long, value_name = "N")]
    pub work_unit: Option<u64>,
    /// Keys (= blocks) per update [config: run.update_work_unit; default 8]
    #[arg(long, value_name = "N")]
    pub update_work_unit: Option<u64>,
    /// Update one filler column (lite) or all (heavy) [config: run.redo_stress; default lite]
    #[arg(long, value_name = "MODE", value_enum)]
    pub redo_stress: Option<RedoStressArg>,
    /// The reader's plan: index (an Index Scan, one synchronous block read at a time per
    /// session, the SLOB method) or bitmap (a Bitmap Heap Scan, the server prefetches up to
    /// effective_io_concurrency blocks) [config: run.read_path; default index]
    #[arg(long, value_name = "PATH", value_enum)]
    pub read_path: Option<ReadPathArg>,
    /// Id the run holds its data set under: the shards of one coordinated run pass the same
    /// id (each with its --shard) and share the data set; another run is refused while one
    /// holds it, and so is a second run under the same id without --shard [config:
    /// run.run_id; default a fresh id per run]
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Run shard I (0-based) of N of one run driven by several dbio processes: every N-th
    /// session from the I-th; the collector runs in shard 0 (or --collector-shard); `dbio
    /// merge` combines the shards' results. Needs the same --run-id on every shard [config:
    /// run.shard]
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// The shard that runs the collector (the database's figures), the same on every shard
    /// [config: run.collector_shard; default 0]
    #[arg(long, value_name = "I")]
    pub collector_shard: Option<u32>,
    /// Release the sessions at this UTC instant (RFC 3339, e.g. 2026-12-01T02:00:00Z) once
    /// connected and prepared, so the shards start together; refused when this host's clock
    /// and the server's differ by more than 0.5 s [config: run.start_at]
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// All sessions on the first schema [config: run.hot_schema]
    #[arg(long)]
    pub hot_schema: bool,
    /// Seed of the sessions' key sequences [config: run.seed; default 1]
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Unmeasured warm-up before the window [config: run.warmup; default 0s]
    #[arg(long, value_name = "DUR")]
    pub warmup: Option<Dur>,
    /// Progress line period on stderr, 0s for none [config: run.progress; default 5s]
    #[arg(long, value_name = "DUR")]
    pub progress: Option<Dur>,
    /// Time-series interval [config: run.interval; default 1s]
    #[arg(long, value_name = "DUR")]
    pub interval: Option<Dur>,
    /// On a session error: abort the run, or continue and count [config: run.on_error; default abort]
    #[arg(long, value_name = "POLICY", value_enum)]
    pub on_error: Option<OnErrorArg>,
    /// Do not VACUUM tables changed since their last VACUUM before the window [config: run.vacuum = false]
    #[arg(long)]
    pub no_vacuum: bool,
    /// Sync and drop the OS page cache before the window (server on this host; root) [config: collector.drop_caches]
    #[arg(long)]
    pub drop_caches: bool,
    /// Wait-sampler period [config: collector.sample_period; default 100ms]
    #[arg(long, value_name = "DUR")]
    pub sample_period: Option<Dur>,
    /// Oracle: repository snapshots around the window, SLOB's DATABASE_STATISTICS_TYPE: awr
    /// (where the Diagnostics Pack is enabled; else refused with the reason, and Statspack
    /// taken when installed), statspack, auto or none [config: collector.snapshots; default none]
    #[arg(long, value_name = "KIND", value_enum)]
    pub snapshots: Option<SnapshotsArg>,
    /// Open the window only once the per-interval figure is steady: iops_slope<=2%:10s (the
    /// least-squares slope of operations/s over the last 10 s, per second, at most 2% of its
    /// mean; as fio's steadystate) or lat_slope<=5%:10s (mean latency), judged after
    /// --warmup, for at most --steady-max; the result says when, or "not steady" [config:
    /// run.steady]
    #[arg(long, value_name = "RULE")]
    pub steady: Option<SteadyRule>,
    /// The longest the window waits for --steady (and --precondition for its rule) [config:
    /// run.steady_max; default 5m]
    #[arg(long, value_name = "DUR")]
    pub steady_max: Option<Dur>,
    /// Write workloads: before the window every session runs updates until their rate is
    /// steady (iops_slope<=5%:10s, or the rule given), at most --steady-max, so the
    /// storage's garbage collection happens before the measurement [config: run.precondition]
    #[arg(long, value_name = "RULE", num_args = 0..=1, default_missing_value = "iops_slope<=5%:10s")]
    pub precondition: Option<SteadyRule>,
    /// Open loop: start operations at this rate across the sessions, 5000/s, whatever the
    /// answers; latency counts from each one's intended start (the lag and the starts missed
    /// are reported) [config: run.rate; default: closed loop]
    #[arg(long, value_name = "RATE")]
    pub rate: Option<Rate>,
    /// Spacing of an open loop's starts: fixed (evenly) or poisson (exponential gaps)
    /// [config: run.arrival; default fixed]
    #[arg(long, value_name = "PROCESS", value_enum)]
    pub arrival: Option<ArrivalArg>,
    /// calibrate.json from `dbio calibrate`: show the raw device's IOPS and latency at the same load [config: run.calibration]
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Result folder, new or empty [config: run.out; default results/<UTC timestamp>-<label>/]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write into a result folder that already holds files, replacing those of the same name [config: run.overwrite]
    #[arg(long)]
    pub overwrite: bool,
    /// Label of the run, in the result and the folder name [config: run.label]
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// What stdout gets: text (the report or the ramp's table) or json (result.json or
    /// ramp.json; the files are written either way)
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// A flag over one of core's enums: the flag's own enum derives clap's `ValueEnum` (core
/// does not depend on clap) and converts into core's. Its spellings are core's serde names
/// (snake_case), so a flag takes what the config file takes; the test
/// `every_flag_spelling_is_the_config_spelling` holds them together. No variant carries a
/// doc comment: clap would list the values one per line in `--help` instead of in one line.
macro_rules! core_flag {
    ($(#[$doc:meta])* $name:ident => $core:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
        #[value(rename_all = "snake_case")]
        pub enum $name {
            $($variant),+
        }

        impl From<$name> for $core {
            fn from(v: $name) -> $core {
                match v {
                    $($name::$variant => $core::$variant),+
                }
            }
        }
    };
}

core_flag! {
    /// `--engine` of run, ramp and capacity: where the operation loop runs.
    SessionLoopArg => SessionLoop { Client, Server }
}

core_flag! {
    /// `--session-engine` of run, ramp and capacity: how sessions map to OS threads.
    SessionEngineArg => SessionEngine { Auto, Threads, Events }
}

core_flag! {
    /// `--redo-stress`.
    RedoStressArg => RedoStress { Lite, Heavy }
}

core_flag! {
    /// `--read-path`.
    ReadPathArg => ReadPath { Index, Bitmap }
}

core_flag! {
    /// `--on-error`.
    OnErrorArg => OnError { Abort, Continue }
}

core_flag! {
    /// `--snapshots` (Oracle).
    SnapshotsArg => Snapshots { None, Awr, Statspack, Auto }
}

core_flag! {
    /// `--on-step-failure` of ramp and capacity.
    OnStepFailureArg => OnStepFailure { Stop, Continue }
}

core_flag! {
    /// `--arrival`.
    ArrivalArg => Arrival { Fixed, Poisson }
}

core_flag! {
    /// `--metric` of capacity.
    MetricArg => CapacityMetric { DbReadIops, DeviceIops, Ops }
}

core_flag! {
    /// `--search` of capacity.
    SearchArg => SearchOver { Sessions, Rate }
}

core_flag! {
    /// `--engine` of calibrate: the I/O engine.
    IoEngineArg => IoEngine { Psync, IoUring }
}

/// The target and the search of `dbio capacity`, and its fixed session counts.
#[derive(Debug, Args, Clone, Default)]
pub struct CapacityArgs {
    /// The latency target every step is judged against: p99<=2ms, p95<=500us, p99.9<=10ms,
    /// avg<=1ms (client read latency), db.avg<=5ms (the database's own average block-read
    /// time) [config: capacity.slo]
    #[arg(long, value_name = "TARGET")]
    pub slo: Option<Slo>,
    /// The figure the answer is given in: db_read_iops (the database's reads that missed its
    /// cache), device_iops (the device under the data), ops (dbio's operations) [config:
    /// capacity.metric; default db_read_iops]
    #[arg(long, value_name = "METRIC", value_enum)]
    pub metric: Option<MetricArg>,
    /// What the search varies: sessions (the readers) or rate (the open-loop rate over
    /// --readers sessions) [config: capacity.search; default sessions]
    #[arg(long, value_name = "WHAT", value_enum)]
    pub search: Option<SearchArg>,
    /// Readers of the first step of a session search [config: capacity.start_sessions;
    /// default 1]
    #[arg(long, value_name = "N")]
    pub start_sessions: Option<u32>,
    /// The most readers a session search tries [config: capacity.max_sessions; default 256]
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<u32>,
    /// The first rate of a rate search [config: capacity.start_rate; default --rate, else 100/s]
    #[arg(long, value_name = "RATE")]
    pub start_rate: Option<Rate>,
    /// The highest rate a rate search tries [config: capacity.max_rate; default 1000000/s]
    #[arg(long, value_name = "RATE")]
    pub max_rate: Option<Rate>,
    /// Runs at the answer in all, the search's own included: their spread is the answer's
    /// interval [config: capacity.repeat; default 3]
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Stop bisecting when the figures at the bracket's ends differ by at most this percent
    /// [config: capacity.resolution_pct; default 5]
    #[arg(long, value_name = "PCT")]
    pub resolution: Option<f64>,
    /// Reader sessions of a rate search (the pool the rate is spread over) [config:
    /// run.readers; default 1]
    #[arg(long, value_name = "N")]
    pub readers: Option<u32>,
    /// Writer sessions of every step, update only [config: run.writers; default 0]
    #[arg(long, value_name = "N")]
    pub writers: Option<u32>,
    /// Percent of each reader's operations that are updates, 0-100 [config: run.update_pct;
    /// default 0]
    #[arg(long, value_name = "P")]
    pub update_pct: Option<u32>,
}

impl CapacityArgs {
    pub fn apply(&self, c: &mut Config) {
        let k = &mut c.capacity;
        if let Some(v) = self.slo {
            k.slo = Some(v);
        }
        if let Some(v) = self.metric {
            k.metric = v.into();
        }
        if let Some(v) = self.search {
            k.search = v.into();
        }
        if let Some(v) = self.start_sessions {
            k.start_sessions = v;
        }
        if let Some(v) = self.max_sessions {
            k.max_sessions = v;
        }
        if let Some(v) = self.start_rate {
            k.start_rate = Some(v);
        }
        if let Some(v) = self.max_rate {
            k.max_rate = v;
        }
        if let Some(v) = self.repeat {
            k.repeat = v;
        }
        if let Some(v) = self.resolution {
            k.resolution_pct = v;
        }
        if let Some(v) = self.readers {
            c.run.readers = v;
        }
        if let Some(v) = self.writers {
            c.run.writers = v;
        }
        if let Some(v) = self.update_pct {
            c.run.update_pct = v;
        }
    }
}

/// Output format of run, ramp and regress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
}

/// `--format` of `dbio report` (the values in this order in its help).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
    Csv,
    Html,
}

/// `--format` of `dbio compare` (the values in this order in its help).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    Text,
    Csv,
    Html,
    Json,
}

/// The session counts of one run.
#[derive(Debug, Args, Clone, Default)]
pub struct SessionArgs {
    /// Reader sessions [config: run.readers; default 1]
    #[arg(long, value_name = "N")]
    pub readers: Option<u32>,
    /// Writer sessions, update only [config: run.writers; default 0]
    #[arg(long, value_name = "N")]
    pub writers: Option<u32>,
    /// Percent of each reader's operations that are updates, 0-100 [config: run.update_pct; default 0]
    #[arg(long, value_name = "P")]
    pub update_pct: Option<u32>,
    /// Readers per target with --dsn repeated, in order: 3,1 (their sum is the run's
    /// readers) [config: target.readers; default: --readers spread round-robin]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub target_readers: Option<Vec<u32>>,
    /// Writers per target, as --target-readers [config: target.writers]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub target_writers: Option<Vec<u32>>,
}

impl SessionArgs {
    pub fn apply(&self, c: &mut Config) {
        if let Some(v) = self.readers {
            c.run.readers = v;
        }
        if let Some(v) = self.writers {
            c.run.writers = v;
        }
        // Per-target counts set the totals, unless --readers/--writers say them too (then
        // validation names both when they disagree).
        if let Some(v) = &self.target_readers {
            c.target.readers = v.clone();
            if self.readers.is_none() {
                c.run.readers = dbio_core::config::saturating_sum(v);
            }
        }
        if let Some(v) = &self.target_writers {
            c.target.writers = v.clone();
            if self.writers.is_none() {
                c.run.writers = dbio_core::config::saturating_sum(v);
            }
        }
        if let Some(v) = self.update_pct {
            c.run.update_pct = v;
        }
    }
}

/// The steps of a ramp.
#[derive(Debug, Args, Clone, Default)]
pub struct RampArgs {
    /// Reader counts, one step each: 1,2,4,8 [config: ramp.readers; default 1,2,4,8]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub readers: Option<Vec<u32>>,
    /// Writer counts (each crossed with every reader count) [config: ramp.writers; default run.writers]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub writers: Option<Vec<u32>>,
    /// Update percentages (each crossed with the rest) [config: ramp.update_pct; default run.update_pct]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub update_pct: Option<Vec<u32>>,
    /// Runs per step (mean, sd and cv across them) [config: ramp.repeat; default 1]
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// After a failed step: stop or continue [config: ramp.on_step_failure; default stop]
    #[arg(long, value_name = "POLICY", value_enum)]
    pub on_step_failure: Option<OnStepFailureArg>,
}

impl RampArgs {
    pub fn apply(&self, c: &mut Config) {
        if let Some(v) = &self.readers {
            c.ramp.readers = v.clone();
        }
        if let Some(v) = &self.writers {
            c.ramp.writers = Some(v.clone());
        }
        if let Some(v) = &self.update_pct {
            c.ramp.update_pct = Some(v.clone());
        }
        if let Some(v) = self.repeat {
            c.ramp.repeat = v;
        }
        if let Some(v) = self.on_step_failure {
            c.ramp.on_step_failure = v.into();
        }
    }
}

impl RunArgs {
    pub fn apply(&self, c: &mut Config) {
        if self.drop_caches {
            c.collector.drop_caches = true;
        }
        if let Some(v) = self.sample_period {
            c.collector.sample_period = v;
        }
        if let Some(v) = self.snapshots {
            c.collector.snapshots = v.into();
        }
        let r = &mut c.run;
        if let Some(v) = self.engine {
            r.engine = v.into();
        }
        if let Some(v) = self.session_engine {
            r.session_engine = v.into();
        }
        if let Some(v) = self.run_time {
            r.run_time = v;
            r.work_loop = 0;
        }
        if let Some(v) = self.work_loop {
            r.work_loop = v;
        }
        if let Some(v) = self.work_unit {
            r.work_unit = v;
        }
        if let Some(v) = self.update_work_unit {
            r.update_work_unit = v;
        }
        if let Some(v) = self.redo_stress {
            r.redo_stress = v.into();
        }
        if let Some(v) = self.read_path {
            r.read_path = v.into();
        }
        if let Some(v) = &self.run_id {
            r.run_id = Some(v.clone());
        }
        if let Some(v) = &self.shard {
            r.shard = Some(v.clone());
        }
        if let Some(v) = self.collector_shard {
            r.collector_shard = v;
        }
        if let Some(v) = &self.start_at {
            r.start_at = Some(v.clone());
        }
        if self.hot_schema {
            r.hot_schema = true;
        }
        if let Some(v) = self.seed {
            r.seed = v;
        }
        if let Some(v) = self.warmup {
            r.warmup = v;
        }
        if let Some(v) = self.progress {
            r.progress = v;
        }
        if let Some(v) = self.interval {
            r.interval = v;
        }
        if let Some(v) = self.on_error {
            r.on_error = v.into();
        }
        if self.no_vacuum {
            r.vacuum = false;
        }
        if let Some(v) = self.steady {
            r.steady = Some(v);
        }
        if let Some(v) = self.steady_max {
            r.steady_max = v;
        }
        if let Some(v) = self.precondition {
            r.precondition = Some(v);
        }
        if let Some(v) = self.rate {
            r.rate = Some(v);
        }
        if let Some(v) = self.arrival {
            r.arrival = v.into();
        }

        if let Some(v) = &self.calibration {
            r.calibration = Some(v.clone());
        }
        if let Some(v) = &self.out {
            r.out = Some(v.clone());
        }
        if self.overwrite {
            r.overwrite = true;
        }
        if let Some(v) = &self.label {
            r.label = Some(v.clone());
        }
    }
}

/// Options every command that talks to a database takes.
#[derive(Debug, Args, Clone, Default)]
pub struct CommonArgs {
    /// YAML config file (see configs/ and docs/configuration.md).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Connection string "host=H port=P user=U dbname=D" or postgresql://U@H:P/D [config:
    /// target.dsn; default: the scratch cluster running in .dbio/scratch, else libpq's
    /// defaults]. run and ramp take it repeated: several targets in one window [config:
    /// target.dsns]
    #[arg(long, value_name = "DSN", action = clap::ArgAction::Append)]
    pub dsn: Vec<String>,
    /// Give up connecting after this long [config: target.connect_timeout]
    #[arg(long, value_name = "DUR")]
    pub connect_timeout: Option<Dur>,
    /// Cancel a session's statement (lock waits included) after this long; 0s = never [config: target.statement_timeout]
    #[arg(long, value_name = "DUR")]
    pub statement_timeout: Option<Dur>,
}

/// The data-set keys shared by setup, check, run and ramp.
#[derive(Debug, Args, Clone, Default)]
pub struct DataArgs {
    /// Number of schemas [config: data.schemas; default 4]
    #[arg(long, value_name = "N")]
    pub schemas: Option<u32>,
    /// Size of each schema's table: 64MB, 2GiB or 8192blocks [config: data.scale; default 64MB]
    #[arg(long, value_name = "SIZE")]
    pub scale: Option<SizeSpec>,
    /// Schema name prefix [config: data.prefix; default user]
    #[arg(long, value_name = "NAME")]
    pub prefix: Option<String>,
    /// Tablespace of the tables and indexes (must exist); run and ramp read the device
    /// figures from where it lives [config: data.tablespace]
    #[arg(long, value_name = "T")]
    pub tablespace: Option<String>,
}

/// The keys only a load uses.
#[derive(Debug, Args, Clone, Default)]
pub struct LoadArgs {
    /// Schemas loaded at the same time [config: data.parallel; default 2]
    #[arg(long, value_name = "N")]
    pub parallel: Option<u32>,
    /// Seed of the physical key order [config: data.seed; default 1]
    #[arg(long, value_name = "N")]
    pub data_seed: Option<u64>,
}

impl LoadArgs {
    pub fn apply(&self, c: &mut Config) {
        if let Some(v) = self.parallel {
            c.data.parallel = v;
        }
        if let Some(v) = self.data_seed {
            c.data.seed = v;
        }
    }
}

impl CommonArgs {
    /// The one `--dsn` given, if exactly one was (several are `target.dsns`, see `apply`).
    pub fn one_dsn(&self) -> Option<&str> {
        match self.dsn.as_slice() {
            [one] => Some(one.as_str()),
            _ => None,
        }
    }

    /// Applies the flags to the config; one `--dsn` is kept apart because it merges per
    /// connection parameter with the environment (see `Target::resolve`); several replace
    /// the file's target.dsn/target.dsns as `target.dsns`.
    pub fn apply(&self, c: &mut Config) {
        if self.dsn.len() > 1 {
            // The file's per-target counts were for its own targets.
            c.target.dsns = self.dsn.clone();
            c.target.dsn = None;
            c.target.readers.clear();
            c.target.writers.clear();
        } else if !self.dsn.is_empty() {
            c.target.dsns.clear();
            c.target.readers.clear();
            c.target.writers.clear();
        }
        if let Some(t) = self.connect_timeout {
            c.target.connect_timeout = t;
        }
        if let Some(t) = self.statement_timeout {
            c.target.statement_timeout = t;
        }
    }
}

impl DataArgs {
    pub fn apply(&self, c: &mut Config) {
        let d = &mut c.data;
        if let Some(v) = self.schemas {
            d.schemas = v;
        }
        if let Some(v) = self.scale {
            d.scale = v;
        }
        if let Some(v) = &self.prefix {
            d.prefix = v.clone();
        }
        if let Some(v) = &self.tablespace {
            d.tablespace = Some(v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// The spellings of flag enum `A`, in the order its help lists them.
    fn spellings<A: ValueEnum>() -> Vec<String> {
        A::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value())
            .map(|p| p.get_name().to_string())
            .collect()
    }

    /// Every spelling of flag enum `A` parses in a config file as the core value the flag
    /// converts to.
    fn assert_config_spellings<A, C>() -> Vec<String>
    where
        A: ValueEnum + Into<C>,
        C: serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        for v in A::value_variants() {
            let name = v
                .to_possible_value()
                .expect("no value is skipped")
                .get_name()
                .to_string();
            let from_config: C = serde_json::from_value(serde_json::Value::String(name.clone()))
                .unwrap_or_else(|e| panic!("{name} is no config value: {e}"));
            assert_eq!(from_config, v.clone().into(), "{name}");
        }
        spellings::<A>()
    }

    #[test]
    fn every_flag_spelling_is_the_config_spelling() {
        assert_eq!(
            assert_config_spellings::<SessionLoopArg, SessionLoop>(),
            ["client", "server"]
        );
        assert_eq!(
            assert_config_spellings::<SessionEngineArg, SessionEngine>(),
            ["auto", "threads", "events"]
        );
        assert_eq!(
            assert_config_spellings::<RedoStressArg, RedoStress>(),
            ["lite", "heavy"]
        );
        assert_eq!(
            assert_config_spellings::<ReadPathArg, ReadPath>(),
            ["index", "bitmap"]
        );
        assert_eq!(
            assert_config_spellings::<OnErrorArg, OnError>(),
            ["abort", "continue"]
        );
        assert_eq!(
            assert_config_spellings::<SnapshotsArg, Snapshots>(),
            ["none", "awr", "statspack", "auto"]
        );
        assert_eq!(
            assert_config_spellings::<OnStepFailureArg, OnStepFailure>(),
            ["stop", "continue"]
        );
        assert_eq!(
            assert_config_spellings::<ArrivalArg, Arrival>(),
            ["fixed", "poisson"]
        );
        assert_eq!(
            assert_config_spellings::<MetricArg, CapacityMetric>(),
            ["db_read_iops", "device_iops", "ops"]
        );
        assert_eq!(
            assert_config_spellings::<SearchArg, SearchOver>(),
            ["sessions", "rate"]
        );
        assert_eq!(
            assert_config_spellings::<IoEngineArg, IoEngine>(),
            ["psync", "io_uring"]
        );
    }

    #[test]
    fn format_flags_list_their_values_in_the_documented_order() {
        assert_eq!(spellings::<Format>(), ["text", "json"]);
        assert_eq!(spellings::<ReportFormat>(), ["text", "json", "csv", "html"]);
        assert_eq!(
            spellings::<CompareFormat>(),
            ["text", "csv", "html", "json"]
        );
    }

    #[test]
    fn flags_set_the_core_values() {
        let cli = Cli::try_parse_from([
            "dbio",
            "run",
            "--engine",
            "server",
            "--redo-stress",
            "heavy",
            "--read-path",
            "bitmap",
            "--on-error",
            "continue",
            "--snapshots",
            "statspack",
            "--arrival",
            "poisson",
        ])
        .expect("a valid command line");
        let Command::Run { run, .. } = cli.command else {
            panic!("parsed as another command");
        };
        let mut c = Config::default();
        run.apply(&mut c);
        assert_eq!(c.run.engine, SessionLoop::Server);
        assert_eq!(c.run.redo_stress, RedoStress::Heavy);
        assert_eq!(c.run.read_path, ReadPath::Bitmap);
        assert_eq!(c.run.on_error, OnError::Continue);
        assert_eq!(c.collector.snapshots, Snapshots::Statspack);
        assert_eq!(c.run.arrival, Arrival::Poisson);

        let cli = Cli::try_parse_from(["dbio", "ramp", "--on-step-failure", "continue"])
            .expect("a valid command line");
        let Command::Ramp { ramp, .. } = cli.command else {
            panic!("parsed as another command");
        };
        ramp.apply(&mut c);
        assert_eq!(c.ramp.on_step_failure, OnStepFailure::Continue);
    }

    #[test]
    fn a_bad_value_names_the_valid_ones() {
        let e = Cli::try_parse_from(["dbio", "run", "--read-path", "seq"])
            .expect_err("seq is no read path")
            .to_string();
        assert!(
            e.contains("'seq'") && e.contains("[possible values: index, bitmap]"),
            "{e}"
        );
        let e = Cli::try_parse_from(["dbio", "calibrate", "--path", "f", "--engine", "aio"])
            .expect_err("aio is no I/O engine")
            .to_string();
        assert!(e.contains("[possible values: psync, io_uring]"), "{e}");
    }
}
