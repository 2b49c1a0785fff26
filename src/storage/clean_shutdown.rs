//! The broker's clean-shutdown marker: `<data-dir>/.kafka_cleanshutdown`, an empty file
//! that exists only between a clean stop (every partition flushed) and the next start
//! (Kafka's broker keeps the same file in each log dir).
//!
//! A starting broker [`take`]s it: present means the process before it stopped cleanly,
//! so its logs hold everything they held; absent (a crash, a power loss, a new or replaced
//! data dir) means the tail of any log may be gone. The controller keeps a broker in the
//! eligible leader replicas only after a clean stop (KIP-966). Taking it removes it (and
//! syncs the directory) before anything else is written, so a crash from then on reads as
//! unclean at the next start.

use std::fs;
use std::io;
use std::path::Path;

use super::checkpoint::sync_dir;

pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";

/// Whether the last process on `data_dir` stopped cleanly; the marker is gone afterwards.
pub fn take(data_dir: &Path) -> io::Result<bool> {
    match fs::remove_file(data_dir.join(CLEAN_SHUTDOWN_FILE)) {
        Ok(()) => {
            sync_dir(data_dir)?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Records a clean stop: call only once every partition is flushed.
pub fn mark(data_dir: &Path) -> io::Result<()> {
    fs::File::create(data_dir.join(CLEAN_SHUTDOWN_FILE))?.sync_all()?;
    sync_dir(data_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_is_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!take(dir.path()).unwrap(), "a new data dir");
        mark(dir.path()).unwrap();
        assert!(take(dir.path()).unwrap());
        assert!(!take(dir.path()).unwrap(), "a crash after the start");
    }
}
