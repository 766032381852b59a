//! End-to-end tests: each test starts its own scratch PostgreSQL, drives the real `dbio`
//! binary against it, and checks the result with the server's own catalog and counters.

mod bad_input;
mod calibrate;
mod collector;
mod comparability;
mod faults;
mod oracle;
mod ramp;
mod run;
mod scratch;
mod setup;
mod workflow;
