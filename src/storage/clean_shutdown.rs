//! The broker's clean-shutdown marker: `.kafka_cleanshutdown`, an empty file in the data
//! dir and in each log dir, that exists only between a clean stop (every partition
//! flushed) and the next start (Kafka's broker keeps the same file in each log dir).
//!
//! A starting broker [`take`]s them: all present means the process before it stopped
//! cleanly, so its logs hold everything they held; one missing (a crash, a power loss, a
//! new or replaced disk under any of the dirs) means the tail of a log may be gone, or a
//! whole log. The controller keeps a broker in the eligible leader replicas only after a
//! clean stop (KIP-966). Taking them removes them (and syncs each directory) before
//! anything else is written, so a crash from then on reads as unclean at the next start.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::checkpoint::sync_dir;

pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";

/// Whether the last process on `dirs` stopped cleanly (every dir holds the marker); the
/// markers are gone afterwards. An error names the dir it happened in.
pub fn take(dirs: &[PathBuf]) -> Result<bool, (PathBuf, io::Error)> {
    let mut clean = true;
    for dir in dirs {
        clean &= take_one(dir).map_err(|e| (dir.clone(), e))?;
    }
    Ok(clean && !dirs.is_empty())
}

fn take_one(dir: &Path) -> io::Result<bool> {
    match fs::remove_file(dir.join(CLEAN_SHUTDOWN_FILE)) {
        Ok(()) => {
            sync_dir(dir)?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Records a clean stop in each of `dirs`: call only once every partition is flushed.
pub fn mark(dirs: &[PathBuf]) -> io::Result<()> {
    for dir in dirs {
        fs::File::create(dir.join(CLEAN_SHUTDOWN_FILE))?.sync_all()?;
        sync_dir(dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_is_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = [dir.path().to_path_buf()];
        assert!(!take(&dirs).unwrap(), "a new data dir");
        mark(&dirs).unwrap();
        assert!(take(&dirs).unwrap());
        assert!(!take(&dirs).unwrap(), "a crash after the start");
    }

    /// A log dir whose disk was replaced while the broker was stopped lacks the marker:
    /// the start is not clean, though the data dir says it is.
    #[test]
    fn every_dir_must_hold_the_marker() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let dirs = [a.path().to_path_buf(), b.path().to_path_buf()];
        mark(&dirs).unwrap();
        fs::remove_file(b.path().join(CLEAN_SHUTDOWN_FILE)).unwrap();
        assert!(!take(&dirs).unwrap());
        assert!(!a.path().join(CLEAN_SHUTDOWN_FILE).exists(), "every marker is taken");
    }
}
