//! A table's files as the local file system shows them (tests on any
//! store list them through a [`super::TableUri`]), and what their names say.

use std::path::{Path, PathBuf};

/// Paths of the files under `root` (recursively) whose file name satisfies
/// `pred`, sorted; none when `root` does not exist.
pub fn file_paths(root: &Path, pred: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{}: {e}", d.display()),
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() {
                stack.push(e.path());
            } else if pred(&name) {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Whether a file name is a log file's (`.{fileId}_{instant}.log.{n}_{token}`),
/// not its marker's, nor the staging file (`<name>#<n>`) the local store
/// writes it through before renaming it into place.
pub fn is_log(name: &str) -> bool {
    name.contains(".log.") && !is_marker(name) && !is_staging(name)
}

/// Whether a file name is a local store's staging file, `<name>#<n>`.
fn is_staging(name: &str) -> bool {
    name.rsplit_once('#').is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a file name is a write marker's (`{file}.marker.{IOType}`).
pub fn is_marker(name: &str) -> bool {
    name.contains(".marker.")
}
