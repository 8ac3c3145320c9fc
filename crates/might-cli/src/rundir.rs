//! The output folder of a training run: an exclusive lock (one run per folder), a write check
//! before any training, atomic writes of metrics.csv and curves.svg, removal of the temporary
//! files killed runs left behind, and pruning of old epoch checkpoints.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::train::{CliError, Res};

/// The lock file's name inside a run folder.
pub const LOCK_NAME: &str = ".might.lock";

/// An output folder this process holds: locked until dropped (the lock file is removed then).
pub struct RunDir {
    path: PathBuf,
    lock: Option<(File, PathBuf)>,
}

impl RunDir {
    /// Create `dir` when missing, check that it can be written, take its lock (refusing when
    /// another live process holds it) and remove temporary files of dead runs. `flag` names
    /// the option the folder came from (`--out`, `--resume`).
    pub fn open(dir: &Path, flag: &str) -> Res<RunDir> {
        let shown = dir.display();
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError(format!("{flag} {shown}: cannot create the folder: {e}")))?;
        // a write probe: a read-only folder is found now, not after an epoch of training
        let probe = dir.join(format!(".might-write-probe.{}", std::process::id()));
        File::create(&probe)
            .and_then(|mut f| f.write_all(b"probe"))
            .map_err(|e| CliError(format!("{flag} {shown} is not writable: {e}")))?;
        std::fs::remove_file(&probe).ok();
        let lock = take_lock(dir, flag)?;
        clean_stale_temps(dir);
        Ok(RunDir {
            path: dir.to_path_buf(),
            lock: Some(lock),
        })
    }

    /// Write `name` in the folder atomically: a temporary file next to it, synced, then
    /// renamed over it, so a kill or a full disk leaves the previous version whole.
    pub fn write(&self, name: &str, text: &str) -> Res<()> {
        write_atomic(&self.path.join(name), text.as_bytes())
    }

    /// Keep the `keep` most recent `{prefix}{N}.safetensors` files, remove older ones.
    pub fn prune(&self, prefix: &str, keep: usize) {
        let Ok(entries) = std::fs::read_dir(&self.path) else {
            return;
        };
        let mut found: Vec<(u64, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let n = name
                    .strip_prefix(prefix)?
                    .strip_suffix(".safetensors")?
                    .parse()
                    .ok()?;
                Some((n, e.path()))
            })
            .collect();
        found.sort();
        let drop = found.len().saturating_sub(keep);
        for (_, p) in &found[..drop] {
            std::fs::remove_file(p).ok();
        }
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Some((file, path)) = self.lock.take() {
            // remove first, then unlock: a process that opened the old file finds it gone
            // when it checks after locking, and retries on a fresh one
            std::fs::remove_file(&path).ok();
            drop(file);
        }
    }
}

fn take_lock(dir: &Path, flag: &str) -> Res<(File, PathBuf)> {
    let path = dir.join(LOCK_NAME);
    let shown = dir.display();
    for _ in 0..20 {
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| CliError(format!("{flag} {shown}: cannot create {LOCK_NAME}: {e}")))?;
        match f.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                let holder = holder.trim();
                return Err(CliError(format!(
                    "{flag} {shown} is in use by another might run{} (lock {}); wait for it to end or choose another folder",
                    if holder.is_empty() {
                        String::new()
                    } else {
                        format!(" (pid {holder})")
                    },
                    path.display()
                )));
            }
            Err(TryLockError::Error(e)) => {
                return Err(CliError(format!(
                    "{flag} {shown}: cannot lock {}: {e}",
                    path.display()
                )))
            }
        }
        // the holder may have removed the file between our open and our lock: then our lock
        // is on a deleted file, try again on the current one
        if !same_file(&f, &path) {
            continue;
        }
        // a lock file left by a dead run (or one without flock) is simply taken over
        f.set_len(0).ok();
        let _ = writeln!(f, "{}", std::process::id());
        return Ok((f, path));
    }
    Err(CliError(format!(
        "{flag} {shown}: could not take {LOCK_NAME} (it keeps being replaced)"
    )))
}

#[cfg(unix)]
fn same_file(f: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (f.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_: &File, path: &Path) -> bool {
    path.exists()
}

/// Remove `.NAME.tmp.PID` files (the temporaries of atomic writes) whose process is gone or
/// is not this one: this process holds the folder's lock, so no live run writes there.
fn clean_stale_temps(dir: &Path) {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        if !name.starts_with('.') {
            continue;
        }
        let Some((_, pid)) = name.rsplit_once(".tmp.") else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid != me {
            std::fs::remove_file(e.path()).ok();
        }
    }
}

/// Write `bytes` to `path` atomically (temporary file in the same folder, fsync, rename,
/// fsync of the folder).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Res<()> {
    let err = |e: std::io::Error| CliError(format!("{}: {e}", path.display()));
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = File::open(dir) {
            d.sync_all().ok();
        }
        Ok(())
    })();
    if result.is_err() {
        std::fs::remove_file(&tmp).ok();
    }
    result.map_err(err)
}
