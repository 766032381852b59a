//! dbio-oracle: the Oracle backend. This crate is a skeleton: the Oracle issue fills it with
//! the `oracle` crate (ODPI-C), SLOB's CF1 schema and a V$-view collector. Until then it only
//! states, in one place, that the engine is not available, so the CLI can say so clearly.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum OracleError {
    #[error(
        "the Oracle backend is not built yet in this version of dbio; use engine: postgres \
         (see the README, section \"Oracle\")"
    )]
    NotAvailable,
}

impl OracleError {
    pub fn exit_code(&self) -> u8 {
        2
    }
}

/// Refuses every Oracle operation with a clear message.
pub fn unavailable() -> OracleError {
    OracleError::NotAvailable
}

#[cfg(test)]
mod tests {
    #[test]
    fn unavailable_says_what_to_use() {
        let e = super::unavailable();
        assert!(e.to_string().contains("engine: postgres"));
        assert_eq!(e.exit_code(), 2);
    }
}
