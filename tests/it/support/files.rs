//! A table's files as the local file system shows them.

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

/// Names of the files under `root` (recursively) that satisfy `pred`, sorted.
pub fn file_names(root: &Path, pred: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out: Vec<String> =
        file_paths(root, pred).iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
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

/// Copies the folder `from` to `to`, recursively.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}
