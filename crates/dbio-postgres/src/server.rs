//! Facts about the server that every command needs before it acts.

use tokio_postgres::Client;

use crate::error::{PgError, Result};
use crate::sql;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// `server_version_num`, e.g. 150019.
    pub version_num: i32,
    /// `server_version`, e.g. "15.19 (Debian 15.19-0+deb12u1)".
    pub version: String,
    pub block_size: u64,
    pub shared_buffers_bytes: u64,
    pub is_superuser: bool,
    pub database: String,
    pub user: String,
    /// May this role create schemas in the database?
    pub can_create: bool,
    pub track_io_timing: bool,
    /// debug_io_direct includes `data` (16+): data-file reads bypass the OS page cache.
    pub direct_io: bool,
}

impl ServerInfo {
    pub fn major(&self) -> i32 {
        self.version_num / 10_000
    }
}

/// Refuses a plan counted in other blocks than the server's: its rows would not be the scale
/// asked for (a plan is made with `dbio_core::backend::data_set_plan` on the same server).
pub fn same_blocks(plan: &dbio_core::dataset::DataSetPlan, info: &ServerInfo) -> Result<()> {
    if plan.block_size == info.block_size {
        return Ok(());
    }
    Err(PgError::Usage(format!(
        "the data set's plan counts {} rows of {}-byte blocks, but this server's blocks are {} bytes \
         (block_size); plan it on this server",
        plan.scale_blocks, plan.block_size, info.block_size
    )))
}

pub async fn server_info(client: &Client) -> Result<ServerInfo> {
    let row = client
        .query_one(sql::SERVER_INFO, &[])
        .await
        .map_err(|e| PgError::from_db("reading the server's version and settings", &e))?;
    let bytes: i64 = row.get(3);
    let track: String = row.get(8);
    let direct: String = row.get(9);
    Ok(ServerInfo {
        version_num: row.get(0),
        version: row.get(1),
        block_size: row.get::<_, i64>(2) as u64,
        shared_buffers_bytes: bytes.max(0) as u64,
        is_superuser: row.get::<_, Option<bool>>(4).unwrap_or(false),
        database: row.get(5),
        user: row.get(6),
        can_create: row.get(7),
        track_io_timing: track == "on",
        direct_io: direct
            .split(',')
            .any(|x| x.trim().eq_ignore_ascii_case("data")),
    })
}
