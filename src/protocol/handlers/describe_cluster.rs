//! DescribeCluster.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::{cluster_ops_all, str_bytes, OPS_NOT_REQUESTED};
use crate::protocol::{Ctx, RequestInfo};

/// Fenced brokers are listed only when the request asks for them (v2,
/// `include_fenced_brokers`), marked `is_fenced`, as Kafka's KafkaApis does.
pub fn handle(ctx: &Ctx, info: &RequestInfo, req: DescribeClusterRequest, _version: i16) -> DescribeClusterResponse {
    let image = ctx.image();
    let brokers = image
        .brokers
        .values()
        .filter(|b| req.include_fenced_brokers || !b.fenced)
        .map(|b| {
            let (host, port) = b.endpoint(info.listener);
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.node_id))
                .with_host(str_bytes(host.to_owned()))
                .with_port(i32::from(port))
                .with_rack(b.rack.clone().map(str_bytes))
                .with_is_fenced(b.fenced)
        })
        .collect();
    DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(image.cluster_id.clone()))
        .with_controller_id(BrokerId(ctx.controller.node_id()))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(if req.include_cluster_authorized_operations {
            cluster_ops_all()
        } else {
            OPS_NOT_REQUESTED
        })
}
