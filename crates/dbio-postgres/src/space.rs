//! Free space where a data set will go, checked before setup creates anything.
//!
//! dbio can know it only for a server on this host (a Unix socket or loopback) whose data
//! directory, or the tablespace's location, the role may read (superuser or
//! pg_read_all_settings) and this process may `statvfs`. Elsewhere it says it could not check.
//! The need: the heap, plus 5% for the index, free-space and visibility maps (a bigint B-tree
//! over one row per block is about 0.3% of the heap), plus the WAL the load writes before
//! checkpoints recycle it: up to the heap itself, bounded by max_wal_size (none at
//! wal_level = minimal, where COPY into a table created in the same transaction skips WAL).

use std::path::{Path, PathBuf};

use dbio_core::units::format_bytes;
use tokio_postgres::Client;

use crate::conn::Target;
use crate::error::{PgError, Result};
use crate::sql;

/// Bytes the data set needs beyond its heap, in hundredths of the heap.
const OVERHEAD_PCT: u64 = 5;

/// What the load will need, by file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpaceNeed {
    /// Heap and index, where the tables go.
    pub data_bytes: u64,
    /// WAL, in the data directory.
    pub wal_bytes: u64,
}

impl SpaceNeed {
    /// `heap_bytes` to load, `freed_bytes` of dbio's tables that setup drops first.
    pub fn new(heap_bytes: u64, freed_bytes: u64, max_wal_bytes: Option<u64>) -> SpaceNeed {
        let data = heap_bytes.saturating_add(heap_bytes / 100 * OVERHEAD_PCT);
        SpaceNeed {
            data_bytes: data.saturating_sub(freed_bytes),
            wal_bytes: max_wal_bytes.map_or(0, |w| w.min(heap_bytes)),
        }
    }
}

/// Bytes available to an unprivileged user on the file system of `path`, and its device.
fn free_bytes(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path)?.dev();
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a valid NUL-terminated path and a buffer of the right type; statvfs fills it on
    // success (return 0) and it is read only then.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so the struct is initialized.
    let st = unsafe { st.assume_init() };
    // fsblkcnt_t and c_ulong are 32 bits wide on some targets.
    #[allow(clippy::unnecessary_cast)]
    Ok(((st.f_bavail as u64).saturating_mul(st.f_frsize as u64), dev))
}

/// The verdict: `Ok(None)` fits, `Ok(Some(note))` could not be checked (the note says why and
/// what to verify), `Err` does not fit (a usage error, before anything is created).
pub async fn check(
    client: &Client,
    target: &Target,
    tablespace: Option<&str>,
    need: &SpaceNeed,
) -> Result<Option<String>> {
    if need.data_bytes == 0 && need.wal_bytes == 0 {
        return Ok(None);
    }
    let unchecked = |why: String| {
        Ok(Some(format!(
            "free space not checked ({why}): make sure the server has {} free for the tables{}",
            format_bytes(need.data_bytes),
            if need.wal_bytes > 0 {
                format!(" and {} for WAL", format_bytes(need.wal_bytes))
            } else {
                String::new()
            }
        )))
    };
    if !target.is_local() {
        return unchecked("the server is not on this host".into());
    }
    let Some(data_dir) = setting_path(client, sql::DATA_DIRECTORY, None).await? else {
        return unchecked(
            "the role may not read data_directory: superuser or pg_read_all_settings may".into(),
        );
    };
    if !data_dir.join("PG_VERSION").is_file() {
        return unchecked(format!(
            "{} is not readable from this process",
            data_dir.display()
        ));
    }
    let table_dir = match tablespace {
        Some(ts) => setting_path(client, sql::TABLESPACE_LOCATION, Some(ts))
            .await?
            .unwrap_or_else(|| data_dir.clone()),
        None => data_dir.clone(),
    };
    let (wal_free, wal_dev) = match free_bytes(&data_dir) {
        Ok(x) => x,
        Err(e) => return unchecked(format!("statvfs {}: {e}", data_dir.display())),
    };
    let (data_free, data_dev) = match free_bytes(&table_dir) {
        Ok(x) => x,
        Err(e) => return unchecked(format!("statvfs {}: {e}", table_dir.display())),
    };
    let mut short = Vec::new();
    if data_dev == wal_dev {
        let total = need.data_bytes.saturating_add(need.wal_bytes);
        if total > data_free {
            short.push(format!(
                "it needs about {} (tables {} + WAL {}) on the file system of {}, which has {} free",
                format_bytes(total),
                format_bytes(need.data_bytes),
                format_bytes(need.wal_bytes),
                table_dir.display(),
                format_bytes(data_free)
            ));
        }
    } else {
        if need.data_bytes > data_free {
            short.push(format!(
                "its tables need about {} in {}, which has {} free",
                format_bytes(need.data_bytes),
                table_dir.display(),
                format_bytes(data_free)
            ));
        }
        if need.wal_bytes > wal_free {
            short.push(format!(
                "its WAL needs up to {} in {}, which has {} free",
                format_bytes(need.wal_bytes),
                data_dir.display(),
                format_bytes(wal_free)
            ));
        }
    }
    if short.is_empty() {
        return Ok(None);
    }
    Err(PgError::Usage(format!(
        "the data set does not fit: {}. Nothing was created; lower data.scale (--scale) or data.schemas (--schemas), \
         or put it in a tablespace with room (--tablespace)",
        short.join("; ")
    )))
}

async fn setting_path(client: &Client, query: &str, arg: Option<&str>) -> Result<Option<PathBuf>> {
    let row = match arg {
        Some(a) => client.query_opt(query, &[&a]).await,
        None => client.query_opt(query, &[]).await,
    }
    .map_err(|e| PgError::from_db("reading where the data set goes", &e))?;
    Ok(row
        .and_then(|r| r.get::<_, Option<String>>(0))
        .filter(|p| !p.is_empty())
        .map(PathBuf::from))
}

/// max_wal_size in bytes, or `None` at wal_level = minimal (COPY into a new table writes no
/// WAL there).
pub async fn max_wal_bytes(client: &Client) -> Result<Option<u64>> {
    let row = client
        .query_one(sql::WAL_SETTINGS, &[])
        .await
        .map_err(|e| PgError::from_db("reading wal_level and max_wal_size", &e))?;
    let level: String = row.get(0);
    let bytes: i64 = row.get(1);
    Ok((level != "minimal").then_some(bytes.max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_need_counts_overhead_wal_and_what_is_freed_first() {
        let n = SpaceNeed::new(100 << 20, 0, Some(1 << 30));
        assert_eq!(n.data_bytes, (100 << 20) + (5 << 20));
        assert_eq!(n.wal_bytes, 100 << 20, "WAL bounded by the heap");
        let n = SpaceNeed::new(10 << 30, 4 << 30, Some(1 << 30));
        assert_eq!(n.wal_bytes, 1 << 30, "WAL bounded by max_wal_size");
        assert_eq!(
            n.data_bytes,
            (10u64 << 30) + (10u64 << 30) / 100 * 5 - (4 << 30)
        );
        assert_eq!(SpaceNeed::new(1 << 20, 0, None).wal_bytes, 0);
        let huge = SpaceNeed::new(u64::MAX, 0, Some(1 << 30));
        assert_eq!(huge.data_bytes, u64::MAX);
    }

    #[test]
    fn free_space_of_a_real_file_system() {
        let (free, _) = free_bytes(Path::new("/")).expect("statvfs /");
        assert!(free > 0);
        assert!(free_bytes(Path::new("/no/such/dir")).is_err());
    }
}
