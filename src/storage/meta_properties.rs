//! `meta.properties`: the identity of a data dir, in Kafka's file format, so that Kafka's
//! tools that read it (`kafka-metadata-quorum add-controller` takes a controller's
//! directory id from it) and operators who know Kafka find what they expect.
//!
//! ```text
//! version=1
//! node.id=4
//! directory.id=J8aAdJcvSUWwlbWnvgVvMA
//! cluster.id=5L6g3nShT-eMCtK--X86sw
//! ```
//!
//! Java properties, one `key=value` a line, `#` comments. `directory.id` is a Kafka uuid
//! string (16 bytes, URL-safe base64 without padding). `cluster.id` is written once the
//! node knows its cluster (a node that joins one learns it from the metadata log).
//!
//! Invariants: a data dir belongs to one node id (a node started on another node's dir is
//! refused, as Kafka refuses it); its directory id never changes once written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use uuid::Uuid;

pub const FILE_NAME: &str = "meta.properties";

#[derive(Debug, thiserror::Error)]
pub enum MetaPropertiesError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: this data dir belongs to node {stored}, not to node {configured} (node.id)")]
    OtherNode { path: PathBuf, stored: i32, configured: i32 },
    #[error("{path}: {what}")]
    Invalid { path: PathBuf, what: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    pub node_id: i32,
    pub directory_id: Uuid,
    pub cluster_id: Option<String>,
}

impl MetaProperties {
    /// The data dir's identity: read, or created for `node_id` with a new directory id.
    pub fn load_or_create(dir: &Path, node_id: i32) -> Result<MetaProperties, MetaPropertiesError> {
        let path = dir.join(FILE_NAME);
        let io = |source| MetaPropertiesError::Io { path: path.clone(), source };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let created = MetaProperties { node_id, directory_id: new_directory_id(), cluster_id: None };
                created.write(dir)?;
                return Ok(created);
            }
            Err(e) => return Err(io(e)),
        };
        let invalid = |what: String| MetaPropertiesError::Invalid { path: path.clone(), what };
        let props = parse(&text);
        let stored = props.get("node.id").ok_or_else(|| invalid("no node.id".into()))?;
        let stored: i32 = stored.parse().map_err(|_| invalid(format!("node.id `{stored}` is not a number")))?;
        if stored != node_id {
            return Err(MetaPropertiesError::OtherNode { path, stored, configured: node_id });
        }
        let directory_id = match props.get("directory.id") {
            Some(s) => decode_uuid(s).ok_or_else(|| invalid(format!("directory.id `{s}` is not a Kafka uuid")))?,
            None => Uuid::nil(),
        };
        let mut loaded =
            MetaProperties { node_id, directory_id, cluster_id: props.get("cluster.id").map(|s| s.to_string()) };
        if loaded.directory_id.is_nil() {
            // Written by something that had no directory ids: give the dir one.
            loaded.directory_id = new_directory_id();
            loaded.write(dir)?;
        }
        Ok(loaded)
    }

    /// Record the cluster this dir's node belongs to, if the file does not name it yet.
    pub fn record_cluster_id(&mut self, dir: &Path, cluster_id: &str) -> Result<(), MetaPropertiesError> {
        if cluster_id.is_empty() || self.cluster_id.is_some() {
            return Ok(());
        }
        self.cluster_id = Some(cluster_id.to_owned());
        self.write(dir)
    }

    fn write(&self, dir: &Path) -> Result<(), MetaPropertiesError> {
        let path = dir.join(FILE_NAME);
        let mut text = format!(
            "#runnel: this data dir's identity (Kafka's meta.properties format)\nversion=1\nnode.id={}\ndirectory.id={}\n",
            self.node_id,
            encode_uuid(&self.directory_id)
        );
        if let Some(c) = &self.cluster_id {
            text.push_str(&format!("cluster.id={c}\n"));
        }
        std::fs::create_dir_all(dir)
            .and_then(|()| super::checkpoint::replace_file(&path, text.as_bytes()))
            .map_err(|source| MetaPropertiesError::Io { path, source })
    }
}

fn parse(text: &str) -> BTreeMap<&str, &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect()
}

/// A random directory id that Kafka would also have made: not one of its reserved ids
/// (the nil uuid and those below 100 in the low bits) and not starting with `-` in its
/// string form (Kafka's `Uuid.randomUuid` avoids those, which read as command-line flags).
fn new_directory_id() -> Uuid {
    loop {
        let id = Uuid::new_v4();
        if id.as_u128() >= 100 && !encode_uuid(&id).starts_with('-') {
            return id;
        }
    }
}

/// Kafka's text form of a uuid: its 16 bytes in URL-safe base64 without padding.
pub fn encode_uuid(id: &Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

pub fn decode_uuid(s: &str) -> Option<Uuid> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).ok()?;
    Uuid::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_uuid_strings() {
        // Kafka's Uuid.ZERO_UUID and Uuid.ONE_UUID.
        assert_eq!(encode_uuid(&Uuid::nil()), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(encode_uuid(&Uuid::from_u128(1)), "AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(decode_uuid("AAAAAAAAAAAAAAAAAAAAAQ"), Some(Uuid::from_u128(1)));
        assert_eq!(decode_uuid("not a uuid"), None);
        assert_eq!(decode_uuid("AAAA"), None);
    }

    #[test]
    fn created_once_then_read_back_and_refused_to_another_node() {
        let dir = tempfile::tempdir().unwrap();
        let mut created = MetaProperties::load_or_create(dir.path(), 4).unwrap();
        assert!(!created.directory_id.is_nil() && created.cluster_id.is_none());
        assert_eq!(MetaProperties::load_or_create(dir.path(), 4).unwrap(), created);
        created.record_cluster_id(dir.path(), "5L6g3nShT-eMCtK--X86sw").unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(text.contains("version=1\nnode.id=4\n"), "{text}");
        assert!(text.contains(&format!("directory.id={}\n", encode_uuid(&created.directory_id))), "{text}");
        assert!(text.contains("cluster.id=5L6g3nShT-eMCtK--X86sw\n"), "{text}");
        assert_eq!(MetaProperties::load_or_create(dir.path(), 4).unwrap(), created);
        let other = MetaProperties::load_or_create(dir.path(), 5);
        assert!(matches!(other, Err(MetaPropertiesError::OtherNode { stored: 4, configured: 5, .. })), "{other:?}");
    }

    #[test]
    fn a_file_without_a_directory_id_gets_one_and_a_bad_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, "# written by hand\nversion=1\nnode.id=2\ncluster.id=c\n").unwrap();
        let loaded = MetaProperties::load_or_create(dir.path(), 2).unwrap();
        assert!(!loaded.directory_id.is_nil());
        assert_eq!(loaded.cluster_id.as_deref(), Some("c"));
        assert_eq!(MetaProperties::load_or_create(dir.path(), 2).unwrap(), loaded, "the new id was written");
        std::fs::write(&path, "version=1\nnode.id=2\ndirectory.id=???\n").unwrap();
        assert!(matches!(MetaProperties::load_or_create(dir.path(), 2), Err(MetaPropertiesError::Invalid { .. })));
        std::fs::write(&path, "version=1\n").unwrap();
        assert!(matches!(MetaProperties::load_or_create(dir.path(), 2), Err(MetaPropertiesError::Invalid { .. })));
    }
}
