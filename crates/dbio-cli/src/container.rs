//! A throwaway PostgreSQL server in a container, for `dbio nightly`, driven through the
//! engine's command line: podman or docker, with compose when the engine has one that keeps
//! to the host's network (docker compose v2, podman-compose 1.6 or later), else plain `run`
//! commands; both start the same container.
//!
//! The container shares the host's network (`--network host`, no bridge, no port mapping)
//! and the server listens on 127.0.0.1 only. Its data folder is a volume of its own (a
//! folder on the engine's storage, so the device figures are those of a real device, not of
//! an overlay), and its settings are arguments of their own, never a string a shell or a
//! compose tool must split. The server's password is made for the night and never appears
//! on a command line. When the night ends, however it ends, the container and its volumes
//! are removed (`Drop`), and a server that does not come up is reported with the last lines
//! of its log, exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use dbio_core::config::ContainerConfig;
use dbio_core::units::format_bytes;
use dbio_postgres::Target;

use crate::Failure;
use crate::signals::interrupts;

/// Where the server's data lives inside the container (the postgres image's default).
const PGDATA: &str = "/var/lib/postgresql/data";

/// Lines of the server's log shown with a failure.
pub const LOG_TAIL: usize = 30;

/// The oldest podman-compose that starts a `network_mode: host` service without a network
/// of its own: 1.0.3 (Debian 12's) adds the project's bridge network to every container.
const PODMAN_COMPOSE_MIN: (u32, u32, u32) = (1, 6, 0);

/// The container engine's command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    Podman,
    Docker,
}

impl Engine {
    pub fn program(self) -> &'static str {
        match self {
            Engine::Podman => "podman",
            Engine::Docker => "docker",
        }
    }

    fn command(self) -> Command {
        Command::new(self.program())
    }

    /// How this engine's compose is run, or why plain `run` commands are used instead.
    fn compose(self) -> Result<Vec<String>, String> {
        match self {
            Engine::Docker => {
                match run_quiet(Command::new("docker").args(["compose", "version"])) {
                    Ok(_) => Ok(vec!["docker".into(), "compose".into()]),
                    Err(_) => Err("docker compose (v2) is not installed".into()),
                }
            }
            Engine::Podman => {
                let out = run_quiet(Command::new("podman-compose").arg("version"))
                    .map_err(|_| "podman-compose is not installed".to_string())?;
                let version = podman_compose_version(&out)
                    .ok_or_else(|| "podman-compose did not say its version".to_string())?;
                if version < PODMAN_COMPOSE_MIN {
                    let (a, b, c) = version;
                    let (x, y, z) = PODMAN_COMPOSE_MIN;
                    return Err(format!(
                        "podman-compose {a}.{b}.{c} adds a bridge network to a network_mode: host service; {x}.{y}.{z} or later does not"
                    ));
                }
                Ok(vec!["podman-compose".into()])
            }
        }
    }
}

/// `podman-compose version` prints "podman-compose version 1.6.0" (1.0.x: "podman-composer
/// version  1.0.3") before podman's own version line.
fn podman_compose_version(text: &str) -> Option<(u32, u32, u32)> {
    let line = text
        .lines()
        .find(|l| l.starts_with("podman-compose") && l.contains("version"))?;
    let v = line.split_whitespace().last()?;
    let mut n = v.split('.').map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
            .ok()
    });
    Some((
        n.next()??,
        n.next().flatten().unwrap_or(0),
        n.next().flatten().unwrap_or(0),
    ))
}

/// Runs a command to its end, capturing both streams; Err with what it printed when it
/// failed or could not start.
fn run_quiet(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", program_of(cmd)))?;
    if out.status.success() {
        Ok(text_of(&out))
    } else {
        Err(format!(
            "`{}` exited with {}: {}",
            line_of(cmd),
            out.status,
            text_of(&out).trim()
        ))
    }
}

fn text_of(out: &Output) -> String {
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text
}

fn program_of(cmd: &Command) -> String {
    cmd.get_program().to_string_lossy().into_owned()
}

/// The command line for messages (the password is never on it: it goes by environment).
fn line_of(cmd: &Command) -> String {
    std::iter::once(program_of(cmd))
        .chain(cmd.get_args().map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// How the container was started, so it is stopped the same way.
enum Started {
    Run,
    /// The compose command and the folder holding its compose file.
    Compose(Vec<String>, tempfile::TempDir),
}

/// A running server container; removed with its volumes when dropped.
pub struct ServerContainer {
    engine: Engine,
    name: String,
    volume: String,
    port: u16,
    password: String,
    started: Option<Started>,
    removed: bool,
}

impl ServerContainer {
    /// Starts the server of `config` with `engine` and waits until it accepts connections.
    /// Every failure is exit 2 and carries the container's last log lines.
    pub async fn start(
        engine: Engine,
        config: &ContainerConfig,
        quiet: bool,
    ) -> Result<ServerContainer, Failure> {
        let program = engine.program();
        run_quiet(engine.command().arg("--version")).map_err(|e| {
            Failure::new(
                2,
                format!(
                    "{program} cannot be run ({e}); install it (Debian: apt-get install {}) or measure a server of your own with --dsn",
                    match engine {
                        Engine::Podman => "podman runc",
                        Engine::Docker => "docker.io",
                    }
                ),
            )
        })?;
        // docker's client without a daemon (or a podman that cannot read its configuration)
        // says so here, not as a missing image.
        run_quiet(engine.command().arg("info"))
            .map_err(|e| Failure::new(2, format!("{program} does not work here: {e}")))?;
        run_quiet(
            engine
                .command()
                .args(["image", "inspect", "--format", "{{.Id}}", &config.image]),
        )
        .map_err(|_| {
            Failure::new(
                2,
                format!(
                    "the image {} is not in {program}'s image store, and the nightly does not pull one: \
                     build it with deploy/images.sh (no registry needed), or name another in container.image",
                    config.image
                ),
            )
        })?;
        // With the host's network a server already on the port would be the one measured.
        std::net::TcpListener::bind(("127.0.0.1", config.port)).map_err(|e| {
            Failure::new(
                2,
                format!(
                    "port {} on 127.0.0.1 is taken ({e}): the container shares the host's network; set container.port to a free port",
                    config.port
                ),
            )
        })?;
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
        let name = format!("dbio-nightly-{stamp}-{}", std::process::id());
        let mut c = ServerContainer {
            engine,
            volume: format!("{name}-data"),
            name,
            port: config.port,
            password: night_password()?,
            started: None,
            removed: false,
        };
        run_quiet(engine.command().args([
            "volume",
            "create",
            "--label",
            "dbio.nightly=1",
            &c.volume,
        ]))
        .map_err(|e| Failure::new(2, format!("the server's volume: {e}")))?;
        let how = match engine.compose() {
            Ok(compose) => {
                let how = format!("{} up", compose.join(" "));
                // Recorded before `up`: what a failed `up` made is taken down as well.
                let dir = tempfile::Builder::new()
                    .prefix("dbio-nightly-compose-")
                    .tempdir()
                    .map_err(|e| Failure::new(2, format!("a folder for the compose file: {e}")))?;
                let file = dir.path().join("compose.yaml");
                c.started = Some(Started::Compose(compose.clone(), dir));
                c.compose_up(&compose, &file, config)?;
                how
            }
            Err(why) => {
                c.started = Some(Started::Run);
                c.run(config)?;
                format!("{program} run ({why})")
            }
        };
        if !quiet {
            errln!(
                "nightly: {} started with {how}: PostgreSQL on 127.0.0.1:{}, {}, {}",
                config.image,
                config.port,
                match config.memory {
                    Some(m) => format!("memory cap {}", format_bytes(m.to_bytes(8192))),
                    None => "no memory cap".into(),
                },
                config.server_args()[1..].join(" ")
            );
        }
        c.wait_ready(config.start_timeout.0).await?;
        Ok(c)
    }

    /// The libpq connection string of the server.
    pub fn dsn(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres password={} sslmode=disable connect_timeout=5",
            self.port, self.password
        )
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the night's data volume is on this host (`volume inspect`'s Mountpoint): the
    /// data's device, for the platform canary. Err with the reason when the engine does not
    /// say (a remote engine, a volume driver without a local folder).
    pub fn data_mountpoint(&self) -> Result<PathBuf, String> {
        let out = self
            .engine
            .command()
            .args([
                "volume",
                "inspect",
                "--format",
                "{{.Mountpoint}}",
                &self.volume,
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{} volume inspect: {e}", self.engine.program()))?;
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || path.is_empty() || !Path::new(&path).is_dir() {
            return Err(format!(
                "{} volume inspect {} gave no folder on this host ({})",
                self.engine.program(),
                self.volume,
                text_of(&out).trim()
            ));
        }
        Ok(PathBuf::from(path))
    }

    /// The server's log (the container's output), or its last `tail` lines.
    pub fn logs(&self, tail: Option<usize>) -> String {
        let mut cmd = self.engine.command();
        cmd.arg("logs");
        if let Some(n) = tail {
            cmd.args(["--tail", &n.to_string()]);
        }
        match cmd.arg(&self.name).stdin(Stdio::null()).output() {
            Ok(out) => text_of(&out),
            Err(e) => format!("({} logs: {e})", self.engine.program()),
        }
    }

    /// A failure (exit 2) with the container's last log lines.
    fn failure(&self, message: String) -> Failure {
        Failure::new(
            2,
            format!(
                "{message}\nthe last lines of the server's log ({} logs {}):\n{}",
                self.engine.program(),
                self.name,
                indent(&self.logs(Some(LOG_TAIL)))
            ),
        )
    }

    fn run(&self, config: &ContainerConfig) -> Result<(), Failure> {
        let mut cmd = self.engine.command();
        cmd.args(["run", "--detach", "--pull", "never", "--name", &self.name])
            .args(["--label", "dbio.nightly=1", "--network", "host"])
            .args(["--shm-size", "256m"]);
        if let Some(m) = config.memory {
            let bytes = m.to_bytes(8192).to_string();
            cmd.args(["--memory", &bytes, "--memory-swap", &bytes]);
        }
        // `--env NAME` takes the value from this process's environment: not on a command line.
        cmd.args(["--env", "POSTGRES_PASSWORD", "--env"])
            .arg(format!("PGDATA={PGDATA}"))
            .arg("--volume")
            .arg(format!("{}:{PGDATA}", self.volume))
            .arg(&config.image)
            .args(config.server_args())
            .env("POSTGRES_PASSWORD", &self.password);
        run_quiet(&mut cmd)
            .map(|_| ())
            .map_err(|e| self.failure(format!("the server's container did not start: {e}")))
    }

    /// Writes the compose file (one service, the same container as `run` starts) and
    /// brings it up.
    fn compose_up(
        &self,
        compose: &[String],
        file: &Path,
        config: &ContainerConfig,
    ) -> Result<(), Failure> {
        std::fs::write(file, compose_file(self, config))
            .map_err(|e| Failure::new(2, format!("{}: {e}", file.display())))?;
        let mut cmd = compose_command(compose, file, &self.name);
        cmd.args(["up", "--detach"]);
        run_quiet(&mut cmd)
            .map(|_| ())
            .map_err(|e| self.failure(format!("the server's container did not start: {e}")))
    }

    /// Waits until the server accepts the night's password, the container exits, or
    /// `timeout` passes.
    async fn wait_ready(&self, timeout: Duration) -> Result<(), Failure> {
        let target = Target::from_dsn(&self.dsn()).map_err(Failure::from)?;
        let deadline = tokio::time::Instant::now() + timeout;
        let stop = interrupts();
        loop {
            let last = match target.connect("dbio-nightly").await {
                Ok(_) => return Ok(()),
                Err(e) => e.to_string(),
            };
            let state = run_quiet(self.engine.command().args([
                "inspect",
                "--format",
                "{{.State.Status}} {{.State.ExitCode}}",
                &self.name,
            ]))
            .unwrap_or_default();
            let mut words = state.split_whitespace();
            if let (Some(status), code) = (words.next(), words.next())
                && matches!(status, "exited" | "dead" | "stopped")
            {
                return Err(self.failure(format!(
                    "the server's container {} ended (status {status}, exit code {}) before it accepted connections",
                    self.name,
                    code.unwrap_or("?")
                )));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(self.failure(format!(
                    "the server in container {} did not accept connections within {} s (container.start_timeout); the last attempt: {last}",
                    self.name,
                    timeout.as_secs()
                )));
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                by = stop.clone().reached(1) => {
                    return Err(Failure::new(1, format!("the nightly was interrupted by {by} while its server started")));
                }
            }
        }
    }

    /// Stops and removes the container and every volume it had (its data volume, and any
    /// anonymous one its image declares); returns what could not be removed.
    pub fn remove(&mut self) -> Vec<String> {
        if self.removed {
            return Vec::new();
        }
        self.removed = true;
        let mut problems = Vec::new();
        let mut volumes = vec![self.volume.clone()];
        if let Ok(text) = run_quiet(self.engine.command().args([
            "inspect",
            "--format",
            "{{range .Mounts}}{{if .Name}}{{.Name}} {{end}}{{end}}",
            &self.name,
        ])) {
            for v in text.split_whitespace() {
                if !volumes.iter().any(|k| k == v) {
                    volumes.push(v.to_string());
                }
            }
        }
        if let Some(Started::Compose(compose, dir)) = &self.started {
            let mut cmd = compose_command(compose, &dir.path().join("compose.yaml"), &self.name);
            if let Err(e) = run_quiet(cmd.args(["down", "--timeout", "10"])) {
                problems.push(e);
            }
        }
        // After compose's `down` the container is gone; `rm` then says so, which is fine.
        let _ = run_quiet(
            self.engine
                .command()
                .args(["rm", "--force", "--volumes", &self.name]),
        );
        if run_quiet(
            self.engine
                .command()
                .args(["container", "inspect", &self.name]),
        )
        .is_ok()
        {
            problems.push(format!("container {} is still there", self.name));
        }
        for v in volumes {
            let _ = run_quiet(self.engine.command().args(["volume", "rm", "--force", &v]));
            if run_quiet(self.engine.command().args(["volume", "inspect", &v])).is_ok() {
                problems.push(format!("volume {v} is still there"));
            }
        }
        problems
    }
}

impl Drop for ServerContainer {
    fn drop(&mut self) {
        for p in self.remove() {
            errln!(
                "dbio: warning: {p}; remove it with `{} rm -f -v {}` / `{} volume rm`",
                self.engine.program(),
                self.name,
                self.engine.program()
            );
        }
    }
}

fn compose_command(compose: &[String], file: &Path, project: &str) -> Command {
    let mut cmd = Command::new(&compose[0]);
    cmd.args(&compose[1..])
        .arg("--file")
        .arg(file)
        .args(["--project-name", project]);
    cmd
}

/// The compose file: one service, the container `run` would start, in JSON (which YAML
/// reads as it is); the volume is the night's own, made beforehand (`external`), so that
/// compose neither names nor keeps it.
fn compose_file(c: &ServerContainer, config: &ContainerConfig) -> String {
    let mut service = serde_json::json!({
        "image": config.image,
        "container_name": c.name,
        "network_mode": "host",
        "pull_policy": "never",
        "labels": {"dbio.nightly": "1"},
        "environment": {"POSTGRES_PASSWORD": c.password, "PGDATA": PGDATA},
        "command": config.server_args(),
        "shm_size": "256m",
        "volumes": [format!("{}:{PGDATA}", c.volume)],
    });
    if let Some(m) = config.memory {
        let bytes = m.to_bytes(8192);
        service["mem_limit"] = bytes.into();
        service["memswap_limit"] = bytes.into();
    }
    let doc = serde_json::json!({
        "services": {"postgres": service},
        "volumes": {c.volume.clone(): {"external": true, "name": c.volume}},
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// A password for the night's server: 128 random bits as hex.
fn night_password() -> Result<String, Failure> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .map_err(|e| Failure::new(2, format!("/dev/urandom: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The server's whole log into `dir/server.log` (best effort: the night's files are kept).
pub fn save_log(c: &ServerContainer, dir: &Path) -> Option<PathBuf> {
    let path = dir.join("server.log");
    std::fs::write(&path, c.logs(None)).ok()?;
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn podman_compose_versions_are_read() {
        assert_eq!(
            podman_compose_version("podman-compose version 1.6.0\npodman version 4.3.1\n"),
            Some((1, 6, 0))
        );
        assert_eq!(
            podman_compose_version(
                "['podman', '--version', '']\nusing podman version: 4.3.1\npodman-composer version  1.0.3\npodman --version \n"
            ),
            Some((1, 0, 3))
        );
        assert!(Some((1, 0, 3)) < Some(PODMAN_COMPOSE_MIN));
        assert_eq!(podman_compose_version("nothing"), None);
    }

    #[test]
    fn the_compose_file_keeps_each_setting_one_argument_and_the_host_network() {
        let mut config = ContainerConfig::default();
        config
            .settings
            .insert("listen_addresses".into(), "127.0.0.1,::1".into());
        let c = ServerContainer {
            engine: Engine::Podman,
            name: "dbio-nightly-x".into(),
            volume: "dbio-nightly-x-data".into(),
            port: 55432,
            password: "p".into(),
            started: None,
            removed: true,
        };
        let doc: serde_json::Value = serde_json::from_str(&compose_file(&c, &config)).unwrap();
        let s = &doc["services"]["postgres"];
        assert_eq!(s["network_mode"], "host");
        assert!(s.get("ports").is_none() && s.get("networks").is_none());
        assert_eq!(s["mem_limit"], 256u64 << 20);
        let command: Vec<&str> = s["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            command
                .windows(2)
                .any(|w| w == ["-c", "listen_addresses=127.0.0.1,::1"]),
            "{command:?}"
        );
        assert_eq!(doc["volumes"]["dbio-nightly-x-data"]["external"], true);
        assert!(doc.get("networks").is_none());
    }
}
