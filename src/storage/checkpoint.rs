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

/// Replace `path` with `bytes` so that a crash leaves either the old or the new file:
/// `<path>.tmp` written and fsynced, renamed over `path`, the directory fsynced.
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = Path::new(&tmp_name);
    let mut file = File::create(tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(tmp, path)?;
    match path.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

impl CheckpointFile {
    pub fn write(path: &Path, entries: &[Vec<i64>]) -> io::Result<()> {
        let lines: Vec<String> =
            entries.iter().map(|entry| entry.iter().map(i64::to_string).collect::<Vec<_>>().join(" ")).collect();
        Self::write_lines(path, &lines)
    }

    /// Writes the version, the count and `lines` as they are.
    fn write_lines(path: &Path, lines: &[String]) -> io::Result<()> {
        let mut text = format!("0\n{}\n", lines.len());
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        replace_file(path, text.as_bytes())
    }

    /// `Ok(None)` when the file does not exist; `Corrupt` when it does not parse or an
    /// entry does not have `width` fields.
    pub fn read(path: &Path, width: usize) -> Result<Option<Vec<Vec<i64>>>, StorageError> {
        let Some(lines) = Self::read_lines(path)? else { return Ok(None) };
        let corrupt = |reason: &str| StorageError::Corrupt { path: path.to_owned(), reason: reason.into() };
        let entries: Vec<Vec<i64>> = lines
            .iter()
            .map(|l| l.split_whitespace().map(str::parse).collect::<Result<Vec<i64>, _>>())
            .collect::<Result<_, _>>()
            .map_err(|_| corrupt("entry is not a list of integers"))?;
        if entries.iter().any(|e| e.len() != width) {
            return Err(corrupt("entry width does not match"));
        }
        Ok(Some(entries))
    }

    /// The entry lines after the version and the count, checked against both.
    fn read_lines(path: &Path) -> Result<Option<Vec<String>>, StorageError> {
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
        let entries: Vec<String> = lines.map(str::to_owned).collect();
        if entries.len() != count {
            return Err(corrupt("entry count does not match"));
        }
        Ok(Some(entries))
    }

    /// Kafka's `replication-offset-checkpoint` of a log directory: one `topic partition
    /// high-watermark` line per partition the directory holds.
    pub fn write_partition_offsets(path: &Path, entries: &[PartitionOffset]) -> io::Result<()> {
        let lines: Vec<String> = entries.iter().map(|e| format!("{} {} {}", e.topic, e.partition, e.offset)).collect();
        Self::write_lines(path, &lines)
    }

    /// Reads what [`write_partition_offsets`](Self::write_partition_offsets) wrote;
    /// `Corrupt` when a line is not a topic name and two integers.
    pub fn read_partition_offsets(path: &Path) -> Result<Option<Vec<PartitionOffset>>, StorageError> {
        let Some(lines) = Self::read_lines(path)? else { return Ok(None) };
        let parse = |line: &str| {
            let mut fields = line.split(' ');
            let topic = fields.next().filter(|t| !t.is_empty())?.to_owned();
            let partition = fields.next()?.parse().ok()?;
            let offset = fields.next()?.parse().ok()?;
            fields.next().is_none().then_some(PartitionOffset { topic, partition, offset })
        };
        let corrupt =
            || StorageError::Corrupt { path: path.to_owned(), reason: "entry is not 'topic partition offset'".into() };
        lines.iter().map(|l| parse(l).ok_or_else(corrupt)).collect::<Result<Vec<_>, _>>().map(Some)
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

/// One partition's offset in a per-directory checkpoint (Kafka's topic-partition keyed
/// files, such as `replication-offset-checkpoint`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
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

    #[test]
    fn partition_offsets_round_trip_in_kafkas_layout_and_refuse_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replication-offset-checkpoint");
        assert_eq!(CheckpointFile::read_partition_offsets(&path).unwrap(), None);
        let entries = vec![
            PartitionOffset { topic: "orders".into(), partition: 0, offset: 42 },
            PartitionOffset { topic: "__consumer_offsets".into(), partition: 17, offset: 0 },
        ];
        CheckpointFile::write_partition_offsets(&path, &entries).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n2\norders 0 42\n__consumer_offsets 17 0\n");
        assert_eq!(CheckpointFile::read_partition_offsets(&path).unwrap(), Some(entries));
        for bad in ["0\n1\norders 0\n", "0\n1\norders x 1\n", "0\n1\norders 0 1 2\n", "0\n2\no 0 1\n", "1\n0\n"] {
            fs::write(&path, bad).unwrap();
            assert!(
                matches!(CheckpointFile::read_partition_offsets(&path), Err(StorageError::Corrupt { .. })),
                "{bad:?}"
            );
        }
    }
}
