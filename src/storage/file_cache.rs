//! [`FileCache`]: the broker's bounded set of open segment files.
//!
//! A partition holds no descriptor of its own: each segment's `.log` is a [`CachedFile`]
//! that is opened on use and stays open until the least recently used entries are
//! evicted. So the descriptors a broker holds are bounded by the cache's capacity, not
//! by partitions × segments (Kafka holds one per segment and needs a large `ulimit -n`).
//!
//! A handle handed out is an `Arc<File>`: eviction only drops the cache's reference, so a
//! read or fsync in progress keeps its descriptor until it is done. The kernel keeps page
//! cache and dirty data per inode, not per descriptor, so an fsync through a reopened
//! descriptor covers writes made through an evicted one.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Capacity used by [`FileCache::private`]: logs opened outside a broker (tests, tools).
const PRIVATE_CAPACITY: usize = 64;
/// The smallest automatic capacity, however low the descriptor limit.
const MIN_AUTO_CAPACITY: usize = 64;

/// The cache size for `max_open_log_files`: `configured`, or when 0 half the process's
/// open-file soft limit now (the other half is for sockets and the broker's own files).
pub fn capacity_for(configured: usize) -> usize {
    if configured > 0 {
        return configured;
    }
    let soft = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft);
    usize::try_from(soft / 2).unwrap_or(usize::MAX).max(MIN_AUTO_CAPACITY)
}

/// Open files keyed by a per-[`CachedFile`] id, evicted least recently used first.
///
/// Keys are ids, not paths: a path can be deleted and created again (topic deleted and
/// recreated, a segment replaced by the cleaner), and a stale descriptor must never be
/// found for the new file.
#[derive(Debug)]
pub struct FileCache {
    capacity: usize,
    next_id: AtomicU64,
    inner: Mutex<Lru>,
}

#[derive(Debug, Default)]
struct Lru {
    /// id → (file, last use tick).
    open: HashMap<u64, (Arc<File>, u64)>,
    /// last use tick → id; the first entry is the least recently used.
    by_use: BTreeMap<u64, u64>,
    tick: u64,
    opens: u64,
}

impl FileCache {
    /// A cache holding at most `capacity` (at least 1) descriptors.
    pub fn new(capacity: usize) -> Arc<FileCache> {
        Arc::new(FileCache { capacity: capacity.max(1), next_id: AtomicU64::new(0), inner: Mutex::default() })
    }

    /// A small cache of its own, for a log opened outside a broker.
    pub fn private() -> Arc<FileCache> {
        Self::new(PRIVATE_CAPACITY)
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Descriptors the cache holds now.
    pub fn open_count(&self) -> usize {
        self.lock().open.len()
    }

    /// How many times a file was opened (misses), for tests and metrics.
    pub fn opens(&self) -> u64 {
        self.lock().opens
    }

    fn lock(&self) -> MutexGuard<'_, Lru> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `path` (which must exist) without opening it.
    pub fn register(self: &Arc<Self>, path: PathBuf) -> CachedFile {
        CachedFile {
            cache: Arc::clone(self),
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            path,
            pinned: OnceLock::new(),
        }
    }

    /// Registers `path` with a descriptor the caller just opened (e.g. to create it).
    pub fn insert(self: &Arc<Self>, path: PathBuf, file: File) -> CachedFile {
        let cached = self.register(path);
        let mut lru = self.lock();
        lru.put(cached.id, Arc::new(file), self.capacity);
        cached
    }

    fn get(&self, id: u64, path: &Path) -> io::Result<Arc<File>> {
        let mut lru = self.lock();
        if let Some(file) = lru.touch(id) {
            return Ok(file);
        }
        // Opened under the lock: opens are rare next to hits, and this keeps two callers
        // from opening the same file twice.
        let file = Arc::new(OpenOptions::new().read(true).write(true).open(path)?);
        lru.opens += 1;
        lru.put(id, Arc::clone(&file), self.capacity);
        Ok(file)
    }

    fn forget(&self, id: u64) {
        let mut lru = self.lock();
        if let Some((_, tick)) = lru.open.remove(&id) {
            lru.by_use.remove(&tick);
        }
    }
}

impl Lru {
    fn touch(&mut self, id: u64) -> Option<Arc<File>> {
        self.tick += 1;
        let tick = self.tick;
        let (file, last) = self.open.get_mut(&id)?;
        let old = std::mem::replace(last, tick);
        let file = Arc::clone(file);
        self.by_use.remove(&old);
        self.by_use.insert(tick, id);
        Some(file)
    }

    fn put(&mut self, id: u64, file: Arc<File>, capacity: usize) {
        self.tick += 1;
        if let Some((_, old)) = self.open.insert(id, (file, self.tick)) {
            self.by_use.remove(&old);
        }
        self.by_use.insert(self.tick, id);
        while self.open.len() > capacity {
            let Some((_, victim)) = self.by_use.pop_first() else { break };
            self.open.remove(&victim);
        }
    }
}

/// One file reached through a [`FileCache`]; dropping it closes the cached descriptor.
#[derive(Debug)]
pub struct CachedFile {
    cache: Arc<FileCache>,
    id: u64,
    path: PathBuf,
    /// A descriptor held outside the cache's bound (see [`CachedFile::pin`]).
    pinned: OnceLock<Arc<File>>,
}

impl CachedFile {
    /// The open file, opening it (read and write) if the cache evicted it.
    pub fn get(&self) -> io::Result<Arc<File>> {
        if let Some(file) = self.pinned.get() {
            return Ok(Arc::clone(file));
        }
        self.cache.get(self.id, &self.path)
    }

    /// From now on [`Self::get`] returns the file open now, never a reopen by path: for
    /// a file about to be replaced under its name. Holds a descriptor outside the bound.
    pub fn pin(&self) -> io::Result<()> {
        let file = self.get()?;
        let _ = self.pinned.set(file);
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unique per registration, never reused while the cache lives.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        self.cache.forget(self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;

    fn file_with(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn evicts_least_recently_used_and_reopens_with_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(2);
        let files: Vec<CachedFile> =
            (0..3).map(|i| cache.register(file_with(dir.path(), &format!("{i}.log"), &[i as u8; 4]))).collect();
        files[0].get().unwrap();
        files[1].get().unwrap();
        files[0].get().unwrap(); // 1 is now the least recently used
        files[2].get().unwrap();
        assert_eq!(cache.open_count(), 2);
        assert_eq!(cache.opens(), 3);
        files[0].get().unwrap(); // still cached: no open
        assert_eq!(cache.opens(), 3);
        let reopened = files[1].get().unwrap();
        assert_eq!(cache.opens(), 4);
        let mut buf = [0u8; 4];
        reopened.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(buf, [1u8; 4]);
    }

    #[test]
    fn a_handed_out_handle_stays_valid_after_eviction() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(1);
        let a = cache.register(file_with(dir.path(), "a.log", b"aaaa"));
        let b = cache.register(file_with(dir.path(), "b.log", b"bbbb"));
        let held = a.get().unwrap();
        b.get().unwrap();
        assert_eq!(cache.open_count(), 1);
        held.write_all_at(b"AA", 0).unwrap();
        let mut buf = [0u8; 4];
        held.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"AAaa");
        // Writes through the evicted handle are seen through a fresh one.
        a.get().unwrap().read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"AAaa");
    }

    #[test]
    fn dropping_a_cached_file_closes_it_and_ids_never_alias() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(4);
        let path = file_with(dir.path(), "x.log", b"old!");
        let old = cache.register(path.clone());
        old.get().unwrap();
        drop(old);
        assert_eq!(cache.open_count(), 0);
        // The same path recreated is a different file: never the old descriptor.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"new!").unwrap();
        let new = cache.register(path);
        let mut buf = [0u8; 4];
        new.get().unwrap().read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"new!");
    }

    #[test]
    fn insert_counts_against_the_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(1);
        let p = dir.path().join("c.log");
        let created = cache.insert(p.clone(), File::create(&p).unwrap());
        let other = cache.register(file_with(dir.path(), "d.log", b"d"));
        other.get().unwrap();
        assert_eq!(cache.open_count(), 1);
        created.get().unwrap();
        assert_eq!(cache.opens(), 2);
    }
}
