//! Crash-safe file replacement: write to a temporary file beside the target, fsync it,
//! rename it over the target, fsync the directory. A crash leaves either the old file or
//! the new one, never a torn mix; an abandoned temporary file is removed on drop.

use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

/// A file being written that replaces `target` only on [`AtomicFile::commit`].
pub struct AtomicFile {
    target: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
}

impl AtomicFile {
    /// Starts a new temporary file for `target`.
    pub fn create(target: &Path) -> Result<Self> {
        let name = target.file_name().with_context(|| format!("{} has no file name", target.display()))?;
        let tmp = target.with_file_name(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
        let file = OpenOptions::new()
            .write(true)
            .read(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        Ok(AtomicFile { target: target.to_path_buf(), tmp, file: Some(file) })
    }

    /// The open temporary file.
    pub fn file(&self) -> &File {
        self.file.as_ref().expect("file is open until commit")
    }

    /// Flushes to disk and moves the file into place.
    pub fn commit(mut self) -> Result<()> {
        let file = self.file.take().expect("commit once");
        file.sync_all().with_context(|| format!("cannot sync {}", self.tmp.display()))?;
        drop(file);
        std::fs::rename(&self.tmp, &self.target)
            .with_context(|| format!("cannot rename {} to {}", self.tmp.display(), self.target.display()))?;
        sync_dir(&self.target)
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `bytes` to `target` atomically.
pub fn write_atomic(target: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let f = AtomicFile::create(target)?;
    f.file().write_all(bytes).with_context(|| format!("cannot write {}", target.display()))?;
    f.commit()
}

fn sync_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("cannot sync directory {}", dir.display()))
}
