//! The runner's private work space: one directory per run, with a random
//! name, readable and writable by its owner only (mode 0700), removed at
//! exit (docs/limits.md "Files the suite writes").
//!
//! Everything a run puts on disk lives in it: the `ipc://` sockets a
//! gateway binds, the launched gateways' and engines' logs and `TMPDIR`s.
//! A predictable name (`$TMPDIR/gpu-runner-<pid>`) made with
//! `create_dir_all` would take over whatever is already there: another
//! user's directory, or a symlink planted to point the sockets and logs
//! elsewhere. The directory is made by the `tempfile` crate, which creates
//! a fresh name with `mkdir` (which never follows a symlink at its last
//! component and fails on an existing entry), asked for mode 0700; since nobody
//! else can write inside it, the subdirectories the run makes later need
//! no such care.

use std::path::{Path, PathBuf};

/// The environment variable that keeps the work directory after the run
/// (its path is printed), for looking at logs.
pub const KEEP_ENV: &str = "GPU_RUNNER_KEEP_WORKDIR";

/// A fresh private directory, removed on drop (unless [`KEEP_ENV`] is set).
#[derive(Debug)]
pub struct WorkDir {
    path: PathBuf,
    /// `None` once kept.
    dir: Option<tempfile::TempDir>,
}

impl WorkDir {
    /// A fresh `gpu-runner-XXXXXX` directory under the system's temporary
    /// directory.
    pub fn new() -> std::io::Result<WorkDir> {
        WorkDir::new_in(std::env::temp_dir())
    }

    /// A fresh `gpu-runner-XXXXXX` directory under `base`.
    pub fn new_in(base: impl AsRef<Path>) -> std::io::Result<WorkDir> {
        use std::os::unix::fs::PermissionsExt;
        // tempfile's default mode leaves the umask to decide (0755 here):
        // owner only, said explicitly.
        let dir = tempfile::Builder::new()
            .prefix("gpu-runner-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(base)?;
        Ok(WorkDir { path: dir.path().to_path_buf(), dir: Some(dir) })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::env::var_os(KEEP_ENV).is_some() {
            if let Some(d) = self.dir.take() {
                let kept = d.keep();
                eprintln!("work directory kept: {}", kept.display());
            }
        }
        // Otherwise the TempDir removes the tree as it drops.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_work_directory_is_private_fresh_and_removed_at_exit() {
        let base = tempfile::tempdir().unwrap();
        let w = WorkDir::new_in(base.path()).unwrap();
        let meta = std::fs::symlink_metadata(w.path()).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700, "owner only");
        let a = w.path().to_path_buf();
        let w2 = WorkDir::new_in(base.path()).unwrap();
        assert_ne!(a, w2.path(), "two runs get two directories");
        drop(w);
        assert!(!a.exists(), "removed at exit");
    }

    #[test]
    fn a_planted_directory_or_symlink_at_the_old_predictable_name_is_not_used() {
        let base = tempfile::tempdir().unwrap();
        let victim = tempfile::tempdir().unwrap();
        let planted_dir = base.path().join(format!("gpu-runner-{}", std::process::id()));
        std::fs::create_dir(&planted_dir).unwrap();
        let planted_link = base.path().join(format!("gpu-runner-{}", std::process::id() + 1));
        std::os::unix::fs::symlink(victim.path(), &planted_link).unwrap();
        let w = WorkDir::new_in(base.path()).unwrap();
        assert_ne!(w.path(), planted_dir);
        assert_ne!(w.path(), planted_link);
        assert!(!std::fs::symlink_metadata(w.path()).unwrap().file_type().is_symlink());
        std::fs::write(w.path().join("gateway.log"), b"x").unwrap();
        drop(w);
        assert_eq!(std::fs::read_dir(victim.path()).unwrap().count(), 0, "nothing written through the link");
        assert!(planted_dir.is_dir(), "someone else's directory is left alone");
    }
}
