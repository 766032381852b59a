//! deploy/: no Kubernetes cluster runs here, so the manifests are checked for the structure a
//! sharded run depends on and validated offline against the API's schemas
//! (kubernetes-validate --strict, 1.25 to 1.37), and the Dockerfile's build line is run as
//! written (the image's binary is that build's output). Their command lines run in dbio's
//! image in tests/e2e/container.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    serde_saphyr::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The container's shell command line and its environment (name -> value).
fn container(job: &Value) -> (String, Vec<(String, String)>) {
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    let mut line: Vec<String> = Vec::new();
    for key in ["command", "args"] {
        for part in c[key].as_array().into_iter().flatten() {
            line.push(part.as_str().unwrap().to_string());
        }
    }
    let env = c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    (line.join(" "), env)
}

#[test]
fn the_sharded_job_is_indexed_and_each_pod_takes_its_shard_from_the_completion_index() {
    let job = yaml("deploy/k8s/dbio-sharded-job.yaml");
    assert_eq!(job["apiVersion"], "batch/v1");
    assert_eq!(job["kind"], "Job");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let completions = spec["completions"].as_u64().expect("completions");
    assert!(completions >= 2, "a sharded run has at least 2 shards");
    assert_eq!(
        spec["parallelism"].as_u64(),
        Some(completions),
        "every shard runs at once: they share one window"
    );
    // A retried shard would start after the others' window.
    assert_eq!(spec["backoffLimit"], 0);
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never");

    let (line, env) = container(&job);
    let var = |name: &str| {
        env.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("env {name} is missing: {env:?}"))
    };
    assert_eq!(var("SHARDS").parse::<u64>().ok(), Some(completions));
    let start_at = var("START_AT");
    assert!(
        chrono::DateTime::parse_from_rfc3339(&start_at).is_ok(),
        "START_AT {start_at} is an RFC 3339 instant"
    );
    assert!(line.contains("dbio run"), "{line}");
    assert!(
        line.contains("--shard \"${JOB_COMPLETION_INDEX}/${SHARDS}\""),
        "the shard comes from the completion index: {line}"
    );
    assert!(line.contains("--start-at \"${START_AT}\""), "{line}");
    // One run id for all shards: they hold the data set together and merge checks it.
    assert!(line.contains("--run-id \"${RUN_NAME}\""), "{line}");
    assert!(
        line.contains("shard-${JOB_COMPLETION_INDEX}"),
        "each shard writes its own folder: {line}"
    );

    // The merge Job reads what the shards wrote, from the same claim.
    let merge = yaml("deploy/k8s/dbio-merge-job.yaml");
    assert_eq!(merge["kind"], "Job");
    let (mline, _) = container(&merge);
    assert!(
        mline.contains("dbio merge") && mline.contains("shard-*/result.json"),
        "{mline}"
    );
    let claim = |j: &Value| {
        j["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|v| v["persistentVolumeClaim"]["claimName"].as_str())
            .map(str::to_string)
    };
    assert_eq!(claim(&job), claim(&merge));
    assert!(claim(&job).is_some());

    // The plain-shell form is valid shell and does the same.
    let sh = std::fs::read_to_string(repo().join("deploy/shards.sh")).unwrap();
    let check = Command::new("bash")
        .args(["-n", repo().join("deploy/shards.sh").to_str().unwrap()])
        .status()
        .unwrap();
    assert!(check.success());
    for needle in [
        "--shard \"$i/$n\"",
        "--start-at \"$start_at\"",
        "--run-id \"$run_id\"",
        "merge",
    ] {
        assert!(sh.contains(needle), "deploy/shards.sh lacks {needle}");
    }
}

// The Dockerfile's `RUN cargo build ...` line, run as written in the workspace (a target
// folder of its own, target/docker), then the binary the image copies. The release
// profile's optimisation is overridden (opt-level 0, no LTO): an optimised cold build took
// 20 minutes of wall time here, and what this test checks is the line itself (packages,
// features, lockfile, where the binary lands), not the optimiser; DBIO_TEST_OPTIMISED_IMAGE=1
// builds exactly what the image builds.
#[test]
fn the_dockerfile_s_cargo_build_line_builds_a_working_dbio() {
    let dockerfile = std::fs::read_to_string(repo().join("deploy/Dockerfile")).unwrap();
    let build_line = dockerfile
        .lines()
        .find_map(|l| l.trim().strip_prefix("RUN cargo build"))
        .expect("the Dockerfile builds with `RUN cargo build ...`");
    assert!(
        !build_line.contains(['&', '|', ';', '$', '\\', '"', '\'']),
        "the build line is plain arguments: {build_line}"
    );
    let args: Vec<&str> = std::iter::once("build")
        .chain(build_line.split_whitespace())
        .collect();
    assert!(
        args.contains(&"--release") && args.contains(&"--locked"),
        "{args:?}"
    );
    // Where the image takes the binary from, relative to the build's WORKDIR.
    let workdir = dockerfile
        .lines()
        .find_map(|l| l.trim().strip_prefix("WORKDIR "))
        .expect("WORKDIR")
        .trim();
    let copied = dockerfile
        .lines()
        .find_map(|l| l.trim().strip_prefix("COPY --from=build "))
        .and_then(|l| l.split_whitespace().next())
        .expect("COPY --from=build SRC DST");
    let relative = copied
        .strip_prefix(workdir)
        .and_then(|p| p.strip_prefix("/target/"))
        .unwrap_or_else(|| panic!("{copied} is under {workdir}/target"));

    let target = repo().join("target").join("docker");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // A clean environment, as in an image build: the CARGO_* and RUST* variables cargo sets
    // for this test would otherwise reach build scripts (ring's, through cc) and rebuild them.
    let mut build = Command::new(cargo);
    build.env_clear();
    for keep in [
        "PATH",
        "HOME",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        "TMPDIR",
    ] {
        if let Some(v) = std::env::var_os(keep) {
            build.env(keep, v);
        }
    }
    if std::env::var_os("DBIO_TEST_OPTIMISED_IMAGE").is_none() {
        build
            .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
            .env("CARGO_PROFILE_RELEASE_LTO", "off")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "256")
            .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
            .env("CARGO_PROFILE_RELEASE_INCREMENTAL", "true");
    }
    let status = build
        .args(&args)
        .current_dir(repo())
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo {} failed", args.join(" "));
    let bin = target.join(relative);
    let out = Command::new(&bin).arg("--version").output().unwrap();
    assert!(out.status.success(), "{} --version", bin.display());
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.starts_with("dbio ") && version.contains(env!("CARGO_PKG_VERSION")),
        "{version}"
    );
    // It is this tree's dbio: the merge command the shards' results go through is in it.
    let help = Command::new(&bin)
        .args(["merge", "--help"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("--max-skew"),
        "{}",
        String::from_utf8_lossy(&help.stdout)
    );
}

/// Both Jobs' pod specs.
fn pod_specs() -> Vec<(String, Value)> {
    [
        "deploy/k8s/dbio-sharded-job.yaml",
        "deploy/k8s/dbio-merge-job.yaml",
    ]
    .iter()
    .map(|p| (p.to_string(), yaml(p)["spec"]["template"]["spec"].clone()))
    .collect()
}

// Before: the pods ran as the image's user on a claim a root-owned volume made unwritable
// ("Permission denied"), and `image: dbio:latest` meant a pull from a public registry on
// every start (policy Always for :latest).
#[test]
fn the_jobs_run_as_non_root_on_a_writable_claim_with_the_image_they_are_given() {
    for (path, pod) in pod_specs() {
        let sc = &pod["securityContext"];
        assert_eq!(sc["runAsNonRoot"], true, "{path}");
        // deploy/Dockerfile's USER.
        assert_eq!(sc["runAsUser"], 65532, "{path}");
        assert_eq!(
            sc["fsGroup"], 65532,
            "{path}: the claim's files are the pods' group's"
        );
        let c = &pod["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent", "{path}");
        assert_eq!(
            c["image"], "localhost/dbio:latest",
            "{path}: deploy/images.sh's name"
        );
        assert_eq!(
            c["securityContext"]["readOnlyRootFilesystem"], true,
            "{path}"
        );
        let requests = &c["resources"]["requests"];
        assert!(
            requests["cpu"].is_string() && requests["memory"].is_string(),
            "{path}: {requests}"
        );
        // A read-only root: $TMPDIR (the fallback for a result /results cannot take) is a
        // volume of its own.
        let mounts = c["volumeMounts"].to_string();
        assert!(mounts.contains("\"/tmp\""), "{path}: {mounts}");
    }
    let readme = std::fs::read_to_string(repo().join("deploy/README.md")).unwrap();
    assert!(
        readme.contains("localhost/dbio:latest") && readme.contains("image:"),
        "deploy/README.md says which image name to set"
    );
}

// The manifests are valid Kubernetes objects for every version from 1.25 to 1.37, checked
// offline against the API's OpenAPI schemas with unknown fields refused (--strict); a typo
// in a field name fails that check.
#[test]
#[cfg_attr(
    dbio_missing_kubernetes_validate,
    ignore = "needs kubernetes-validate (scripts/test.sh installs it into .dbio/venv)"
)]
fn the_manifests_pass_kubernetes_validate_strict_from_1_25_to_1_37() {
    let tool = dbio_tests::containers::require_venv_tool("kubernetes-validate");
    let files = [
        repo().join("deploy/k8s/dbio-sharded-job.yaml"),
        repo().join("deploy/k8s/dbio-merge-job.yaml"),
    ];
    let validate = |version: &str, files: &[PathBuf]| {
        Command::new(&tool)
            .args(["--strict", "--no-warn", "-k", version])
            .args(files)
            .output()
            .unwrap()
    };
    for minor in 25..=37 {
        let version = format!("1.{minor}.0");
        let out = validate(&version, &files);
        assert!(
            out.status.success(),
            "{version}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(said.matches("passed").count(), 2, "{version}: {said}");
    }
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo.yaml");
    let text = std::fs::read_to_string(&files[1])
        .unwrap()
        .replace("imagePullPolicy:", "imagePulPolicy:");
    std::fs::write(&typo, text).unwrap();
    let out = validate("1.37.0", &[typo]);
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
