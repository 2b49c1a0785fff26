//! Small checkpoint files in a partition directory, replaced atomically.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use super::error::StorageError;

/// A checkpoint file in Kafka's text format:
///
/// ```text
/// 0            version
/// N            number of entries
/// a b ...      one entry per line, space-separated integers
/// ```
///
/// Written to `<name>.tmp`, fsynced, renamed over the old file, and the directory fsynced,
/// so a crash leaves either the old or the new contents (a stray `.tmp` is removed on open).
pub struct CheckpointFile;

impl CheckpointFile {
    pub fn write(path: &Path, entries: &[Vec<i64>]) -> io::Result<()> {
        let mut text = format!("0\n{}\n", entries.len());
        for entry in entries {
            let fields: Vec<String> = entry.iter().map(i64::to_string).collect();
            text.push_str(&fields.join(" "));
            text.push('\n');
        }
        let mut tmp_name = path.as_os_str().to_owned();
        tmp_name.push(".tmp");
        let tmp = Path::new(&tmp_name);
        let mut file = File::create(tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(tmp, path)?;
        match path.parent() {
            Some(dir) => sync_dir(dir),
            None => Ok(()),
        }
    }

    /// `Ok(None)` when the file does not exist; `Corrupt` when it does not parse or an
    /// entry does not have `width` fields.
    pub fn read(path: &Path, width: usize) -> Result<Option<Vec<Vec<i64>>>, StorageError> {
        let text = match fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let corrupt = |reason: &str| StorageError::Corrupt { path: path.to_owned(), reason: reason.into() };
        let mut lines = text.lines();
        if lines.next() != Some("0") {
            return Err(corrupt("unknown checkpoint version"));
        }
        let count: usize =
            lines.next().and_then(|l| l.trim().parse().ok()).ok_or_else(|| corrupt("missing entry count"))?;
        let entries: Vec<Vec<i64>> = lines
            .map(|l| l.split_whitespace().map(str::parse).collect::<Result<Vec<i64>, _>>())
            .collect::<Result<_, _>>()
            .map_err(|_| corrupt("entry is not a list of integers"))?;
        if entries.len() != count || entries.iter().any(|e| e.len() != width) {
            return Err(corrupt("entry count or width does not match"));
        }
        Ok(Some(entries))
    }

    /// Reads a single-offset checkpoint; a corrupt one is reported and treated as absent.
    pub fn read_offset(path: &Path) -> Result<Option<i64>, StorageError> {
        match Self::read(path, 1) {
            Ok(entries) => Ok(entries.and_then(|e| e.first().map(|v| v[0]))),
            Err(StorageError::Corrupt { path, reason }) => {
                tracing::warn!(path = %path.display(), %reason, "ignoring corrupt checkpoint");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    pub fn write_offset(path: &Path, offset: i64) -> io::Result<()> {
        Self::write(path, &[vec![offset]])
    }
}

/// Makes file creations, renames and deletions in `dir` durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp");
        assert_eq!(CheckpointFile::read(&path, 2).unwrap(), None);
        CheckpointFile::write(&path, &[vec![1, 10], vec![3, 50]]).unwrap();
        assert_eq!(CheckpointFile::read(&path, 2).unwrap(), Some(vec![vec![1, 10], vec![3, 50]]));
        CheckpointFile::write_offset(&path, 77).unwrap();
        assert_eq!(CheckpointFile::read_offset(&path).unwrap(), Some(77));
        fs::write(&path, "0\n2\n5\n").unwrap();
        assert!(matches!(CheckpointFile::read(&path, 1), Err(StorageError::Corrupt { .. })));
        assert_eq!(CheckpointFile::read_offset(&path).unwrap(), None);
    }
}
