//! What dbio reads from files, checked before it is believed: read with a size limit (a
//! config named `/dev/zero` is refused at once instead of filling memory), each document
//! counted once (a copy, a hard link, the same run twice), and never overwritten by the
//! command that reads it. The figures inside a result are checked by
//! [`crate::result::RunResult::read_json`], which every reader of a result goes through.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::CoreError;

/// Largest configuration file read: YAML settings are a few KiB.
pub const CONFIG_MAX_BYTES: u64 = 1 << 20;
/// Largest result document read (result.json, ramp.json, calibrate.json): a run of hours
/// with 1 s intervals and 256 sessions is a few MiB.
pub const DOCUMENT_MAX_BYTES: u64 = 256 << 20;

/// Why a file was not read; the caller names the file.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    #[error("larger than {} MiB: not a dbio file (is it the right path?)", max_bytes >> 20)]
    TooLarge { max_bytes: u64 },
    #[error("not UTF-8 text: not a dbio file")]
    NotUtf8,
}

/// The text of `path`, at most `max` bytes of UTF-8; a longer or endless one (a device, a
/// pipe that never ends) is refused after `max + 1` bytes.
pub fn read_bounded(path: &Path, max: u64) -> Result<String, InputError> {
    let f = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    f.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(InputError::TooLarge { max_bytes: max });
    }
    String::from_utf8(bytes).map_err(|_| InputError::NotUtf8)
}

/// A file's identity on its file system (device and inode): a hard link or another path to
/// the same file has the same one.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Refuses inputs that are one file under two names (the same path, a symlink, a hard link).
pub fn refuse_same_file_twice(inputs: &[PathBuf]) -> Result<(), CoreError> {
    let mut seen: Vec<((u64, u64), &PathBuf)> = Vec::new();
    for p in inputs {
        let Some(id) = file_id(p) else { continue };
        if let Some((_, first)) = seen.iter().find(|(i, _)| *i == id) {
            return Err(CoreError::Result {
                path: p.clone(),
                message: format!(
                    "is the same file as {} (the same path, a link or a hard link): each document counts once",
                    first.display()
                ),
            });
        }
        seen.push((id, p));
    }
    Ok(())
}

/// Refuses to write `outputs` when one of them is an input (by path or by inode: `--out A
/// --overwrite` over input A, or a hard link to it): the command would replace what it read.
pub fn refuse_overwriting_inputs(inputs: &[PathBuf], outputs: &[PathBuf]) -> Result<(), CoreError> {
    let canonical = |p: &Path| {
        let parent = p.parent().filter(|d| !d.as_os_str().is_empty());
        let dir = parent
            .map(std::fs::canonicalize)
            .unwrap_or_else(std::env::current_dir);
        dir.ok().zip(p.file_name()).map(|(d, n)| d.join(n))
    };
    for out in outputs {
        let out_id = file_id(out);
        let out_path = canonical(out);
        for input in inputs {
            let same_inode = out_id.is_some() && out_id == file_id(input);
            let same_path = out_path.is_some() && std::fs::canonicalize(input).ok() == out_path;
            if same_inode || same_path {
                return Err(CoreError::OutDir {
                    path: out.clone(),
                    message: format!(
                        "would replace the input {}: choose another --out (an input is never the output)",
                        input.display()
                    ),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_and_huge_files_are_refused_at_the_limit() {
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(matches!(e, InputError::TooLarge { max_bytes } if max_bytes == 1 << 20));
        assert_eq!(
            e.to_string(),
            "larger than 1 MiB: not a dbio file (is it the right path?)"
        );
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        std::fs::write(&f, "x: 1\n").unwrap();
        assert_eq!(read_bounded(&f, 5).unwrap(), "x: 1\n");
        assert!(read_bounded(&f, 4).is_err());
    }

    #[test]
    fn a_hard_link_is_the_same_input_and_never_an_output() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.json");
        std::fs::write(&a, "{}").unwrap();
        std::fs::hard_link(&a, &b).unwrap();
        let c = dir.path().join("c.json");
        std::fs::write(&c, "{}").unwrap();
        assert!(refuse_same_file_twice(&[a.clone(), c]).is_ok());
        assert!(refuse_same_file_twice(&[a.clone(), b.clone()]).is_err());
        let inputs = std::slice::from_ref(&a);
        assert!(refuse_overwriting_inputs(inputs, &[b]).is_err());
        assert!(refuse_overwriting_inputs(inputs, &[dir.path().join("./a.json")]).is_err());
        assert!(refuse_overwriting_inputs(inputs, &[dir.path().join("new.json")]).is_ok());
    }
}
