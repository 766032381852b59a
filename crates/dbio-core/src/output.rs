//! Result folders and the files dbio writes into them, made so that nothing dbio did not
//! create is replaced, followed or lost.
//!
//! - Every file is written through a fresh temporary file in the same folder, created
//!   exclusively under a random name (`O_CREAT | O_EXCL`: open(2) then fails on any existing
//!   name, a symlink included, instead of following it), written, fsynced, and renamed over
//!   the final name. rename(2) replaces a symlink planted at the final name; it never writes
//!   through it. The folder is fsynced after the rename, so the new name survives a crash.
//! - A result folder is proven writable before the work starts (a probe file is created and
//!   removed), and a folder that already holds files is refused unless the caller allows
//!   overwriting, so a second run cannot silently replace the first one's result.
//! - When writing fails anyway, the caller can keep the main document in a fallback file
//!   under `$TMPDIR`, created the same exclusive way.

use std::fs::{File, Permissions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::CoreError;

/// Files are created `0666` less the umask, as `open(2)` with `O_CREAT` would make them.
fn file_mode() -> Permissions {
    Permissions::from_mode(0o666)
}

/// The folder a path lives in (`.` for a bare file name).
fn parent_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> CoreError + '_ {
    move |source| CoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn out_dir_error(path: &Path, message: impl Into<String>) -> CoreError {
    CoreError::OutDir {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// fsync of a folder, so that a rename or a new entry in it is durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes `bytes` to `path`: a fresh temporary file in the same folder (exclusive, random
/// name), fsynced, renamed over `path`, then the folder fsynced. A reader never sees half a
/// file, and a symlink at `path` or at any temporary name is never followed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CoreError> {
    write_atomic_then(path, bytes, |_| Ok(()))
}

/// [`write_atomic`], with `prepare` given the temporary file before the rename: to set its
/// owner or mode through the descriptor (fchown, fchmod), never through the name.
pub fn write_atomic_then(
    path: &Path,
    bytes: &[u8],
    prepare: impl FnOnce(&File) -> std::io::Result<()>,
) -> Result<(), CoreError> {
    let dir = parent_of(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(file_mode())
        .tempfile_in(dir)
        .map_err(io_error(path))?;
    tmp.write_all(bytes).map_err(io_error(path))?;
    prepare(tmp.as_file()).map_err(io_error(path))?;
    tmp.as_file().sync_all().map_err(io_error(path))?;
    tmp.persist(path).map_err(|e| io_error(path)(e.error))?;
    sync_dir(dir).map_err(io_error(dir))
}

/// Makes `dir` ready to receive results: created when missing, refused when it is not a
/// folder, when it holds files and `overwrite` is off, or when a probe file cannot be
/// created in it. Every refusal is a usage error (exit 2) that says what to do.
pub fn prepare_dir(dir: &Path, overwrite: bool) -> Result<(), CoreError> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Err(out_dir_error(
                dir,
                "exists and is not a folder; choose another --out",
            ));
        }
        Ok(_) => {
            let used = std::fs::read_dir(dir)
                .map_err(|e| out_dir_error(dir, format!("cannot list it: {e}")))?
                .next()
                .is_some();
            if used && !overwrite {
                return Err(out_dir_error(
                    dir,
                    "already holds files (an earlier result?); choose a new or empty --out, or add --overwrite to replace the files of the same name",
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)
                .map_err(|e| out_dir_error(dir, format!("cannot create it: {e}")))?;
        }
        Err(e) => return Err(out_dir_error(dir, format!("cannot use it: {e}"))),
    }
    probe(dir)
}

/// Proves `dir` writable: a probe file is created (exclusively), written, fsynced, removed.
fn probe(dir: &Path) -> Result<(), CoreError> {
    let unwritable = |e: std::io::Error| {
        out_dir_error(dir, format!("is not writable ({e}); choose another --out"))
    };
    let mut f = tempfile::Builder::new()
        .prefix(".dbio-probe.")
        .tempfile_in(dir)
        .map_err(unwritable)?;
    f.write_all(b"dbio").map_err(unwritable)?;
    f.as_file().sync_all().map_err(unwritable)?;
    f.close().map_err(unwritable)
}

/// `results/<UTC timestamp>-<label>` with the label made safe for a file name.
fn default_base(label: &str) -> PathBuf {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let label: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from("results").join(format!("{stamp}-{label}"))
}

/// Creates a new folder `results/<UTC timestamp>-<label>/` (`-2`, `-3`, ... appended when
/// that name is taken: mkdir(2) is atomic, so two runs in the same second never share one)
/// and proves it writable.
pub fn create_default_dir(label: &str) -> Result<PathBuf, CoreError> {
    let base = default_base(label);
    let parent = parent_of(&base);
    std::fs::create_dir_all(parent)
        .map_err(|e| out_dir_error(parent, format!("cannot create it: {e}")))?;
    for n in 1u32.. {
        let dir = if n == 1 {
            base.clone()
        } else {
            PathBuf::from(format!("{}-{n}", base.display()))
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                probe(&dir)?;
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(out_dir_error(&dir, format!("cannot create it: {e}"))),
        }
    }
    unreachable!("u32 names run out only after four billion folders in one second")
}

/// The result folder: `explicit` prepared (see [`prepare_dir`]), or a new default folder
/// named after `label`.
pub fn result_dir(
    explicit: Option<&Path>,
    label: &str,
    overwrite: bool,
) -> Result<PathBuf, CoreError> {
    match explicit {
        Some(dir) => {
            prepare_dir(dir, overwrite)?;
            Ok(dir.to_path_buf())
        }
        None => create_default_dir(label),
    }
}

/// Keeps `bytes` in a new file `$TMPDIR/dbio-<stem>-<random>.<ext>` (named after `name`,
/// e.g. `result.json`), created exclusively and fsynced; returns its path.
pub fn save_fallback(name: &str, bytes: &[u8]) -> Result<PathBuf, CoreError> {
    let (stem, ext) = match name.rsplit_once('.') {
        Some((s, e)) => (s, format!(".{e}")),
        None => (name, String::new()),
    };
    let dir = std::env::temp_dir();
    let mut f = tempfile::Builder::new()
        .prefix(&format!("dbio-{stem}-"))
        .suffix(&ext)
        .permissions(file_mode())
        .tempfile_in(&dir)
        .map_err(io_error(&dir))?;
    f.write_all(bytes).map_err(io_error(f.path()))?;
    f.as_file().sync_all().map_err(io_error(f.path()))?;
    let (_, path) = f.keep().map_err(|e| io_error(&dir)(e.error))?;
    let _ = sync_dir(&dir);
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_symlink_at_the_final_name_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        symlink(&victim, out.join("result.json")).unwrap();
        symlink(&victim, out.join("result.tmp")).unwrap();
        write_atomic(&out.join("result.json"), b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        let m = std::fs::symlink_metadata(out.join("result.json")).unwrap();
        assert!(m.file_type().is_file());
        assert_eq!(std::fs::read(out.join("result.json")).unwrap(), b"{}");
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn files_get_the_usual_mode_not_the_temporary_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.txt");
        write_atomic(&path, b"x").unwrap();
        // The same mode as a file created plainly (0666 less the umask), not tempfile's 0600.
        let plain = dir.path().join("plain");
        std::fs::File::create(&plain).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), mode(&plain));
    }

    #[test]
    fn a_used_folder_needs_overwrite_and_a_file_is_no_folder() {
        let dir = tempfile::tempdir().unwrap();
        prepare_dir(dir.path(), false).unwrap();
        std::fs::write(dir.path().join("result.json"), "old").unwrap();
        let e = prepare_dir(dir.path(), false).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Usage);
        assert!(e.to_string().contains("--overwrite"), "{e}");
        prepare_dir(dir.path(), true).unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "the probe file is removed"
        );
        let e = prepare_dir(&dir.path().join("result.json"), true).unwrap_err();
        assert!(e.to_string().contains("not a folder"), "{e}");
        let nested = dir.path().join("a/b");
        prepare_dir(&nested, false).unwrap();
        assert!(nested.is_dir());
    }

    #[test]
    fn the_fallback_is_a_new_file_in_tmpdir() {
        let a = save_fallback("result.json", b"{\"a\":1}").unwrap();
        let b = save_fallback("result.json", b"{\"a\":2}").unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(std::env::temp_dir()));
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("dbio-result-") && name.ends_with(".json"),
            "{name}"
        );
        assert_eq!(std::fs::read(&a).unwrap(), b"{\"a\":1}");
        let _ = std::fs::remove_file(a);
        let _ = std::fs::remove_file(b);
    }
}
