//! The quickstart measures storage: on PostgreSQL 16+ with `--direct-io` its ramp charts
//! device reads, not the OS page cache (#15 item 6).

use std::path::Path;

use dbio_tests::{Dbio, assert_exit, num, require_pg, stderr, stdout};

fn find_ramp(dir: &Path) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.join("ramp.json").is_file() {
            return Some(p);
        }
    }
    None
}

// #15: the README's quickstart ramp charted 218,426 to 468,100 "DB read IOPS" at 1.1 µs with
// 14 to 16 device reads/s: the whole first impression was the page cache.
#[test]
#[cfg_attr(
    dbio_missing_pg17,
    ignore = "needs PostgreSQL 17 binaries: scripts/test.sh installs them"
)]
fn the_quickstart_ramp_reads_from_the_device_at_every_step() {
    use std::os::unix::fs::PermissionsExt;
    let bin = require_pg(17);
    let work = tempfile::Builder::new()
        .prefix("dbio-quickstart-")
        .tempdir()
        .unwrap();
    // As root the server runs as `postgres`, which must reach the cluster's folder.
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The quickstart's shape, shortened: a data set 4x shared_buffers, a 1 s run, a ramp of
    // 1 and 2 readers for 2 s each.
    let config = work.path().join("quick.yaml");
    std::fs::write(
        &config,
        "data:\n  schemas: 2\n  scale: 4096blocks\n  parallel: 2\n\
         run:\n  readers: 2\n  writers: 1\n  run_time: 1s\n  label: quickstart\n\
         ramp:\n  readers: [1, 2]\n  writers: [0]\n  run_time: 2s\n",
    )
    .unwrap();
    let dir = work.path().join("cluster");
    struct Stop<'a>(&'a Path);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = dbio_postgres::ScratchCluster::destroy(self.0);
        }
    }
    let _stop = Stop(&dir);
    let out = Dbio::new("quickstart")
        .config(&config)
        .opt("--dir", &dir)
        .opt("--pg-bin", &bin)
        .opt("--shared-buffers", "16MB")
        .arg("--direct-io")
        .command()
        .current_dir(work.path())
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(
        stderr(&out).contains("debug_io_direct=data"),
        "the cluster says it reads past the page cache:\n{}",
        stderr(&out)
    );
    let ramp_dir = find_ramp(&work.path().join("results"))
        .unwrap_or_else(|| panic!("no ramp folder under results/:\n{}", stdout(&out)));
    let ramp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ramp_dir.join("ramp.json")).unwrap())
            .unwrap();
    let steps = ramp["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2);
    for s in steps {
        let db = num(s, &["db_read_iops", "mean"]);
        let device = num(s, &["device_read_iops", "mean"]);
        eprintln!(
            "step {}: DB reads {db:.0}/s, device reads {device:.0}/s",
            s["step"]
        );
        assert!(
            db > 50.0,
            "step {}: too few DB reads to judge ({db}/s)",
            s["step"]
        );
        assert!(
            device >= 0.8 * db,
            "step {}: device reads {device}/s are under 80% of the database's {db}/s",
            s["step"]
        );
    }
    // No step is marked as page-cache served on the chart.
    let svg = std::fs::read_to_string(ramp_dir.join("iops.svg")).unwrap();
    assert!(svg.contains(r#"class="point""#), "{svg}");
    assert!(!svg.contains("cache-served"), "{svg}");
}
