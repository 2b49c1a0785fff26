//! Request layouts, one module per API, as kafka-protocol 0.18 decodes them.

use super::{f, prims, t, Api, Layout, Ty::*, I16, I32, I64, I8, NEVER, UUID};

pub mod produce {
    use super::*;
    pub static API: Api = Api { key: 0, min: 3, max: 13, flexible_from: 9, body: &PRODUCE_REQUEST };
    static PRODUCE_REQUEST: Layout = Layout {
        fields: &[
            f("transactional_id", NStr, 3, 13),
            f("acks", I16, 3, 13),
            f("timeout_ms", I32, 3, 13),
            f("topic_data", Array(&TOPIC_PRODUCE_DATA), 3, 13),
        ],
        tags: &[],
    };
    static TOPIC_PRODUCE_DATA: Layout = Layout {
        fields: &[
            f("name", Str, 3, 12),
            f("topic_id", UUID, 13, 13),
            f("partition_data", Array(&PARTITION_PRODUCE_DATA), 3, 13),
        ],
        tags: &[],
    };
    static PARTITION_PRODUCE_DATA: Layout =
        Layout { fields: &[f("index", I32, 3, 13), f("records", Records, 3, 13)], tags: &[] };
}
pub mod fetch {
    use super::*;
    pub static API: Api = Api { key: 1, min: 4, max: 18, flexible_from: 12, body: &FETCH_REQUEST };
    static FETCH_REQUEST: Layout = Layout {
        fields: &[
            f("replica_id", I32, 4, 14),
            f("max_wait_ms", I32, 4, 18),
            f("min_bytes", I32, 4, 18),
            f("max_bytes", I32, 4, 18),
            f("isolation_level", I8, 4, 18),
            f("session_id", I32, 7, 18),
            f("session_epoch", I32, 7, 18),
            f("topics", Array(&FETCH_TOPIC), 4, 18),
            f("forgotten_topics_data", Array(&FORGOTTEN_TOPIC), 7, 18),
            f("rack_id", Str, 11, 18),
        ],
        tags: &[t(0, "cluster_id", NStr, 12, 18), t(1, "replica_state", One(&REPLICA_STATE), 15, 18)],
    };
    static FETCH_TOPIC: Layout = Layout {
        fields: &[f("topic", Str, 4, 12), f("topic_id", UUID, 13, 18), f("partitions", Array(&FETCH_PARTITION), 4, 18)],
        tags: &[],
    };
    static FORGOTTEN_TOPIC: Layout = Layout {
        fields: &[f("topic", Str, 7, 12), f("topic_id", UUID, 13, 18), f("partitions", prims(I32), 7, 18)],
        tags: &[],
    };
    static REPLICA_STATE: Layout =
        Layout { fields: &[f("replica_id", I32, 15, 18), f("replica_epoch", I64, 15, 18)], tags: &[] };
    static FETCH_PARTITION: Layout = Layout {
        fields: &[
            f("partition", I32, 4, 18),
            f("current_leader_epoch", I32, 9, 18),
            f("fetch_offset", I64, 4, 18),
            f("last_fetched_epoch", I32, 12, 18),
            f("log_start_offset", I64, 5, 18),
            f("partition_max_bytes", I32, 4, 18),
        ],
        tags: &[t(0, "replica_directory_id", UUID, 17, 18), t(1, "high_watermark", I64, 18, 18)],
    };
}
pub mod list_offsets {
    use super::*;
    pub static API: Api = Api { key: 2, min: 1, max: 10, flexible_from: 6, body: &LIST_OFFSETS_REQUEST };
    static LIST_OFFSETS_REQUEST: Layout = Layout {
        fields: &[
            f("replica_id", I32, 1, 10),
            f("isolation_level", I8, 2, 10),
            f("topics", Array(&LIST_OFFSETS_TOPIC), 1, 10),
            f("timeout_ms", I32, 10, 10),
        ],
        tags: &[],
    };
    static LIST_OFFSETS_TOPIC: Layout =
        Layout { fields: &[f("name", Str, 1, 10), f("partitions", Array(&LIST_OFFSETS_PARTITION), 1, 10)], tags: &[] };
    static LIST_OFFSETS_PARTITION: Layout = Layout {
        fields: &[f("partition_index", I32, 1, 10), f("current_leader_epoch", I32, 4, 10), f("timestamp", I64, 1, 10)],
        tags: &[],
    };
}
pub mod metadata {
    use super::*;
    pub static API: Api = Api { key: 3, min: 0, max: 13, flexible_from: 9, body: &METADATA_REQUEST };
    static METADATA_REQUEST: Layout = Layout {
        fields: &[
            f("topics", NArray(&METADATA_REQUEST_TOPIC), 0, 13),
            f("allow_auto_topic_creation", Bool, 4, 13),
            f("include_cluster_authorized_operations", Bool, 8, 10),
            f("include_topic_authorized_operations", Bool, 8, 13),
        ],
        tags: &[],
    };
    static METADATA_REQUEST_TOPIC: Layout =
        Layout { fields: &[f("topic_id", UUID, 10, 13), f("name", NStr, 0, 13)], tags: &[] };
}
pub mod offset_commit {
    use super::*;
    pub static API: Api = Api { key: 8, min: 2, max: 9, flexible_from: 8, body: &OFFSET_COMMIT_REQUEST };
    static OFFSET_COMMIT_REQUEST: Layout = Layout {
        fields: &[
            f("group_id", Str, 2, 9),
            f("generation_id_or_member_epoch", I32, 2, 9),
            f("member_id", Str, 2, 9),
            f("group_instance_id", NStr, 7, 9),
            f("retention_time_ms", I64, 2, 4),
            f("topics", Array(&OFFSET_COMMIT_REQUEST_TOPIC), 2, 9),
        ],
        tags: &[],
    };
    static OFFSET_COMMIT_REQUEST_TOPIC: Layout = Layout {
        fields: &[f("name", Str, 2, 9), f("partitions", Array(&OFFSET_COMMIT_REQUEST_PARTITION), 2, 9)],
        tags: &[],
    };
    static OFFSET_COMMIT_REQUEST_PARTITION: Layout = Layout {
        fields: &[
            f("partition_index", I32, 2, 9),
            f("committed_offset", I64, 2, 9),
            f("committed_leader_epoch", I32, 6, 9),
            f("committed_metadata", NStr, 2, 9),
        ],
        tags: &[],
    };
}
pub mod offset_fetch {
    use super::*;
    pub static API: Api = Api { key: 9, min: 1, max: 9, flexible_from: 6, body: &OFFSET_FETCH_REQUEST };
    static OFFSET_FETCH_REQUEST: Layout = Layout {
        fields: &[
            f("group_id", Str, 1, 7),
            f("topics", NArray(&OFFSET_FETCH_REQUEST_TOPIC), 1, 7),
            f("groups", Array(&OFFSET_FETCH_REQUEST_GROUP), 8, 9),
            f("require_stable", Bool, 7, 9),
        ],
        tags: &[],
    };
    static OFFSET_FETCH_REQUEST_TOPIC: Layout =
        Layout { fields: &[f("name", Str, 1, 7), f("partition_indexes", prims(I32), 1, 7)], tags: &[] };
    static OFFSET_FETCH_REQUEST_GROUP: Layout = Layout {
        fields: &[
            f("group_id", Str, 8, 9),
            f("member_id", NStr, 9, 9),
            f("member_epoch", I32, 9, 9),
            f("topics", NArray(&OFFSET_FETCH_REQUEST_TOPICS), 8, 9),
        ],
        tags: &[],
    };
    static OFFSET_FETCH_REQUEST_TOPICS: Layout =
        Layout { fields: &[f("name", Str, 8, 9), f("partition_indexes", prims(I32), 8, 9)], tags: &[] };
}
pub mod find_coordinator {
    use super::*;
    pub static API: Api = Api { key: 10, min: 0, max: 6, flexible_from: 3, body: &FIND_COORDINATOR_REQUEST };
    static FIND_COORDINATOR_REQUEST: Layout = Layout {
        fields: &[f("key", Str, 0, 3), f("key_type", I8, 1, 6), f("coordinator_keys", Strs, 4, 6)],
        tags: &[],
    };
}
pub mod join_group {
    use super::*;
    pub static API: Api = Api { key: 11, min: 0, max: 9, flexible_from: 6, body: &JOIN_GROUP_REQUEST };
    static JOIN_GROUP_REQUEST: Layout = Layout {
        fields: &[
            f("group_id", Str, 0, 9),
            f("session_timeout_ms", I32, 0, 9),
            f("rebalance_timeout_ms", I32, 1, 9),
            f("member_id", Str, 0, 9),
            f("group_instance_id", NStr, 5, 9),
            f("protocol_type", Str, 0, 9),
            f("protocols", Array(&JOIN_GROUP_REQUEST_PROTOCOL), 0, 9),
            f("reason", NStr, 8, 9),
        ],
        tags: &[],
    };
    static JOIN_GROUP_REQUEST_PROTOCOL: Layout =
        Layout { fields: &[f("name", Str, 0, 9), f("metadata", Bytes, 0, 9)], tags: &[] };
}
pub mod heartbeat {
    use super::*;
    pub static API: Api = Api { key: 12, min: 0, max: 4, flexible_from: 4, body: &HEARTBEAT_REQUEST };
    static HEARTBEAT_REQUEST: Layout = Layout {
        fields: &[
            f("group_id", Str, 0, 4),
            f("generation_id", I32, 0, 4),
            f("member_id", Str, 0, 4),
            f("group_instance_id", NStr, 3, 4),
        ],
        tags: &[],
    };
}
pub mod leave_group {
    use super::*;
    pub static API: Api = Api { key: 13, min: 0, max: 5, flexible_from: 4, body: &LEAVE_GROUP_REQUEST };
    static LEAVE_GROUP_REQUEST: Layout = Layout {
        fields: &[f("group_id", Str, 0, 5), f("member_id", Str, 0, 2), f("members", Array(&MEMBER_IDENTITY), 3, 5)],
        tags: &[],
    };
    static MEMBER_IDENTITY: Layout = Layout {
        fields: &[f("member_id", Str, 3, 5), f("group_instance_id", NStr, 3, 5), f("reason", NStr, 5, 5)],
        tags: &[],
    };
}
pub mod sync_group {
    use super::*;
    pub static API: Api = Api { key: 14, min: 0, max: 5, flexible_from: 4, body: &SYNC_GROUP_REQUEST };
    static SYNC_GROUP_REQUEST: Layout = Layout {
        fields: &[
            f("group_id", Str, 0, 5),
            f("generation_id", I32, 0, 5),
            f("member_id", Str, 0, 5),
            f("group_instance_id", NStr, 3, 5),
            f("protocol_type", NStr, 5, 5),
            f("protocol_name", NStr, 5, 5),
            f("assignments", Array(&SYNC_GROUP_REQUEST_ASSIGNMENT), 0, 5),
        ],
        tags: &[],
    };
    static SYNC_GROUP_REQUEST_ASSIGNMENT: Layout =
        Layout { fields: &[f("member_id", Str, 0, 5), f("assignment", Bytes, 0, 5)], tags: &[] };
}
pub mod describe_groups {
    use super::*;
    pub static API: Api = Api { key: 15, min: 0, max: 6, flexible_from: 5, body: &DESCRIBE_GROUPS_REQUEST };
    static DESCRIBE_GROUPS_REQUEST: Layout =
        Layout { fields: &[f("groups", Strs, 0, 6), f("include_authorized_operations", Bool, 3, 6)], tags: &[] };
}
pub mod list_groups {
    use super::*;
    pub static API: Api = Api { key: 16, min: 0, max: 5, flexible_from: 3, body: &LIST_GROUPS_REQUEST };
    static LIST_GROUPS_REQUEST: Layout =
        Layout { fields: &[f("states_filter", Strs, 4, 5), f("types_filter", Strs, 5, 5)], tags: &[] };
}
pub mod sasl_handshake {
    use super::*;
    pub static API: Api = Api { key: 17, min: 0, max: 1, flexible_from: NEVER, body: &SASL_HANDSHAKE_REQUEST };
    static SASL_HANDSHAKE_REQUEST: Layout = Layout { fields: &[f("mechanism", Str, 0, 1)], tags: &[] };
}
pub mod api_versions {
    use super::*;
    pub static API: Api = Api { key: 18, min: 0, max: 4, flexible_from: 3, body: &API_VERSIONS_REQUEST };
    static API_VERSIONS_REQUEST: Layout =
        Layout { fields: &[f("client_software_name", Str, 3, 4), f("client_software_version", Str, 3, 4)], tags: &[] };
}
pub mod create_topics {
    use super::*;
    pub static API: Api = Api { key: 19, min: 2, max: 7, flexible_from: 5, body: &CREATE_TOPICS_REQUEST };
    static CREATE_TOPICS_REQUEST: Layout = Layout {
        fields: &[
            f("topics", Array(&CREATABLE_TOPIC), 2, 7),
            f("timeout_ms", I32, 2, 7),
            f("validate_only", Bool, 2, 7),
        ],
        tags: &[],
    };
    static CREATABLE_TOPIC: Layout = Layout {
        fields: &[
            f("name", Str, 2, 7),
            f("num_partitions", I32, 2, 7),
            f("replication_factor", I16, 2, 7),
            f("assignments", Array(&CREATABLE_REPLICA_ASSIGNMENT), 2, 7),
            f("configs", Array(&CREATABLE_TOPIC_CONFIG), 2, 7),
        ],
        tags: &[],
    };
    static CREATABLE_REPLICA_ASSIGNMENT: Layout =
        Layout { fields: &[f("partition_index", I32, 2, 7), f("broker_ids", prims(I32), 2, 7)], tags: &[] };
    static CREATABLE_TOPIC_CONFIG: Layout =
        Layout { fields: &[f("name", Str, 2, 7), f("value", NStr, 2, 7)], tags: &[] };
}
pub mod delete_topics {
    use super::*;
    pub static API: Api = Api { key: 20, min: 1, max: 6, flexible_from: 4, body: &DELETE_TOPICS_REQUEST };
    static DELETE_TOPICS_REQUEST: Layout = Layout {
        fields: &[
            f("topics", Array(&DELETE_TOPIC_STATE), 6, 6),
            f("topic_names", Strs, 1, 5),
            f("timeout_ms", I32, 1, 6),
        ],
        tags: &[],
    };
    static DELETE_TOPIC_STATE: Layout =
        Layout { fields: &[f("name", NStr, 6, 6), f("topic_id", UUID, 6, 6)], tags: &[] };
}
pub mod delete_records {
    use super::*;
    pub static API: Api = Api { key: 21, min: 0, max: 2, flexible_from: 2, body: &DELETE_RECORDS_REQUEST };
    static DELETE_RECORDS_REQUEST: Layout =
        Layout { fields: &[f("topics", Array(&DELETE_RECORDS_TOPIC), 0, 2), f("timeout_ms", I32, 0, 2)], tags: &[] };
    static DELETE_RECORDS_TOPIC: Layout =
        Layout { fields: &[f("name", Str, 0, 2), f("partitions", Array(&DELETE_RECORDS_PARTITION), 0, 2)], tags: &[] };
    static DELETE_RECORDS_PARTITION: Layout =
        Layout { fields: &[f("partition_index", I32, 0, 2), f("offset", I64, 0, 2)], tags: &[] };
}
pub mod init_producer_id {
    use super::*;
    pub static API: Api = Api { key: 22, min: 0, max: 5, flexible_from: 2, body: &INIT_PRODUCER_ID_REQUEST };
    static INIT_PRODUCER_ID_REQUEST: Layout = Layout {
        fields: &[
            f("transactional_id", NStr, 0, 5),
            f("transaction_timeout_ms", I32, 0, 5),
            f("producer_id", I64, 3, 5),
            f("producer_epoch", I16, 3, 5),
        ],
        tags: &[],
    };
}
pub mod offset_for_leader_epoch {
    use super::*;
    pub static API: Api = Api { key: 23, min: 2, max: 4, flexible_from: 4, body: &OFFSET_FOR_LEADER_EPOCH_REQUEST };
    static OFFSET_FOR_LEADER_EPOCH_REQUEST: Layout =
        Layout { fields: &[f("replica_id", I32, 3, 4), f("topics", Array(&OFFSET_FOR_LEADER_TOPIC), 2, 4)], tags: &[] };
    static OFFSET_FOR_LEADER_TOPIC: Layout = Layout {
        fields: &[f("topic", Str, 2, 4), f("partitions", Array(&OFFSET_FOR_LEADER_PARTITION), 2, 4)],
        tags: &[],
    };
    static OFFSET_FOR_LEADER_PARTITION: Layout = Layout {
        fields: &[f("partition", I32, 2, 4), f("current_leader_epoch", I32, 2, 4), f("leader_epoch", I32, 2, 4)],
        tags: &[],
    };
}
pub mod add_partitions_to_txn {
    use super::*;
    pub static API: Api = Api { key: 24, min: 0, max: 5, flexible_from: 3, body: &ADD_PARTITIONS_TO_TXN_REQUEST };
    static ADD_PARTITIONS_TO_TXN_REQUEST: Layout = Layout {
        fields: &[
            f("transactions", Array(&ADD_PARTITIONS_TO_TXN_TRANSACTION), 4, 5),
            f("v3_and_below_transactional_id", Str, 0, 3),
            f("v3_and_below_producer_id", I64, 0, 3),
            f("v3_and_below_producer_epoch", I16, 0, 3),
            f("v3_and_below_topics", Array(&ADD_PARTITIONS_TO_TXN_TOPIC), 0, 3),
        ],
        tags: &[],
    };
    static ADD_PARTITIONS_TO_TXN_TOPIC: Layout =
        Layout { fields: &[f("name", Str, 0, 5), f("partitions", prims(I32), 0, 5)], tags: &[] };
    static ADD_PARTITIONS_TO_TXN_TRANSACTION: Layout = Layout {
        fields: &[
            f("transactional_id", Str, 4, 5),
            f("producer_id", I64, 4, 5),
            f("producer_epoch", I16, 4, 5),
            f("verify_only", Bool, 4, 5),
            f("topics", Array(&ADD_PARTITIONS_TO_TXN_TOPIC), 4, 5),
        ],
        tags: &[],
    };
}
pub mod add_offsets_to_txn {
    use super::*;
    pub static API: Api = Api { key: 25, min: 0, max: 4, flexible_from: 3, body: &ADD_OFFSETS_TO_TXN_REQUEST };
    static ADD_OFFSETS_TO_TXN_REQUEST: Layout = Layout {
        fields: &[
            f("transactional_id", Str, 0, 4),
            f("producer_id", I64, 0, 4),
            f("producer_epoch", I16, 0, 4),
            f("group_id", Str, 0, 4),
        ],
        tags: &[],
    };
}
pub mod end_txn {
    use super::*;
    pub static API: Api = Api { key: 26, min: 0, max: 5, flexible_from: 3, body: &END_TXN_REQUEST };
    static END_TXN_REQUEST: Layout = Layout {
        fields: &[
            f("transactional_id", Str, 0, 5),
            f("producer_id", I64, 0, 5),
            f("producer_epoch", I16, 0, 5),
            f("committed", Bool, 0, 5),
        ],
        tags: &[],
    };
}
pub mod txn_offset_commit {
    use super::*;
    pub static API: Api = Api { key: 28, min: 0, max: 5, flexible_from: 3, body: &TXN_OFFSET_COMMIT_REQUEST };
    static TXN_OFFSET_COMMIT_REQUEST: Layout = Layout {
        fields: &[
            f("transactional_id", Str, 0, 5),
            f("group_id", Str, 0, 5),
            f("producer_id", I64, 0, 5),
            f("producer_epoch", I16, 0, 5),
            f("generation_id", I32, 3, 5),
            f("member_id", Str, 3, 5),
            f("group_instance_id", NStr, 3, 5),
            f("topics", Array(&TXN_OFFSET_COMMIT_REQUEST_TOPIC), 0, 5),
        ],
        tags: &[],
    };
    static TXN_OFFSET_COMMIT_REQUEST_TOPIC: Layout = Layout {
        fields: &[f("name", Str, 0, 5), f("partitions", Array(&TXN_OFFSET_COMMIT_REQUEST_PARTITION), 0, 5)],
        tags: &[],
    };
    static TXN_OFFSET_COMMIT_REQUEST_PARTITION: Layout = Layout {
        fields: &[
            f("partition_index", I32, 0, 5),
            f("committed_offset", I64, 0, 5),
            f("committed_leader_epoch", I32, 2, 5),
            f("committed_metadata", NStr, 0, 5),
        ],
        tags: &[],
    };
}
pub mod describe_configs {
    use super::*;
    pub static API: Api = Api { key: 32, min: 1, max: 4, flexible_from: 4, body: &DESCRIBE_CONFIGS_REQUEST };
    static DESCRIBE_CONFIGS_REQUEST: Layout = Layout {
        fields: &[
            f("resources", Array(&DESCRIBE_CONFIGS_RESOURCE), 1, 4),
            f("include_synonyms", Bool, 1, 4),
            f("include_documentation", Bool, 3, 4),
        ],
        tags: &[],
    };
    static DESCRIBE_CONFIGS_RESOURCE: Layout = Layout {
        fields: &[f("resource_type", I8, 1, 4), f("resource_name", Str, 1, 4), f("configuration_keys", NStrs, 1, 4)],
        tags: &[],
    };
}
pub mod alter_configs {
    use super::*;
    pub static API: Api = Api { key: 33, min: 0, max: 2, flexible_from: 2, body: &ALTER_CONFIGS_REQUEST };
    static ALTER_CONFIGS_REQUEST: Layout = Layout {
        fields: &[f("resources", Array(&ALTER_CONFIGS_RESOURCE), 0, 2), f("validate_only", Bool, 0, 2)],
        tags: &[],
    };
    static ALTER_CONFIGS_RESOURCE: Layout = Layout {
        fields: &[
            f("resource_type", I8, 0, 2),
            f("resource_name", Str, 0, 2),
            f("configs", Array(&ALTERABLE_CONFIG), 0, 2),
        ],
        tags: &[],
    };
    static ALTERABLE_CONFIG: Layout = Layout { fields: &[f("name", Str, 0, 2), f("value", NStr, 0, 2)], tags: &[] };
}
pub mod alter_replica_log_dirs {
    use super::*;
    pub static API: Api = Api { key: 34, min: 1, max: 2, flexible_from: 2, body: &ALTER_REPLICA_LOG_DIRS_REQUEST };
    static ALTER_REPLICA_LOG_DIRS_REQUEST: Layout =
        Layout { fields: &[f("dirs", Array(&ALTER_REPLICA_LOG_DIR), 1, 2)], tags: &[] };
    static ALTER_REPLICA_LOG_DIR: Layout =
        Layout { fields: &[f("path", Str, 1, 2), f("topics", Array(&ALTER_REPLICA_LOG_DIR_TOPIC), 1, 2)], tags: &[] };
    static ALTER_REPLICA_LOG_DIR_TOPIC: Layout =
        Layout { fields: &[f("name", Str, 1, 2), f("partitions", prims(I32), 1, 2)], tags: &[] };
}
pub mod describe_log_dirs {
    use super::*;
    pub static API: Api = Api { key: 35, min: 1, max: 4, flexible_from: 2, body: &DESCRIBE_LOG_DIRS_REQUEST };
    static DESCRIBE_LOG_DIRS_REQUEST: Layout =
        Layout { fields: &[f("topics", NArray(&DESCRIBABLE_LOG_DIR_TOPIC), 1, 4)], tags: &[] };
    static DESCRIBABLE_LOG_DIR_TOPIC: Layout =
        Layout { fields: &[f("topic", Str, 1, 4), f("partitions", prims(I32), 1, 4)], tags: &[] };
}
pub mod sasl_authenticate {
    use super::*;
    pub static API: Api = Api { key: 36, min: 0, max: 2, flexible_from: 2, body: &SASL_AUTHENTICATE_REQUEST };
    static SASL_AUTHENTICATE_REQUEST: Layout = Layout { fields: &[f("auth_bytes", Bytes, 0, 2)], tags: &[] };
}
pub mod create_partitions {
    use super::*;
    pub static API: Api = Api { key: 37, min: 0, max: 3, flexible_from: 2, body: &CREATE_PARTITIONS_REQUEST };
    static CREATE_PARTITIONS_REQUEST: Layout = Layout {
        fields: &[
            f("topics", Array(&CREATE_PARTITIONS_TOPIC), 0, 3),
            f("timeout_ms", I32, 0, 3),
            f("validate_only", Bool, 0, 3),
        ],
        tags: &[],
    };
    static CREATE_PARTITIONS_TOPIC: Layout = Layout {
        fields: &[
            f("name", Str, 0, 3),
            f("count", I32, 0, 3),
            f("assignments", NArray(&CREATE_PARTITIONS_ASSIGNMENT), 0, 3),
        ],
        tags: &[],
    };
    static CREATE_PARTITIONS_ASSIGNMENT: Layout = Layout { fields: &[f("broker_ids", prims(I32), 0, 3)], tags: &[] };
}
pub mod delete_groups {
    use super::*;
    pub static API: Api = Api { key: 42, min: 0, max: 2, flexible_from: 2, body: &DELETE_GROUPS_REQUEST };
    static DELETE_GROUPS_REQUEST: Layout = Layout { fields: &[f("groups_names", Strs, 0, 2)], tags: &[] };
}
pub mod elect_leaders {
    use super::*;
    pub static API: Api = Api { key: 43, min: 0, max: 2, flexible_from: 2, body: &ELECT_LEADERS_REQUEST };
    static ELECT_LEADERS_REQUEST: Layout = Layout {
        fields: &[
            f("election_type", I8, 1, 2),
            f("topic_partitions", NArray(&TOPIC_PARTITIONS), 0, 2),
            f("timeout_ms", I32, 0, 2),
        ],
        tags: &[],
    };
    static TOPIC_PARTITIONS: Layout =
        Layout { fields: &[f("topic", Str, 0, 2), f("partitions", prims(I32), 0, 2)], tags: &[] };
}
pub mod alter_partition_reassignments {
    use super::*;
    pub static API: Api = Api { key: 45, min: 0, max: 1, flexible_from: 0, body: &REQUEST };
    static REQUEST: Layout = Layout {
        fields: &[
            f("timeout_ms", I32, 0, 1),
            f("allow_replication_factor_change", Bool, 1, 1),
            f("topics", Array(&TOPIC), 0, 1),
        ],
        tags: &[],
    };
    static TOPIC: Layout =
        Layout { fields: &[f("name", Str, 0, 1), f("partitions", Array(&PARTITION), 0, 1)], tags: &[] };
    static PARTITION: Layout =
        Layout { fields: &[f("partition_index", I32, 0, 1), f("replicas", NPrims(4), 0, 1)], tags: &[] };
}
pub mod list_partition_reassignments {
    use super::*;
    pub static API: Api = Api { key: 46, min: 0, max: 0, flexible_from: 0, body: &REQUEST };
    static REQUEST: Layout =
        Layout { fields: &[f("timeout_ms", I32, 0, 0), f("topics", NArray(&TOPICS), 0, 0)], tags: &[] };
    static TOPICS: Layout =
        Layout { fields: &[f("name", Str, 0, 0), f("partition_indexes", prims(I32), 0, 0)], tags: &[] };
}
pub mod incremental_alter_configs {
    use super::*;
    pub static API: Api = Api { key: 44, min: 0, max: 1, flexible_from: 1, body: &INCREMENTAL_ALTER_CONFIGS_REQUEST };
    static INCREMENTAL_ALTER_CONFIGS_REQUEST: Layout = Layout {
        fields: &[f("resources", Array(&ALTER_CONFIGS_RESOURCE), 0, 1), f("validate_only", Bool, 0, 1)],
        tags: &[],
    };
    static ALTER_CONFIGS_RESOURCE: Layout = Layout {
        fields: &[
            f("resource_type", I8, 0, 1),
            f("resource_name", Str, 0, 1),
            f("configs", Array(&ALTERABLE_CONFIG), 0, 1),
        ],
        tags: &[],
    };
    static ALTERABLE_CONFIG: Layout =
        Layout { fields: &[f("name", Str, 0, 1), f("config_operation", I8, 0, 1), f("value", NStr, 0, 1)], tags: &[] };
}
pub mod offset_delete {
    use super::*;
    pub static API: Api = Api { key: 47, min: 0, max: 0, flexible_from: NEVER, body: &OFFSET_DELETE_REQUEST };
    static OFFSET_DELETE_REQUEST: Layout = Layout {
        fields: &[f("group_id", Str, 0, 0), f("topics", Array(&OFFSET_DELETE_REQUEST_TOPIC), 0, 0)],
        tags: &[],
    };
    static OFFSET_DELETE_REQUEST_TOPIC: Layout = Layout {
        fields: &[f("name", Str, 0, 0), f("partitions", Array(&OFFSET_DELETE_REQUEST_PARTITION), 0, 0)],
        tags: &[],
    };
    static OFFSET_DELETE_REQUEST_PARTITION: Layout = Layout { fields: &[f("partition_index", I32, 0, 0)], tags: &[] };
}
pub mod update_features {
    use super::*;
    pub static API: Api = Api { key: 57, min: 0, max: 2, flexible_from: 0, body: &UPDATE_FEATURES_REQUEST };
    static UPDATE_FEATURES_REQUEST: Layout = Layout {
        fields: &[
            f("timeout_ms", I32, 0, 2),
            f("feature_updates", Array(&FEATURE_UPDATE_KEY), 0, 2),
            f("validate_only", Bool, 1, 2),
        ],
        tags: &[],
    };
    static FEATURE_UPDATE_KEY: Layout = Layout {
        fields: &[
            f("feature", Str, 0, 2),
            f("max_version_level", I16, 0, 2),
            f("allow_downgrade", Bool, 0, 0),
            f("upgrade_type", I8, 1, 2),
        ],
        tags: &[],
    };
}
pub mod describe_cluster {
    use super::*;
    pub static API: Api = Api { key: 60, min: 0, max: 2, flexible_from: 0, body: &DESCRIBE_CLUSTER_REQUEST };
    static DESCRIBE_CLUSTER_REQUEST: Layout = Layout {
        fields: &[
            f("include_cluster_authorized_operations", Bool, 0, 2),
            f("endpoint_type", I8, 1, 2),
            f("include_fenced_brokers", Bool, 2, 2),
        ],
        tags: &[],
    };
}
pub mod describe_producers {
    use super::*;
    pub static API: Api = Api { key: 61, min: 0, max: 0, flexible_from: 0, body: &DESCRIBE_PRODUCERS_REQUEST };
    static DESCRIBE_PRODUCERS_REQUEST: Layout =
        Layout { fields: &[f("topics", Array(&TOPIC_REQUEST), 0, 0)], tags: &[] };
    static TOPIC_REQUEST: Layout =
        Layout { fields: &[f("name", Str, 0, 0), f("partition_indexes", prims(I32), 0, 0)], tags: &[] };
}
pub mod describe_transactions {
    use super::*;
    pub static API: Api = Api { key: 65, min: 0, max: 0, flexible_from: 0, body: &DESCRIBE_TRANSACTIONS_REQUEST };
    static DESCRIBE_TRANSACTIONS_REQUEST: Layout = Layout { fields: &[f("transactional_ids", Strs, 0, 0)], tags: &[] };
}
pub mod list_transactions {
    use super::*;
    pub static API: Api = Api { key: 66, min: 0, max: 2, flexible_from: 0, body: &LIST_TRANSACTIONS_REQUEST };
    static LIST_TRANSACTIONS_REQUEST: Layout = Layout {
        fields: &[
            f("state_filters", Strs, 0, 2),
            f("producer_id_filters", prims(I64), 0, 2),
            f("duration_filter", I64, 1, 2),
            f("transactional_id_pattern", NStr, 2, 2),
        ],
        tags: &[],
    };
}
pub mod consumer_group_heartbeat {
    use super::*;
    pub static API: Api = Api { key: 68, min: 0, max: 1, flexible_from: 0, body: &CONSUMER_GROUP_HEARTBEAT_REQUEST };
    static CONSUMER_GROUP_HEARTBEAT_REQUEST: Layout = Layout {
        fields: &[
            f("group_id", Str, 0, 1),
            f("member_id", Str, 0, 1),
            f("member_epoch", I32, 0, 1),
            f("instance_id", NStr, 0, 1),
            f("rack_id", NStr, 0, 1),
            f("rebalance_timeout_ms", I32, 0, 1),
            f("subscribed_topic_names", NStrs, 0, 1),
            f("subscribed_topic_regex", NStr, 1, 1),
            f("server_assignor", NStr, 0, 1),
            f("topic_partitions", NArray(&TOPIC_PARTITIONS), 0, 1),
        ],
        tags: &[],
    };
    static TOPIC_PARTITIONS: Layout =
        Layout { fields: &[f("topic_id", UUID, 0, 1), f("partitions", prims(I32), 0, 1)], tags: &[] };
}
pub mod consumer_group_describe {
    use super::*;
    pub static API: Api = Api { key: 69, min: 0, max: 1, flexible_from: 0, body: &CONSUMER_GROUP_DESCRIBE_REQUEST };
    static CONSUMER_GROUP_DESCRIBE_REQUEST: Layout =
        Layout { fields: &[f("group_ids", Strs, 0, 1), f("include_authorized_operations", Bool, 0, 1)], tags: &[] };
}
pub mod list_config_resources {
    use super::*;
    pub static API: Api = Api { key: 74, min: 0, max: 1, flexible_from: 0, body: &LIST_CONFIG_RESOURCES_REQUEST };
    static LIST_CONFIG_RESOURCES_REQUEST: Layout =
        Layout { fields: &[f("resource_types", prims(I8), 1, 1)], tags: &[] };
}
pub mod describe_quorum {
    use super::*;
    pub static API: Api = Api { key: 55, min: 0, max: 2, flexible_from: 0, body: &DESCRIBE_QUORUM_REQUEST };
    static DESCRIBE_QUORUM_REQUEST: Layout = Layout { fields: &[f("topics", Array(&TOPIC_DATA), 0, 2)], tags: &[] };
    static TOPIC_DATA: Layout =
        Layout { fields: &[f("topic_name", Str, 0, 2), f("partitions", Array(&PARTITION_DATA), 0, 2)], tags: &[] };
    static PARTITION_DATA: Layout = Layout { fields: &[f("partition_index", I32, 0, 2)], tags: &[] };
}
pub mod unregister_broker {
    use super::*;
    pub static API: Api = Api { key: 64, min: 0, max: 0, flexible_from: 0, body: &UNREGISTER_BROKER_REQUEST };
    static UNREGISTER_BROKER_REQUEST: Layout = Layout { fields: &[f("broker_id", I32, 0, 0)], tags: &[] };
}
pub mod add_raft_voter {
    use super::*;
    pub static API: Api = Api { key: 80, min: 0, max: 0, flexible_from: 0, body: &ADD_RAFT_VOTER_REQUEST };
    static ADD_RAFT_VOTER_REQUEST: Layout = Layout {
        fields: &[
            f("cluster_id", NStr, 0, 0),
            f("timeout_ms", I32, 0, 0),
            f("voter_id", I32, 0, 0),
            f("voter_directory_id", UUID, 0, 0),
            f("listeners", Array(&LISTENER), 0, 0),
        ],
        tags: &[],
    };
    static LISTENER: Layout =
        Layout { fields: &[f("name", Str, 0, 0), f("host", Str, 0, 0), f("port", I16, 0, 0)], tags: &[] };
}
pub mod remove_raft_voter {
    use super::*;
    pub static API: Api = Api { key: 81, min: 0, max: 0, flexible_from: 0, body: &REMOVE_RAFT_VOTER_REQUEST };
    static REMOVE_RAFT_VOTER_REQUEST: Layout = Layout {
        fields: &[f("cluster_id", NStr, 0, 0), f("voter_id", I32, 0, 0), f("voter_directory_id", UUID, 0, 0)],
        tags: &[],
    };
}
pub mod describe_topic_partitions {
    use super::*;
    pub static API: Api = Api { key: 75, min: 0, max: 0, flexible_from: 0, body: &DESCRIBE_TOPIC_PARTITIONS_REQUEST };
    static DESCRIBE_TOPIC_PARTITIONS_REQUEST: Layout = Layout {
        fields: &[
            f("topics", Array(&TOPIC_REQUEST), 0, 0),
            f("response_partition_limit", I32, 0, 0),
            f("cursor", NOne(&CURSOR), 0, 0),
        ],
        tags: &[],
    };
    static TOPIC_REQUEST: Layout = Layout { fields: &[f("name", Str, 0, 0)], tags: &[] };
    static CURSOR: Layout =
        Layout { fields: &[f("topic_name", Str, 0, 0), f("partition_index", I32, 0, 0)], tags: &[] };
}
pub mod get_telemetry_subscriptions {
    use super::*;
    pub static API: Api = Api { key: 71, min: 0, max: 0, flexible_from: 0, body: &GET_TELEMETRY_SUBSCRIPTIONS_REQUEST };
    static GET_TELEMETRY_SUBSCRIPTIONS_REQUEST: Layout =
        Layout { fields: &[f("client_instance_id", UUID, 0, 0)], tags: &[] };
}
pub mod push_telemetry {
    use super::*;
    pub static API: Api = Api { key: 72, min: 0, max: 0, flexible_from: 0, body: &PUSH_TELEMETRY_REQUEST };
    static PUSH_TELEMETRY_REQUEST: Layout = Layout {
        fields: &[
            f("client_instance_id", UUID, 0, 0),
            f("subscription_id", I32, 0, 0),
            f("terminating", Bool, 0, 0),
            f("compression_type", I8, 0, 0),
            f("metrics", Bytes, 0, 0),
        ],
        tags: &[],
    };
}
