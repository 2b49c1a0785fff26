//! Typed requests and one-call helpers at the versions current clients use. Each helper
//! returns the single partition/topic result it asked about; callers assert on it.

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::*;

use super::{str, Client};

pub const PRODUCE_V: i16 = 9;
pub const FETCH_V: i16 = 12;
pub const LIST_OFFSETS_V: i16 = 7;
pub const METADATA_V: i16 = 12;
pub const CREATE_TOPICS_V: i16 = 7;
pub const DESCRIBE_CONFIGS_V: i16 = 4;

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;

pub fn topic_name(name: &str) -> TopicName {
    TopicName(str(name))
}

pub fn create_topics_request(
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> CreateTopicsRequest {
    CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| CreatableTopicConfig::default().with_name(str(k)).with_value(Some(str(v))))
                .collect(),
        )])
}

pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default().with_transactional_id(None).with_acks(acks).with_timeout_ms(30_000).with_topic_data(vec![
        TopicProduceData::default().with_name(topic_name(topic)).with_partition_data(vec![
            PartitionProduceData::default().with_index(partition).with_records(Some(records)),
        ]),
    ])
}

pub fn fetch_partition(partition: i32, offset: i64, partition_max_bytes: i32) -> FetchPartition {
    FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(partition_max_bytes)
}

/// A fetch by topic name (v4..=12) that does not wait.
pub fn fetch_request(topic: &str, partition: i32, offset: i64, partition_max_bytes: i32) -> FetchRequest {
    FetchRequest::default().with_max_wait_ms(0).with_min_bytes(0).with_max_bytes(50 * 1024 * 1024).with_topics(vec![
        FetchTopic::default().with_topic(topic_name(topic)).with_partitions(vec![fetch_partition(
            partition,
            offset,
            partition_max_bytes,
        )]),
    ])
}

pub fn list_offsets_request(topic: &str, partition: i32, timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![ListOffsetsTopic::default()
        .with_name(topic_name(topic))
        .with_partitions(vec![ListOffsetsPartition::default()
            .with_partition_index(partition)
            .with_timestamp(timestamp)])])
}

pub fn metadata_request(topics: &[&str]) -> MetadataRequest {
    MetadataRequest::default().with_topics(Some(
        topics.iter().map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t)))).collect(),
    ))
}

pub fn describe_configs_request(resource_type: i8, name: &str) -> DescribeConfigsRequest {
    DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(str(name))
        .with_configuration_keys(None)])
}

impl Client {
    pub async fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> CreatableTopicResult {
        let resp = self.send(CREATE_TOPICS_V, create_topics_request(name, partitions, 1, configs)).await;
        assert_eq!(resp.topics.len(), 1);
        resp.topics.into_iter().next().unwrap()
    }

    /// Create a topic that must not fail; returns its id.
    pub async fn create_topic_ok(&mut self, name: &str, partitions: i32, configs: &[(&str, &str)]) -> uuid::Uuid {
        let r = self.create_topic(name, partitions, configs).await;
        assert_eq!(r.error_code, 0, "create {name}: {:?}", r.error_message);
        r.topic_id
    }

    pub async fn produce_acks(
        &mut self,
        topic: &str,
        partition: i32,
        records: Bytes,
        acks: i16,
    ) -> PartitionProduceResponse {
        let resp = self.send(PRODUCE_V, produce_request(topic, partition, records, acks)).await;
        assert_eq!(resp.responses.len(), 1);
        let t = resp.responses.into_iter().next().unwrap();
        assert_eq!(t.name.0.as_str(), topic);
        assert_eq!(t.partition_responses.len(), 1);
        let p = t.partition_responses.into_iter().next().unwrap();
        assert_eq!(p.index, partition);
        p
    }

    pub async fn produce(&mut self, topic: &str, partition: i32, records: Bytes) -> PartitionProduceResponse {
        self.produce_acks(topic, partition, records, -1).await
    }

    /// Produce that must succeed; returns the base offset.
    pub async fn produce_ok(&mut self, topic: &str, partition: i32, records: Bytes) -> i64 {
        let p = self.produce(topic, partition, records).await;
        assert_eq!(p.error_code, 0, "produce to {topic}-{partition}: {:?}", p.error_message);
        p.base_offset
    }

    pub async fn fetch_with(&mut self, req: FetchRequest) -> PartitionData {
        let resp = self.send(FETCH_V, req).await;
        assert_eq!(resp.error_code, 0);
        assert_eq!(resp.responses.len(), 1);
        let t = resp.responses.into_iter().next().unwrap();
        assert_eq!(t.partitions.len(), 1);
        t.partitions.into_iter().next().unwrap()
    }

    pub async fn fetch(&mut self, topic: &str, partition: i32, offset: i64) -> PartitionData {
        self.fetch_with(fetch_request(topic, partition, offset, 1024 * 1024)).await
    }

    pub async fn list_offset(&mut self, topic: &str, partition: i32, timestamp: i64) -> ListOffsetsPartitionResponse {
        let resp = self.send(LIST_OFFSETS_V, list_offsets_request(topic, partition, timestamp)).await;
        assert_eq!(resp.topics.len(), 1);
        let t = resp.topics.into_iter().next().unwrap();
        assert_eq!(t.partitions.len(), 1);
        t.partitions.into_iter().next().unwrap()
    }

    /// The log end offset (= high watermark on one node) via ListOffsets LATEST.
    pub async fn log_end_offset(&mut self, topic: &str, partition: i32) -> i64 {
        let p = self.list_offset(topic, partition, LATEST).await;
        assert_eq!(p.error_code, 0, "ListOffsets {topic}-{partition}");
        p.offset
    }

    pub async fn metadata(&mut self, topics: &[&str]) -> MetadataResponse {
        self.send(METADATA_V, metadata_request(topics)).await
    }

    pub async fn describe_topic_configs(&mut self, topic: &str) -> DescribeConfigsResult {
        let resp = self.send(DESCRIBE_CONFIGS_V, describe_configs_request(RESOURCE_TOPIC, topic)).await;
        assert_eq!(resp.results.len(), 1);
        resp.results.into_iter().next().unwrap()
    }
}

/// The (value, source) of config `name` in a DescribeConfigs result.
pub fn config_entry(result: &DescribeConfigsResult, name: &str) -> Option<(Option<String>, i8)> {
    result
        .configs
        .iter()
        .find(|c| c.name.as_str() == name)
        .map(|c| (c.value.as_ref().map(|v| v.to_string()), c.config_source))
}
