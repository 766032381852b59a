//! The README's "Flash vs disk" recipe, end to end: one data set per tablespace (a tmpfs one
//! in /dev/shm and a disk one), each ramped on its own tablespace, then compared (#17 item 3).

use std::path::Path;

use dbio_tests::{Dbio, TestCluster, assert_exit, is_root, stdout};

/// A folder for a tablespace, owned by the server's OS user (CREATE TABLESPACE needs that).
fn tablespace_dir(parent: &Path, name: &str) -> std::path::PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir(&dir).unwrap();
    if is_root() {
        let ok = std::process::Command::new("chown")
            .arg("postgres:postgres")
            .arg(&dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "chown postgres {}", dir.display());
    }
    dir
}

fn steps(ramp_dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(ramp_dir.join("ramp.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["steps"].as_array().expect("steps").clone()
}

/// Every repeat's result.json of a ramp step (paths relative to ramp.json).
fn step_results(ramp_dir: &Path, step: &serde_json::Value) -> Vec<serde_json::Value> {
    step["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|p| {
            let path = ramp_dir.join(p.as_str().unwrap());
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
        })
        .collect()
}

// #17: the README's recipe set up with --tablespace but ramped without it, so every step's
// device figures named the data directory's disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(dbio_missing_dev_shm, ignore = "needs a /dev/shm tmpfs")]
async fn the_flash_vs_disk_recipe_ramps_each_tablespace_on_its_own_device() {
    let pg = TestCluster::start(16);
    let shm = tempfile::Builder::new()
        .prefix("dbio-flash-")
        .tempdir_in("/dev/shm")
        .unwrap();
    let disk = tempfile::Builder::new()
        .prefix("dbio-disk-")
        .tempdir()
        .unwrap();
    let (flash_loc, disk_loc) = (
        tablespace_dir(shm.path(), "pg"),
        tablespace_dir(disk.path(), "pg"),
    );
    let disk_device = dbio_core::stats::device::device_for_path(&disk_loc)
        .expect("the disk tablespace's folder is on a block device");
    assert!(
        dbio_core::stats::device::device_for_path(&flash_loc).is_none(),
        "/dev/shm is a tmpfs: no block device"
    );
    {
        let c = pg.client().await;
        for (name, loc) in [("flash_ts", &flash_loc), ("disk_ts", &disk_loc)] {
            c.batch_execute(&format!(
                "CREATE TABLESPACE {name} LOCATION '{}'",
                loc.display()
            ))
            .await
            .unwrap();
        }
    }
    // The recipe's commands as the README writes them, with a small configuration in place of
    // configs/flash-vs-disk.yaml (which drops the page cache, as root, and runs for minutes).
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("fvd.yaml");
    std::fs::write(
        &config,
        "data:\n  schemas: 1\n  scale: 1500blocks\n  parallel: 1\n\
         run:\n  run_time: 1s\n  work_unit: 16\n\
         ramp:\n  readers: [1, 2]\n  writers: [0]\n  repeat: 1\n",
    )
    .unwrap();
    let (cfg, dsn) = (config.to_str().unwrap(), pg.dsn());
    let out = |name: &str| work.path().join("results").join(name);
    for (prefix, ts) in [("flash", "flash_ts"), ("disk", "disk_ts")] {
        let o = Dbio::new("setup")
            .config(cfg)
            .dsn(&dsn)
            .opt("--prefix", prefix)
            .opt("--tablespace", ts)
            .output();
        assert_exit(&o, 0);
    }
    for (prefix, ts) in [("flash", "flash_ts"), ("disk", "disk_ts")] {
        let dir = out(prefix);
        let o = Dbio::new("ramp")
            .config(cfg)
            .dsn(&dsn)
            .opt("--prefix", prefix)
            .opt("--tablespace", ts)
            .opt("--label", prefix)
            .out(&dir)
            .output();
        assert_exit(&o, 0);
    }
    let cmp = out("flash-vs-disk");
    let o = Dbio::new("compare")
        .arg(out("flash"))
        .arg(out("disk"))
        .out(&cmp)
        .output();
    assert_exit(&o, 0);
    let text = std::fs::read_to_string(cmp.join("compare.txt")).unwrap();
    assert!(
        text.contains("flash") && text.contains("disk"),
        "compare names both runs:\n{text}\n{}",
        stdout(&o)
    );

    // The disk ramp names the disk tablespace's device and folder at every step, never the
    // data directory.
    let disk_steps = steps(&out("disk"));
    assert_eq!(disk_steps.len(), 2);
    for s in &disk_steps {
        let storage = s["storage"].as_str().unwrap_or_default();
        assert!(
            storage.starts_with(&format!("{} at ", disk_device.name))
                && storage.contains(disk_loc.to_str().unwrap()),
            "disk step {} measured {storage:?}, not {} at {}",
            s["step"],
            disk_device.name,
            disk_loc.display()
        );
        for r in step_results(&out("disk"), s) {
            assert_eq!(r["device"]["device"], disk_device.name.as_str(), "{r}");
            assert!(r["config"]["data"]["tablespace"] == "disk_ts", "{r}");
        }
    }
    // The tmpfs ramp has no device to name: its reads are memory, and its results say there
    // is no device figure instead of naming the data directory's disk.
    let flash_steps = steps(&out("flash"));
    assert_eq!(flash_steps.len(), 2);
    for s in &flash_steps {
        assert!(
            s["storage"].is_null(),
            "flash step {}: {}",
            s["step"],
            s["storage"]
        );
        for r in step_results(&out("flash"), s) {
            assert!(
                r["device"].is_null(),
                "tmpfs has no device: {}",
                r["device"]
            );
            assert!(r["config"]["data"]["tablespace"] == "flash_ts", "{r}");
        }
    }
    let svg = std::fs::read_to_string(out("flash").join("iops.svg")).unwrap();
    assert!(
        svg.contains("tablespace flash_ts"),
        "the chart names the storage"
    );
}
