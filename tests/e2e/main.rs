//! End-to-end tests: each test starts its own scratch PostgreSQL, drives the real `dbio`
//! binary against it, and checks the result with the server's own catalog and counters.

mod bad_input;
mod calibrate;
mod capacity;
mod collector;
mod comparability;
mod connection;
mod container;
mod dataset;
mod deploy;
mod engine;
mod faults;
mod flash_vs_disk;
mod gate;
mod history;
mod host;
mod integrity;
mod limits;
mod merge;
mod oracle;
mod orphans;
mod pipeline;
mod quickstart;
mod ramp;
mod run;
mod safety;
mod scratch;
mod session_faults;
mod setup;
mod targets;
mod tls;
mod window;
mod workflow;
