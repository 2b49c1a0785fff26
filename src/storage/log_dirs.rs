//! [`LogDirs`]: the broker's log directories (Kafka's `log.dirs`), where each partition
//! directory is, where a new one goes, and the file copy that moves one between them.
//!
//! On disk, each log directory holds partition directories named as in Kafka
//! (`<topic>-<partition>`), plus, while a partition moves (AlterReplicaLogDirs):
//!
//! ```text
//! <destination>/<topic>-<partition>-future   the copy being made; not yet the partition
//! <source>/<topic>-<partition>-delete        the old copy, renamed once the future copy
//!                                            was complete and fsynced
//! ```
//!
//! A move commits by renaming the source to `-delete` (after the future copy is complete
//! and on disk), then the future copy to its plain name, then removing the `-delete`
//! directory. So at start, [`LogDirs::open`] finishes or takes up again every move a
//! crash or restart interrupted: a `-future` directory with no `-delete` beside it
//! anywhere was not complete (the source still holds the partition), so the move is
//! pending: [`LogDirs::take_pending_moves`] names it, and the replica manager starts it
//! again once the partition is open, as Kafka resumes its future log (the copy is made
//! afresh); a `-future` directory whose source is gone is removed. A `-delete` directory
//! means the future copy was complete, so the future copy is renamed to its plain name if
//! that had not happened, and the `-delete` directory removed.
//!
//! Invariant after `open`: a partition directory is in at most one log directory. A
//! partition found in two (not a move's leftovers: two plain directories, e.g. a disk
//! mounted twice or copied by hand) stops the broker at start naming both, rather than
//! guessing which copy is the partition (Kafka refuses to start the same way).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use thiserror::Error;

use super::checkpoint::sync_dir;

/// Suffix of a partition copy being made in its destination directory.
pub const FUTURE_SUFFIX: &str = "-future";
/// Suffix of a moved partition's old copy, removed once the move is complete.
pub const DELETE_SUFFIX: &str = "-delete";

#[derive(Debug, Error)]
pub enum LogDirsError {
    #[error("cannot use log dir {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("partition directory {name} is in two log dirs, {first} and {second}; remove the stale copy")]
    Duplicate { name: String, first: String, second: String },
}

/// The file a probe of an offline log directory writes (see [`LogDirs::probe`]).
pub const PROBE_FILE: &str = ".runnel-probe";
/// How much a probe writes: a few batches' worth, so that a disk with a block or two
/// free is not called back at once.
pub const PROBE_BYTES: usize = 64 * 1024;

/// One log directory's health, shared by its partitions, in one atomic: 0 while online;
/// offline, the errno of the error that took it there when that cause can clear by
/// itself (ENOSPC, EDQUOT), else [`DirHealth::FOR_GOOD`].
#[derive(Debug, Default)]
pub struct DirHealth {
    state: AtomicI32,
}

impl DirHealth {
    /// Offline until a restart.
    const FOR_GOOD: i32 = -1;

    pub fn is_offline(&self) -> bool {
        self.state.load(Ordering::Acquire) != 0
    }

    /// Takes the directory offline for `e`. True when this call did (the first error).
    /// A later error that cannot clear by itself makes an offline directory's state
    /// [`Self::FOR_GOOD`]: an EIO after an ENOSPC must not let a probe bring it back.
    pub fn fail(&self, e: &io::Error) -> bool {
        let cause = match e.raw_os_error() {
            Some(c) if Self::clears_by_itself(c) => c,
            _ => Self::FOR_GOOD,
        };
        let mut current = self.state.load(Ordering::Acquire);
        loop {
            let next = match current {
                0 => cause,
                _ if cause == Self::FOR_GOOD => Self::FOR_GOOD,
                _ => return false,
            };
            match self.state.compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return current == 0,
                Err(seen) => current = seen,
            }
        }
    }

    /// Keeps the directory offline until a restart (a reopen after a probe failed).
    pub fn fail_for_good(&self) {
        self.state.store(Self::FOR_GOOD, Ordering::Release);
    }

    /// Whether what took the directory offline can clear without a restart: its
    /// filesystem was full (ENOSPC) or a quota was reached (EDQUOT), on a write (an
    /// fsync's failure is never such: see `storage::error::fsync_failed`). A write that
    /// failed so was cut back (appends are all or nothing) and wrote nothing else. Any
    /// other error (EIO, EROFS, a removed directory) keeps it offline until the broker is
    /// restarted, as Kafka's log dir failure does.
    pub fn can_recover(&self) -> bool {
        Self::clears_by_itself(self.state.load(Ordering::Acquire))
    }

    fn clears_by_itself(errno: i32) -> bool {
        const ENOSPC: i32 = 28;
        const EDQUOT: i32 = 122;
        matches!(errno, ENOSPC | EDQUOT)
    }

    /// Online again, unless another error made it offline for good since `seen` (the
    /// state the probe found).
    fn set_online(&self, seen: i32) -> bool {
        self.state.compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }
}

/// The log directories and which partition directory lives in which.
#[derive(Debug)]
pub struct LogDirs {
    /// Absolute paths, in configured order (the first holds the metadata by default).
    dirs: Vec<PathBuf>,
    /// Partition directory name → index in `dirs`, for every partition directory found
    /// at start or placed since.
    placed: Mutex<HashMap<String, usize>>,
    /// Per log directory: offline after an I/O error in it (set by its partitions).
    offline: Vec<Arc<DirHealth>>,
    /// Moves found interrupted at start: partition directory name → index of the
    /// destination holding its incomplete `-future` copy.
    pending_moves: Mutex<Vec<(String, usize)>>,
}

impl LogDirs {
    /// Creates missing directories, finishes or forgets interrupted moves, and finds every
    /// partition directory. `skip` names directories that are not partitions (the
    /// metadata log's).
    pub fn open(dirs: &[PathBuf], skip: &[&str]) -> Result<LogDirs, LogDirsError> {
        let io_err = |path: &Path| {
            let path = path.display().to_string();
            move |source| LogDirsError::Io { path, source }
        };
        let mut absolute = Vec::with_capacity(dirs.len());
        for d in dirs {
            std::fs::create_dir_all(d).map_err(io_err(d))?;
            absolute.push(std::fs::canonicalize(d).map_err(io_err(d))?);
        }
        let listing = |i: usize| -> Result<Vec<String>, LogDirsError> {
            let dir = &absolute[i];
            let mut names = Vec::new();
            for e in std::fs::read_dir(dir).map_err(io_err(dir))? {
                let e = e.map_err(io_err(dir))?;
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    names.push(e.file_name().to_string_lossy().into_owned());
                }
            }
            Ok(names)
        };
        // Interrupted moves first: `-delete` directories (complete future copies).
        for i in 0..absolute.len() {
            for name in listing(i)? {
                let Some(partition) = name.strip_suffix(DELETE_SUFFIX).filter(|p| is_partition_name(p)) else {
                    continue;
                };
                let plain_elsewhere = (0..absolute.len()).any(|j| absolute[j].join(partition).is_dir());
                if !plain_elsewhere {
                    let future = (0..absolute.len()).map(|j| absolute[j].join(format!("{partition}{FUTURE_SUFFIX}")));
                    if let Some(future) = future.into_iter().find(|f| f.is_dir()) {
                        let target = future.with_file_name(partition);
                        tracing::warn!(from = %future.display(), to = %target.display(), "finishing a partition move interrupted by a crash");
                        std::fs::rename(&future, &target).map_err(io_err(&future))?;
                        sync_dir(target.parent().unwrap_or(Path::new("/"))).map_err(io_err(&target))?;
                    } else {
                        // Cannot happen with the order a move commits in; keep the data.
                        let old = absolute[i].join(&name);
                        let back = absolute[i].join(partition);
                        tracing::warn!(dir = %old.display(), "a moved partition's old copy without its new one; restoring it");
                        std::fs::rename(&old, &back).map_err(io_err(&old))?;
                        continue;
                    }
                }
                let old = absolute[i].join(&name);
                tracing::info!(dir = %old.display(), "removing the old copy of a moved partition");
                std::fs::remove_dir_all(&old).map_err(io_err(&old))?;
            }
        }
        let mut placed: HashMap<String, usize> = HashMap::new();
        let mut pending_moves: Vec<(String, usize)> = Vec::new();
        for i in 0..absolute.len() {
            for name in listing(i)? {
                if let Some(partition) = name.strip_suffix(FUTURE_SUFFIX).filter(|p| is_partition_name(p)) {
                    let dir = absolute[i].join(&name);
                    let source = (0..absolute.len()).any(|j| j != i && absolute[j].join(partition).is_dir());
                    let why = if !source {
                        "removing a partition copy with no source to move from"
                    } else if pending_moves.iter().any(|(p, _)| p == partition) {
                        "removing a second copy of one interrupted partition move"
                    } else {
                        tracing::info!(dir = %dir.display(), partition, "an interrupted partition move; it starts again once the partition is open");
                        pending_moves.push((partition.to_owned(), i));
                        continue;
                    };
                    tracing::warn!(dir = %dir.display(), partition, "{why}");
                    std::fs::remove_dir_all(&dir).map_err(io_err(&dir))?;
                    continue;
                }
                if !is_partition_name(&name) || skip.contains(&name.as_str()) {
                    continue;
                }
                if let Some(&first) = placed.get(&name) {
                    return Err(LogDirsError::Duplicate {
                        first: absolute[first].join(&name).display().to_string(),
                        second: absolute[i].join(&name).display().to_string(),
                        name,
                    });
                }
                placed.insert(name, i);
            }
        }
        let offline = absolute.iter().map(|_| Arc::new(DirHealth::default())).collect();
        Ok(LogDirs { dirs: absolute, placed: Mutex::new(placed), offline, pending_moves: Mutex::new(pending_moves) })
    }

    /// The moves [`LogDirs::open`] found interrupted (partition directory name, index of
    /// the destination), once: whoever takes them starts them again or removes their
    /// `-future` copies.
    pub fn take_pending_moves(&self) -> Vec<(String, usize)> {
        std::mem::take(&mut *self.pending_moves.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The log directories, absolute, in configured order.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The health of log directory `index`, shared with its partitions.
    pub fn offline_flag(&self, index: usize) -> Arc<DirHealth> {
        Arc::clone(&self.offline[index])
    }

    /// Whether log directory `index` went offline (an I/O error in it).
    pub fn is_offline(&self, index: usize) -> bool {
        self.offline[index].is_offline()
    }

    /// Whether log directory `index` is offline for a cause that clears by itself (see
    /// [`DirHealth::can_recover`]) and takes writes again: a probe file of
    /// [`PROBE_BYTES`] is written, fsynced and removed. `Some(state)` when it does, to
    /// hand to [`Self::set_online`].
    pub fn probe(&self, index: usize) -> io::Result<Option<i32>> {
        let health = &self.offline[index];
        let seen = health.state.load(Ordering::Acquire);
        if seen == 0 || !DirHealth::clears_by_itself(seen) {
            return Ok(None);
        }
        let path = self.dirs[index].join(PROBE_FILE);
        let written = (|| {
            let mut f = std::fs::OpenOptions::new().create(true).write(true).truncate(true).open(&path)?;
            f.write_all(&[0u8; PROBE_BYTES])?;
            f.sync_all()
        })();
        // Removed whatever happened: a full disk keeps no probe file.
        let removed = std::fs::remove_file(&path);
        written?;
        removed?;
        Ok(Some(seen))
    }

    /// Log directory `index` serves again (its partitions were reopened), unless an
    /// error that cannot clear came since the probe saw `seen`. Whether it does.
    pub fn set_online(&self, index: usize, seen: i32) -> bool {
        self.offline[index].set_online(seen)
    }

    /// Index of the log directory holding the partition directory `dir`.
    pub fn index_of_partition_dir(&self, dir: &Path) -> Option<usize> {
        let parent = dir.parent()?;
        self.dirs.iter().position(|d| d == parent)
    }

    /// Index of the log directory at `path` (as given by a client: absolute).
    pub fn index_of(&self, path: &str) -> Option<usize> {
        let wanted = Path::new(path);
        self.dirs.iter().position(|d| d == wanted).or_else(|| {
            let canonical = std::fs::canonicalize(wanted).ok()?;
            self.dirs.iter().position(|d| *d == canonical)
        })
    }

    /// Where partition directory `name` is, or goes: the log directory that holds it, else
    /// the one holding the fewest partitions (Kafka's rule for a new log), of those
    /// `usable` allows. `None` when no directory is usable.
    pub fn place(&self, name: &str, usable: impl Fn(usize) -> bool) -> Option<PathBuf> {
        let mut placed = self.placed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&i) = placed.get(name) {
            return Some(self.dirs[i].join(name));
        }
        let mut counts = vec![0usize; self.dirs.len()];
        for &i in placed.values() {
            counts[i] += 1;
        }
        let i = (0..self.dirs.len()).filter(|&i| usable(i)).min_by_key(|&i| (counts[i], i))?;
        placed.insert(name.to_owned(), i);
        Some(self.dirs[i].join(name))
    }

    /// The partition directory `name` now lives in log directory `index` (a move).
    pub fn moved(&self, name: &str, index: usize) {
        self.placed.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_owned(), index);
    }

    /// Partition directory `name` is gone (its topic was deleted, or it was reassigned away).
    pub fn forget(&self, name: &str) {
        self.placed.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
    }

    /// Index of the log directory holding partition directory `name`.
    pub fn index_holding(&self, name: &str) -> Option<usize> {
        self.placed.lock().unwrap_or_else(|e| e.into_inner()).get(name).copied()
    }
}

/// `<topic>-<partition number>`.
pub fn is_partition_name(name: &str) -> bool {
    name.rsplit_once('-').is_some_and(|(topic, part)| !topic.is_empty() && part.parse::<u32>().is_ok())
}

/// What [`DirCopy`] copied of each file: its inode and length when copied.
#[derive(Debug, Default)]
pub struct DirCopy {
    copied: HashMap<String, (u64, u64)>,
}

impl DirCopy {
    /// Forgets what was copied: the next [`DirCopy::sync`] copies every file whole (after
    /// the source log was truncated, when a same-inode, longer file may differ before its
    /// old end).
    pub fn reset(&mut self) {
        self.copied.clear();
    }

    /// Brings `dst` up to `src`'s files (not subdirectories: the cleaner's scratch), and
    /// removes files of `dst` that `src` no longer has. A file of `src` that only grew
    /// since the last pass (same inode, longer: an active segment, which is append-only)
    /// gets its new tail; a replaced one (a new inode: a checkpoint, a cleaned segment,
    /// a truncated tail) is copied whole. Returns the bytes copied.
    ///
    /// `pace` hears of every [`COPY_CHUNK`] (or less) copied, and may hold the copy there
    /// (a throttle) or end it with an error.
    pub fn sync(&mut self, src: &Path, dst: &Path, pace: &mut dyn FnMut(u64) -> io::Result<()>) -> io::Result<u64> {
        std::fs::create_dir_all(dst)?;
        let mut bytes = 0;
        let mut seen = Vec::new();
        for e in std::fs::read_dir(src)? {
            let e = e?;
            if !e.file_type()?.is_file() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let meta = e.metadata()?;
            let (ino, len) = (meta.ino(), meta.len());
            let grown_from = match self.copied.get(&name) {
                Some(&(i, l)) if i == ino && l <= len => Some(l),
                _ => None,
            };
            match grown_from {
                Some(from) if from == len => {}
                Some(from) => bytes += copy_range(&e.path(), &dst.join(&name), from, pace)?,
                None => bytes += copy_range(&e.path(), &dst.join(&name), 0, pace)?,
            }
            self.copied.insert(name.clone(), (ino, len));
            seen.push(name);
        }
        for e in std::fs::read_dir(dst)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if !seen.contains(&name) {
                std::fs::remove_file(e.path())?;
                self.copied.remove(&name);
            }
        }
        Ok(bytes)
    }
}

/// What [`DirCopy::sync`] copies between two calls of its `pace`.
pub const COPY_CHUNK: u64 = 1 << 20;

/// Copies `src` from byte `from` on into `dst` at the same position, truncating `dst`
/// there first (so a whole copy, `from` 0, replaces it), [`COPY_CHUNK`] at a time.
/// Returns the bytes copied.
fn copy_range(src: &Path, dst: &Path, from: u64, pace: &mut dyn FnMut(u64) -> io::Result<()>) -> io::Result<u64> {
    let mut input = File::open(src)?;
    let mut output = std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(dst)?;
    output.set_len(from)?;
    input.seek(SeekFrom::Start(from))?;
    output.seek(SeekFrom::Start(from))?;
    let mut copied = 0;
    loop {
        let n = io::copy(&mut (&mut input).take(COPY_CHUNK), &mut output)?;
        if n == 0 {
            break;
        }
        copied += n;
        pace(n)?;
    }
    output.flush()?;
    Ok(copied)
}

/// fsyncs every file in `dir` and the directory itself.
pub fn sync_all_files(dir: &Path) -> io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_file() {
            File::open(e.path())?.sync_all()?;
        }
    }
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a full disk (ENOSPC, EDQUOT) on a write can come back; an fsync's failure or
    /// any other error after it keeps the dir offline, and a probe that saw it full
    /// cannot bring it back once such an error came.
    #[test]
    fn only_a_full_disk_on_a_write_can_come_back() {
        let enospc = || io::Error::from_raw_os_error(28);
        let h = DirHealth::default();
        assert!(h.fail(&enospc()) && h.is_offline() && h.can_recover());
        assert!(!h.fail(&enospc()), "taken offline once");
        let seen = h.state.load(Ordering::Acquire);
        assert!(!h.fail(&io::Error::from_raw_os_error(5)), "EIO while offline");
        assert!(!h.can_recover(), "EIO after ENOSPC: offline for good");
        assert!(!h.set_online(seen), "the probe's view is stale");
        let h = DirHealth::default();
        assert!(h.fail(&crate::storage::fsync_failed(enospc())));
        assert!(!h.can_recover(), "an fsync that said ENOSPC");
        let h = DirHealth::default();
        h.fail(&enospc());
        assert!(h.set_online(h.state.load(Ordering::Acquire)) && !h.is_offline());
    }

    fn mkdirs(root: &Path, n: usize) -> Vec<PathBuf> {
        (0..n).map(|i| root.join(format!("d{i}"))).collect()
    }

    #[test]
    fn new_partitions_go_to_the_dir_with_the_fewest_and_found_ones_stay() {
        let root = tempfile::tempdir().unwrap();
        let dirs = mkdirs(root.path(), 2);
        std::fs::create_dir_all(dirs[1].join("a-0")).unwrap();
        std::fs::create_dir_all(dirs[1].join("a-1")).unwrap();
        let ld = LogDirs::open(&dirs, &[]).unwrap();
        assert_eq!(ld.place("a-0", |_| true).unwrap(), ld.dirs()[1].join("a-0"));
        assert_eq!(ld.place("b-0", |_| true).unwrap(), ld.dirs()[0].join("b-0"));
        assert_eq!(ld.place("b-1", |_| true).unwrap(), ld.dirs()[0].join("b-1"));
        // 2 and 2: ties go to the first.
        assert_eq!(ld.place("b-2", |_| true).unwrap(), ld.dirs()[0].join("b-2"));
        assert_eq!(ld.place("b-3", |_| true).unwrap(), ld.dirs()[1].join("b-3"));
        assert_eq!(ld.place("b-4", |i| i == 1).unwrap(), ld.dirs()[1].join("b-4"));
        assert!(ld.place("b-5", |_| false).is_none());
    }

    #[test]
    fn a_partition_in_two_dirs_is_refused_naming_both() {
        let root = tempfile::tempdir().unwrap();
        let dirs = mkdirs(root.path(), 2);
        for d in &dirs {
            std::fs::create_dir_all(d.join("t-3")).unwrap();
        }
        let err = LogDirs::open(&dirs, &[]).unwrap_err().to_string();
        assert!(err.contains("d0/t-3") && err.contains("d1/t-3"), "{err}");
    }

    #[test]
    fn interrupted_moves_are_finished_or_taken_up_again() {
        let root = tempfile::tempdir().unwrap();
        let dirs = mkdirs(root.path(), 2);
        // Incomplete copy: the source stays the partition, and the move is pending.
        std::fs::create_dir_all(dirs[0].join("a-0")).unwrap();
        std::fs::create_dir_all(dirs[1].join("a-0-future")).unwrap();
        // A copy whose source is gone (never the order a move commits in): removed.
        std::fs::create_dir_all(dirs[1].join("d-0-future")).unwrap();
        // Complete copy, source renamed, future not yet renamed: finished.
        std::fs::create_dir_all(dirs[0].join("b-0-delete")).unwrap();
        std::fs::create_dir_all(dirs[1].join("b-0-future")).unwrap();
        std::fs::write(dirs[1].join("b-0-future/00000000000000000000.log"), b"x").unwrap();
        // Renamed both ways, old copy not yet removed: removed.
        std::fs::create_dir_all(dirs[0].join("c-0-delete")).unwrap();
        std::fs::create_dir_all(dirs[1].join("c-0")).unwrap();
        let ld = LogDirs::open(&dirs, &[]).unwrap();
        assert_eq!(ld.index_holding("a-0"), Some(0));
        assert_eq!(ld.take_pending_moves(), vec![("a-0".to_owned(), 1)]);
        assert_eq!(ld.take_pending_moves(), vec![], "taken once");
        assert!(dirs[1].join("a-0-future").exists());
        assert!(!dirs[1].join("d-0-future").exists());
        assert_eq!(ld.index_holding("d-0"), None);
        assert_eq!(ld.index_holding("b-0"), Some(1));
        assert!(dirs[1].join("b-0/00000000000000000000.log").exists());
        assert!(!dirs[0].join("b-0-delete").exists());
        assert_eq!(ld.index_holding("c-0"), Some(1));
        assert!(!dirs[0].join("c-0-delete").exists());
    }

    #[test]
    fn dir_copy_tells_its_pace_of_each_chunk_and_stops_when_the_pace_says_so() {
        let root = tempfile::tempdir().unwrap();
        let (src, dst) = (root.path().join("s"), root.path().join("d"));
        std::fs::create_dir_all(&src).unwrap();
        let len = 2 * COPY_CHUNK + COPY_CHUNK / 2;
        std::fs::write(src.join("seg.log"), vec![7u8; len as usize]).unwrap();
        let mut chunks = Vec::new();
        let copied = DirCopy::default()
            .sync(&src, &dst, &mut |n| {
                chunks.push(n);
                Ok(())
            })
            .unwrap();
        assert_eq!((copied, chunks), (len, vec![COPY_CHUNK, COPY_CHUNK, COPY_CHUNK / 2]));
        assert_eq!(std::fs::read(dst.join("seg.log")).unwrap(), vec![7u8; len as usize]);
        let stop = DirCopy::default().sync(&src, &root.path().join("d2"), &mut |_| Err(io::Error::other("stop")));
        assert_eq!(stop.unwrap_err().to_string(), "stop");
        assert_eq!(std::fs::metadata(root.path().join("d2/seg.log")).unwrap().len(), COPY_CHUNK);
    }

    #[test]
    fn dir_copy_appends_tails_and_recopies_replaced_files() {
        let root = tempfile::tempdir().unwrap();
        let (src, dst) = (root.path().join("s"), root.path().join("d"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("seg.log"), b"abc").unwrap();
        std::fs::write(src.join("gone"), b"x").unwrap();
        let mut copy = DirCopy::default();
        assert_eq!(copy.sync(&src, &dst, &mut |_| Ok(())).unwrap(), 4);
        std::fs::OpenOptions::new().append(true).open(src.join("seg.log")).unwrap().write_all(b"de").unwrap();
        std::fs::remove_file(src.join("gone")).unwrap();
        // Replaced by rename: a new inode.
        std::fs::write(src.join("cp.tmp"), b"77").unwrap();
        std::fs::rename(src.join("cp.tmp"), src.join("cp")).unwrap();
        assert_eq!(copy.sync(&src, &dst, &mut |_| Ok(())).unwrap(), 2 + 2);
        assert_eq!(std::fs::read(dst.join("seg.log")).unwrap(), b"abcde");
        assert_eq!(std::fs::read(dst.join("cp")).unwrap(), b"77");
        assert!(!dst.join("gone").exists());
        std::fs::write(src.join("seg.log.new"), b"z").unwrap();
        std::fs::rename(src.join("seg.log.new"), src.join("seg.log")).unwrap();
        copy.sync(&src, &dst, &mut |_| Ok(())).unwrap();
        assert_eq!(std::fs::read(dst.join("seg.log")).unwrap(), b"z");
        assert_eq!(copy.sync(&src, &dst, &mut |_| Ok(())).unwrap(), 0);
    }
}
