//! Cache residency of the data set's relations (each schema's cf1 and i_cf1), before and
//! after the window:
//!
//! - in shared_buffers: pg_buffercache (counts per relfilenode of this database's main
//!   fork), installed by dbio when the role may (`CREATE EXTENSION`, said in the notes);
//! - in the OS page cache of the server's host: for a server proven to run here, the
//!   relation's segment files through cachestat(2) (Linux 6.5+; mincore(2) before it); for
//!   another host, pgfincore when it is installed; else null with the reason;
//! - in both (double-buffered): pg_buffercache's block numbers against mincore(2)'s page
//!   bitmap of the same files (a server proven to run here).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use dbio_core::limits::{CacheCounts, RelationKind, RelationResidency, Residency};
use tokio_postgres::Client;

use crate::sql;

fn db_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string())
}

/// cachestat(2)'s syscall number: 451 on every architecture with the common syscall table
/// (include/uapi/asm-generic/unistd.h, arch/x86/entry/syscalls/syscall_64.tbl).
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Pages of `file` in the page cache, by cachestat(2) over the whole file.
fn cachestat_pages(file: &File) -> std::io::Result<u64> {
    // len 0: to the end of the file (cachestat(2)).
    let range = CachestatRange { off: 0, len: 0 };
    let mut cs = Cachestat::default();
    // SAFETY: cachestat reads the range and writes one struct cachestat, both valid for the
    // call; the fd is open.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const CachestatRange,
            &mut cs as *mut Cachestat,
            0u32,
        )
    };
    if rc == 0 {
        Ok(cs.nr_cache)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 } else { 4096 }
}

/// Which pages of `file` (of `len` bytes) are in the page cache, by mincore(2) on a read-only
/// shared mapping (the mapping faults nothing in).
fn mincore_pages(file: &File, len: u64) -> std::io::Result<Vec<bool>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let page = page_size();
    let pages = len.div_ceil(page) as usize;
    // SAFETY: a read-only shared mapping of an open file, unmapped below; nothing reads it.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    let mut vec = vec![0u8; pages];
    // SAFETY: `vec` holds one byte per page of the mapping.
    let rc = unsafe { libc::mincore(addr, len as usize, vec.as_mut_ptr()) };
    let err = std::io::Error::last_os_error();
    // SAFETY: the mapping made above, of `len` bytes.
    unsafe { libc::munmap(addr, len as usize) };
    if rc != 0 {
        return Err(err);
    }
    Ok(vec.iter().map(|b| b & 1 == 1).collect())
}

/// One relation of the data set, as the catalog shows it before the window.
#[derive(Debug, Clone)]
struct Rel {
    name: String,
    kind: RelationKind,
    filenode: i64,
    /// `schema.name` as regclass text (quoted where needed), for pgfincore.
    regclass: String,
    /// Its main fork's path relative to the data directory (pg_relation_filepath).
    filepath: String,
    blocks: u64,
}

/// Where page-cache counts come from.
#[derive(Debug, Clone)]
enum PageCache {
    /// The server's files on this host, under its data directory.
    Local(PathBuf),
    /// pgfincore, installed in this schema.
    Pgfincore(String),
}

/// Everything residency needs, found before the window.
pub struct ResidencyProbe {
    rels: Vec<Rel>,
    block_size: u64,
    segment_blocks: u64,
    /// pg_buffercache's schema, when it can be read.
    buffercache: Option<String>,
    page_cache: Option<PageCache>,
    /// Which call counts local pages (`cachestat(2)`, or `mincore(2)` on older kernels).
    local_counter: std::sync::Mutex<Option<&'static str>>,
    notes: Vec<String>,
}

/// Counts at one moment, per relation (in the probe's order).
pub type Reading = Vec<CacheCounts>;

/// The schema of an installed extension, or None.
async fn extension_schema(client: &Client, name: &str) -> Result<Option<String>, String> {
    let row = client
        .query_opt(sql::EXTENSION_INSTALLED, &[&name])
        .await
        .map_err(|e| db_message(&e))?;
    Ok(row.and_then(|r| r.try_get(0).ok()))
}

/// pg_buffercache's schema, installing it when it is missing and the role may; Err: why it
/// cannot be read.
async fn buffercache(
    client: &Client,
    superuser: bool,
    notes: &mut Vec<String>,
) -> Result<String, String> {
    if let Some(schema) = extension_schema(client, "pg_buffercache").await? {
        return Ok(schema);
    }
    let available = client
        .query_opt(sql::EXTENSION_AVAILABLE, &[&"pg_buffercache"])
        .await
        .map_err(|e| db_message(&e))?
        .is_some();
    if !available {
        return Err(
            "pg_buffercache is not available on the server (PostgreSQL's contrib modules are not installed)".into(),
        );
    }
    if !superuser {
        return Err(
            "pg_buffercache is not installed in this database and the role may not install it: \
             CREATE EXTENSION pg_buffercache (as a superuser), and GRANT pg_monitor to the role"
                .into(),
        );
    }
    client
        .batch_execute(sql::CREATE_BUFFERCACHE)
        .await
        .map_err(|e| db_message(&e))?;
    let db: String = client
        .query_one("SELECT current_database()::text", &[])
        .await
        .ok()
        .and_then(|r| r.try_get(0).ok())
        .unwrap_or_default();
    notes.push(format!(
        "dbio installed pg_buffercache in database {db}, schema public, to read shared_buffers residency \
         (CREATE EXTENSION pg_buffercache); DROP EXTENSION pg_buffercache removes it"
    ));
    Ok("public".to_string())
}

impl ResidencyProbe {
    /// The data set's relations and how their residency can be read. `local_data_dir`: the
    /// data directory of a server proven to run on this host; `superuser` may install
    /// pg_buffercache. Err: the relations could not be listed.
    pub async fn prepare(
        client: &Client,
        schemas: &[String],
        block_size: u64,
        superuser: bool,
        local_data_dir: Result<PathBuf, String>,
    ) -> Result<ResidencyProbe, String> {
        let rows = client
            .query(&sql::residency_relations(), &[&schemas])
            .await
            .map_err(|e| db_message(&e))?;
        let mut rels = Vec::new();
        for r in rows {
            let name: String = r.try_get(0).map_err(|e| e.to_string())?;
            let kind: String = r.try_get(1).map_err(|e| e.to_string())?;
            let filepath: Option<String> = r.try_get(3).map_err(|e| e.to_string())?;
            let bytes: i64 = r.try_get(4).map_err(|e| e.to_string())?;
            rels.push(Rel {
                name,
                kind: if kind == "i" {
                    RelationKind::Index
                } else {
                    RelationKind::Table
                },
                filenode: r
                    .try_get::<_, Option<i64>>(2)
                    .map_err(|e| e.to_string())?
                    .unwrap_or(0),
                regclass: r.try_get(5).map_err(|e| e.to_string())?,
                filepath: filepath.unwrap_or_default(),
                blocks: bytes.max(0) as u64 / block_size.max(1),
            });
        }
        let segment_blocks: i64 = client
            .query_one(sql::SEGMENT_BLOCKS, &[])
            .await
            .ok()
            .and_then(|r| r.try_get(0).ok())
            .unwrap_or(131_072);
        let mut notes = Vec::new();
        let buffercache = match buffercache(client, superuser, &mut notes).await {
            Ok(schema) => Some(schema),
            Err(why) => {
                notes.push(format!("shared_buffers residency is null: {why}"));
                None
            }
        };
        let page_cache = match local_data_dir {
            Ok(dir) => Some(PageCache::Local(dir)),
            Err(not_local) => {
                let fincore = extension_schema(client, "pgfincore").await.ok().flatten();
                if let Some(schema) = fincore {
                    notes.push(
                        "blocks in both caches are null: they need the files' page bitmap against pg_buffercache's \
                         block numbers, read on the server's host (a server proven to run on this one)"
                            .into(),
                    );
                    Some(PageCache::Pgfincore(schema))
                } else {
                    notes.push(format!(
                        "page-cache residency is null: the server's files are not on this host ({not_local}) and \
                         pgfincore is not installed on it (CREATE EXTENSION pgfincore; Debian: postgresql-NN-pgfincore)"
                    ));
                    None
                }
            }
        };
        Ok(ResidencyProbe {
            rels,
            block_size,
            segment_blocks: segment_blocks.max(1) as u64,
            buffercache,
            page_cache,
            local_counter: std::sync::Mutex::new(None),
            notes,
        })
    }

    /// The relation's segment files under `dir`: path, path.1, path.2, ... while they exist.
    fn segments(dir: &Path, rel: &Rel) -> Vec<PathBuf> {
        let base = dir.join(&rel.filepath);
        let mut out = Vec::new();
        for k in 0.. {
            let p = if k == 0 {
                base.clone()
            } else {
                PathBuf::from(format!("{}.{k}", base.display()))
            };
            if !p.is_file() {
                break;
            }
            out.push(p);
        }
        out
    }

    /// Blocks of `rel` in this host's page cache, and (when `sb_blocks` is given) how many of
    /// those blocks are in it as well. Err: why the files could not be read.
    fn local_counts(
        &self,
        dir: &Path,
        rel: &Rel,
        sb_blocks: Option<&[i64]>,
    ) -> Result<(u64, Option<u64>), String> {
        let page = page_size();
        let pages_per_block = (self.block_size / page).max(1);
        let mut cached_pages = 0u64;
        let mut both = 0u64;
        let segments = Self::segments(dir, rel);
        if segments.is_empty() && rel.blocks > 0 {
            return Err(format!(
                "{} has no file at {} on this host",
                rel.name,
                dir.join(&rel.filepath).display()
            ));
        }
        for (k, path) in segments.iter().enumerate() {
            let file = File::open(path).map_err(|e| {
                format!(
                    "{} cannot be opened here ({e}): run dbio as root or as the server's OS user",
                    path.display()
                )
            })?;
            let len = file.metadata().map_err(|e| e.to_string())?.len();
            let counted = match cachestat_pages(&file) {
                Ok(n) => {
                    self.set_counter("cachestat(2)");
                    Some(n)
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => None,
                Err(e) => return Err(format!("cachestat(2) on {}: {e}", path.display())),
            };
            let bitmap = if counted.is_none() || sb_blocks.is_some() {
                Some(
                    mincore_pages(&file, len)
                        .map_err(|e| format!("mincore(2) on {}: {e}", path.display()))?,
                )
            } else {
                None
            };
            cached_pages += match (counted, &bitmap) {
                (Some(n), _) => n,
                (None, Some(b)) => {
                    self.set_counter("mincore(2) (no cachestat(2) before Linux 6.5)");
                    b.iter().filter(|r| **r).count() as u64
                }
                (None, None) => 0,
            };
            if let (Some(sb), Some(bitmap)) = (sb_blocks, &bitmap) {
                let first = k as u64 * self.segment_blocks;
                for b in sb {
                    let Some(local) = (*b as u64).checked_sub(first) else {
                        continue;
                    };
                    if local >= self.segment_blocks {
                        continue;
                    }
                    let p0 = (local * pages_per_block) as usize;
                    let pn = p0 + pages_per_block as usize;
                    if pn <= bitmap.len() && bitmap[p0..pn].iter().all(|r| *r) {
                        both += 1;
                    }
                }
            }
        }
        Ok((
            cached_pages * page / self.block_size.max(1),
            sb_blocks.map(|_| both),
        ))
    }

    fn set_counter(&self, how: &'static str) {
        if let Ok(mut c) = self.local_counter.lock() {
            c.get_or_insert(how);
        }
    }

    /// The counts now; a count that cannot be read is null (the first reason is noted).
    pub async fn read(&self, client: &Client, notes: &mut Vec<String>) -> Reading {
        let filenodes: Vec<i64> = self.rels.iter().map(|r| r.filenode).collect();
        let mut sb: Option<std::collections::BTreeMap<i64, Vec<i64>>> = None;
        if let Some(schema) = &self.buffercache {
            match client
                .query(&sql::buffercache_blocks(schema), &[&filenodes])
                .await
            {
                Ok(rows) => {
                    let mut m = std::collections::BTreeMap::new();
                    for r in rows {
                        let (Ok(node), Ok(blocks)) =
                            (r.try_get::<_, i64>(0), r.try_get::<_, Vec<i64>>(1))
                        else {
                            continue;
                        };
                        m.insert(node, blocks);
                    }
                    sb = Some(m);
                }
                Err(e) => notes.push(format!(
                    "shared_buffers residency is null: pg_buffercache could not be read: {}; GRANT pg_monitor to the role",
                    db_message(&e)
                )),
            }
        }
        let mut out = Vec::new();
        for rel in &self.rels {
            let blocks = sb
                .as_ref()
                .map(|m| m.get(&rel.filenode).cloned().unwrap_or_default());
            let mut c = CacheCounts {
                shared_buffers_blocks: blocks.as_ref().map(|b| b.len() as u64),
                ..CacheCounts::default()
            };
            match &self.page_cache {
                Some(PageCache::Local(dir)) => {
                    match self.local_counts(dir, rel, blocks.as_deref()) {
                        Ok((pc, both)) => {
                            c.page_cache_blocks = Some(pc);
                            c.both_blocks = both;
                        }
                        Err(e) => {
                            if !notes.iter().any(|n| n.contains(&e)) {
                                notes.push(format!("page-cache residency is null: {e}"));
                            }
                        }
                    }
                }
                Some(PageCache::Pgfincore(schema)) => {
                    match client
                        .query_one(&sql::pgfincore_bytes(schema), &[&rel.regclass])
                        .await
                    {
                        Ok(r) => {
                            c.page_cache_blocks = r
                                .try_get::<_, i64>(0)
                                .ok()
                                .map(|b| b.max(0) as u64 / self.block_size.max(1));
                        }
                        Err(e) => {
                            let why = format!(
                                "page-cache residency is null: pgfincore could not be read: {}",
                                db_message(&e)
                            );
                            if !notes.contains(&why) {
                                notes.push(why);
                            }
                        }
                    }
                }
                None => {}
            }
            out.push(c);
        }
        out
    }

    /// The residency between the readings before and after the window.
    pub fn residency(
        &self,
        before: &Reading,
        after: &Reading,
        mut notes: Vec<String>,
    ) -> Residency {
        let mut all = self.notes.clone();
        for n in notes.drain(..) {
            if !all.contains(&n) {
                all.push(n);
            }
        }
        let counter = self.local_counter.lock().ok().and_then(|c| *c);
        Residency {
            shared_buffers_source: self.buffercache.is_some().then(|| {
                "pg_buffercache (this database's buffers of each relation's main fork)".to_string()
            }),
            page_cache_source: match &self.page_cache {
                Some(PageCache::Local(dir)) => Some(format!(
                    "{} on the relations' files under {} (server proven local)",
                    counter.unwrap_or("cachestat(2)"),
                    dir.display()
                )),
                Some(PageCache::Pgfincore(_)) => Some("pgfincore (on the server)".to_string()),
                None => None,
            },
            both_source: (self.buffercache.is_some()
                && matches!(self.page_cache, Some(PageCache::Local(_))))
            .then(|| "pg_buffercache's block numbers against mincore(2)'s page bitmap".to_string()),
            block_size: self.block_size,
            relations: self
                .rels
                .iter()
                .enumerate()
                .map(|(i, r)| RelationResidency {
                    relation: r.name.clone(),
                    kind: r.kind,
                    blocks: r.blocks,
                    before: before.get(i).copied().unwrap_or_default(),
                    after: after.get(i).copied().unwrap_or_default(),
                })
                .collect(),
            notes: all,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    // The calls themselves, on a file of this process's: written pages are cached.
    #[test]
    fn cachestat_and_mincore_see_a_written_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; 64 * 1024]).unwrap();
        f.sync_all().unwrap();
        let mut f = File::open(&path).unwrap();
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).unwrap();
        let pages = 64 * 1024 / page_size();
        match cachestat_pages(&f) {
            Ok(n) => assert_eq!(n, pages),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOSYS), "{e}"),
        }
        let bitmap = mincore_pages(&f, 64 * 1024).unwrap();
        assert_eq!(bitmap.len() as u64, pages);
        assert!(bitmap.iter().all(|r| *r));
        assert!(mincore_pages(&f, 0).unwrap().is_empty());
    }
}
