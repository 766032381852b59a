//! dbio-core: what every database backend shares, and no SQL. The configuration (`config`,
//! `units`), the SLOB data set (`dataset`, `key_order`, `discover`, `teardown`), the one run
//! pipeline over the [`backend::Backend`] trait (`bench`, `plan`, `driver`, `workload`), the
//! measurements and the verdicts drawn from them (`stats`, `limits`, `capacity`, `shape`),
//! result.json and its readers (`result`, `summary`, `merge`, `input`, `output`), the reports
//! (`report`), and the results store's model and change-point gate (`history`).
//! docs/design.md maps the modules.

pub mod backend;
pub mod bench;
pub mod capacity;
pub mod config;
pub mod dataset;
pub mod discover;
pub mod driver;
pub mod error;
pub mod history;
pub mod input;
pub mod interrupt;
pub mod key_order;
pub mod limits;
pub mod merge;
pub mod output;
pub mod plan;
pub mod report;
pub mod result;
pub mod shape;
pub mod stats;
pub mod summary;
pub mod teardown;
pub mod text;
pub mod units;
pub mod workload;

pub use config::Config;
pub use error::{CoreError, ErrorKind};
