//! dbio-core: what every database backend shares. Configuration and units, the SLOB data-set
//! plan, and (as they are built) the workload, measurements and reports. No SQL lives here.

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
pub mod text;
pub mod units;
pub mod workload;

pub use config::Config;
pub use error::CoreError;
