//! The collector's SQL: one statement per view for a snapshot, chosen by the major version
//! (13-18, pg-stats §7.4), and the pg_stat_statements read. Each returns one row; a column
//! named `reset:<view>` is a text stamp, the others are numbers named `view.column`.

/// The statements of one snapshot for a major version. Each returns one row; columns named
/// `reset:<view>` are text stamps, the others numbers.
pub fn snapshot_queries(major: i32) -> Vec<&'static str> {
    let mut q = vec![if major >= 14 { DB_14 } else { DB_13 }, TABLES];
    match major {
        ..=13 => q.push(LSN),
        14..=17 => q.push(WAL_14),
        _ => q.push(WAL_18),
    }
    match major {
        ..=16 => q.push(BGWRITER_13),
        17 => q.extend([CHECKPOINTER_17, BGWRITER_17]),
        _ => q.extend([CHECKPOINTER_18, BGWRITER_17]),
    }
    match major {
        ..=15 => {}
        16 | 17 => q.push(IO_16),
        _ => q.push(IO_18),
    }
    q
}

/// pg_stat_statements (when installed and preloaded): dbio's own statements, this database
/// and role. Updated at statement end, with no flush delay (pg-stats §2.6); 17 renamed
/// blk_read_time to shared_blk_read_time.
pub fn pgss_query(major: i32) -> String {
    let read_time = if major >= 17 {
        "shared_blk_read_time"
    } else {
        "blk_read_time"
    };
    format!(
        "SELECT coalesce(sum(calls), 0)::float8 AS \"pgss.calls\", \
         coalesce(sum(shared_blks_read), 0)::float8 AS \"pgss.shared_blks_read\", \
         coalesce(sum(shared_blks_hit), 0)::float8 AS \"pgss.shared_blks_hit\", \
         coalesce(sum({read_time}), 0)::float8 AS \"pgss.read_time\" \
         FROM pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND userid = (SELECT oid FROM pg_roles WHERE rolname = current_user) \
           AND query ~ '\\.cf1 (WHERE|SET) .*custid BETWEEN'"
    )
}

const DB_13: &str = concat!(
    "SELECT xact_commit::float8 AS \"db.xact_commit\", xact_rollback::float8 AS \"db.xact_rollback\", ",
    "blks_read::float8 AS \"db.blks_read\", blks_hit::float8 AS \"db.blks_hit\", ",
    "blk_read_time::float8 AS \"db.blk_read_time\", blk_write_time::float8 AS \"db.blk_write_time\", ",
    "tup_updated::float8 AS \"db.tup_updated\", temp_bytes::float8 AS \"db.temp_bytes\", ",
    "stats_reset::text AS \"reset:pg_stat_database\" ",
    "FROM pg_stat_database WHERE datname = current_database()"
);

/// 14+: active_time is a measured DB time (ms executing statements).
const DB_14: &str = concat!(
    "SELECT xact_commit::float8 AS \"db.xact_commit\", xact_rollback::float8 AS \"db.xact_rollback\", ",
    "blks_read::float8 AS \"db.blks_read\", blks_hit::float8 AS \"db.blks_hit\", ",
    "blk_read_time::float8 AS \"db.blk_read_time\", blk_write_time::float8 AS \"db.blk_write_time\", ",
    "tup_updated::float8 AS \"db.tup_updated\", temp_bytes::float8 AS \"db.temp_bytes\", ",
    "active_time::float8 AS \"db.active_time\", ",
    "stats_reset::text AS \"reset:pg_stat_database\" ",
    "FROM pg_stat_database WHERE datname = current_database()"
);

/// dbio's tables in the schemas `$1`, summed.
const TABLES: &str = "SELECT coalesce(sum(io.heap_blks_read), 0)::float8 AS \"tables.heap_blks_read\", \
     coalesce(sum(io.heap_blks_hit), 0)::float8 AS \"tables.heap_blks_hit\", \
     coalesce(sum(io.idx_blks_read), 0)::float8 AS \"tables.idx_blks_read\", \
     coalesce(sum(io.idx_blks_hit), 0)::float8 AS \"tables.idx_blks_hit\", \
     coalesce(sum(t.idx_scan), 0)::float8 AS \"tables.idx_scan\", \
     coalesce(sum(t.n_tup_upd), 0)::float8 AS \"tables.n_tup_upd\", \
     coalesce(sum(t.autovacuum_count), 0)::float8 AS \"tables.autovacuum_count\", \
     coalesce(sum(t.autoanalyze_count), 0)::float8 AS \"tables.autoanalyze_count\" \
     FROM pg_statio_user_tables io JOIN pg_stat_user_tables t USING (relid) \
     WHERE io.schemaname = ANY($1::text[]) AND io.relname = 'cf1'";

/// 13 has no pg_stat_wal: WAL bytes from the LSN (NULL on a standby).
const LSN: &str = "SELECT pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn() END, '0/0')::float8 \
     AS \"wal.wal_bytes\"";

const WAL_14: &str = "SELECT wal_records::float8 AS \"wal.wal_records\", wal_fpi::float8 AS \"wal.wal_fpi\", \
     wal_bytes::float8 AS \"wal.wal_bytes\", wal_buffers_full::float8 AS \"wal.wal_buffers_full\", \
     wal_write::float8 AS \"wal.wal_write\", wal_sync::float8 AS \"wal.wal_sync\", \
     wal_write_time::float8 AS \"wal.wal_write_time\", wal_sync_time::float8 AS \"wal.wal_sync_time\", \
     stats_reset::text AS \"reset:pg_stat_wal\" FROM pg_stat_wal";

/// 18 moved WAL write and sync counts to pg_stat_io (object 'wal').
const WAL_18: &str = "SELECT wal_records::float8 AS \"wal.wal_records\", wal_fpi::float8 AS \"wal.wal_fpi\", \
     wal_bytes::float8 AS \"wal.wal_bytes\", wal_buffers_full::float8 AS \"wal.wal_buffers_full\", \
     stats_reset::text AS \"reset:pg_stat_wal\" FROM pg_stat_wal";

const BGWRITER_13: &str = "SELECT checkpoints_timed::float8 AS \"ckpt.timed\", checkpoints_req::float8 AS \"ckpt.requested\", \
     buffers_checkpoint::float8 AS \"ckpt.buffers_written\", checkpoint_write_time::float8 AS \"ckpt.write_time\", \
     checkpoint_sync_time::float8 AS \"ckpt.sync_time\", buffers_clean::float8 AS \"bgwriter.buffers_clean\", \
     buffers_backend::float8 AS \"bgwriter.buffers_backend\", \
     stats_reset::text AS \"reset:pg_stat_bgwriter\" FROM pg_stat_bgwriter";

/// 17: checkpoint columns moved to pg_stat_checkpointer and were renamed.
const CHECKPOINTER_17: &str = "SELECT num_timed::float8 AS \"ckpt.timed\", num_requested::float8 AS \"ckpt.requested\", \
     buffers_written::float8 AS \"ckpt.buffers_written\", write_time::float8 AS \"ckpt.write_time\", \
     sync_time::float8 AS \"ckpt.sync_time\", stats_reset::text AS \"reset:pg_stat_checkpointer\" \
     FROM pg_stat_checkpointer";

/// 18 adds num_done: checkpoints completed (num_timed and num_requested include skipped ones).
const CHECKPOINTER_18: &str = "SELECT num_timed::float8 AS \"ckpt.timed\", num_requested::float8 AS \"ckpt.requested\", \
     num_done::float8 AS \"ckpt.done\", buffers_written::float8 AS \"ckpt.buffers_written\", \
     write_time::float8 AS \"ckpt.write_time\", sync_time::float8 AS \"ckpt.sync_time\", \
     stats_reset::text AS \"reset:pg_stat_checkpointer\" FROM pg_stat_checkpointer";

const BGWRITER_17: &str = "SELECT buffers_clean::float8 AS \"bgwriter.buffers_clean\", \
     stats_reset::text AS \"reset:pg_stat_bgwriter\" FROM pg_stat_bgwriter";

/// 16-17: pg_stat_io counts reads and writes in blocks. Foreground = client backends and
/// parallel workers ('background worker').
const IO_16: &str = "SELECT \
     coalesce(sum(reads) FILTER (WHERE object = 'relation' AND backend_type IN ('client backend', 'background worker')), 0)::float8 AS \"io.fg_reads\", \
     coalesce(sum(read_time) FILTER (WHERE object = 'relation' AND backend_type IN ('client backend', 'background worker')), 0)::float8 AS \"io.fg_read_time\", \
     coalesce(sum(reads) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.reads\", \
     coalesce(sum(hits) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.hits\", \
     coalesce(sum(writes) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.writes\", \
     coalesce(sum(writes) FILTER (WHERE object = 'relation' AND backend_type = 'client backend'), 0)::float8 AS \"io.fg_writes\", \
     coalesce(sum(write_time) FILTER (WHERE object = 'relation' AND backend_type = 'client backend'), 0)::float8 AS \"io.fg_write_time\", \
     max(stats_reset)::text AS \"reset:pg_stat_io\" FROM pg_stat_io";

/// 18: a read may cover several blocks (read_bytes); WAL I/O is object 'wal'.
const IO_18: &str = "SELECT \
     coalesce(sum(reads) FILTER (WHERE object = 'relation' AND backend_type IN ('client backend', 'background worker')), 0)::float8 AS \"io.fg_reads\", \
     coalesce(sum(read_bytes) FILTER (WHERE object = 'relation' AND backend_type IN ('client backend', 'background worker')), 0)::float8 AS \"io.fg_read_bytes\", \
     coalesce(sum(read_time) FILTER (WHERE object = 'relation' AND backend_type IN ('client backend', 'background worker')), 0)::float8 AS \"io.fg_read_time\", \
     coalesce(sum(reads) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.reads\", \
     coalesce(sum(hits) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.hits\", \
     coalesce(sum(writes) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.writes\", \
     coalesce(sum(writes) FILTER (WHERE object = 'relation' AND backend_type = 'client backend'), 0)::float8 AS \"io.fg_writes\", \
     coalesce(sum(write_time) FILTER (WHERE object = 'relation' AND backend_type = 'client backend'), 0)::float8 AS \"io.fg_write_time\", \
     coalesce(sum(writes) FILTER (WHERE object = 'wal'), 0)::float8 AS \"io.wal_writes\", \
     coalesce(sum(fsyncs) FILTER (WHERE object = 'wal'), 0)::float8 AS \"io.wal_fsyncs\", \
     coalesce(sum(write_time) FILTER (WHERE object = 'wal'), 0)::float8 AS \"io.wal_write_time\", \
     coalesce(sum(fsync_time) FILTER (WHERE object = 'wal'), 0)::float8 AS \"io.wal_fsync_time\", \
     max(stats_reset)::text AS \"reset:pg_stat_io\" FROM pg_stat_io";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_stat_statements_column_follows_the_version() {
        assert!(pgss_query(16).contains("sum(blk_read_time)"));
        assert!(pgss_query(17).contains("sum(shared_blk_read_time)"));
    }

    #[test]
    fn queries_follow_the_version() {
        let q15 = snapshot_queries(15).join("\n");
        assert!(
            q15.contains("pg_stat_bgwriter")
                && q15.contains("active_time")
                && !q15.contains("pg_stat_io")
        );
        let q13 = snapshot_queries(13).join("\n");
        assert!(q13.contains("pg_current_wal_lsn") && !q13.contains("active_time"));
        let q17 = snapshot_queries(17).join("\n");
        assert!(
            q17.contains("pg_stat_checkpointer")
                && q17.contains("pg_stat_io")
                && q17.contains("wal_write")
        );
        assert!(
            !q17.contains("buffers_backend"),
            "17 dropped buffers_backend"
        );
        let q18 = snapshot_queries(18).join("\n");
        assert!(
            q18.contains("num_done") && q18.contains("read_bytes") && !q18.contains("wal_write::")
        );
    }
}
