//! A broker's part in the cluster (Kafka's `BrokerLifecycleManager`): heartbeats to the
//! controller quorum so it is not fenced, and a controlled shutdown that moves its
//! leadership off before the process stops. (The ISR changes its partitions' leaders
//! propose go through `alter_partition.rs`.) A single node does none of this.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use uuid::Uuid;

use super::alter_partition::ISR_RETRY_BACKOFF;
use crate::controller::Controller;
use crate::protocol::Ctx;
use crate::replication::replica_manager::HIGH_WATERMARK_CHECKPOINT_INTERVAL;

/// How long a controlled shutdown waits for its leadership to move off.
const CONTROLLED_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(15);

/// How long it waits when no live broker shares an ISR with this one (nothing can move
/// and nobody waits for it as a follower): long enough for a quorum that is there to
/// commit the request (leaders become none, so clients stop trying this broker), short
/// enough that the last broker of a stopping cluster, which has no quorum left, stops
/// without waiting out the full timeout.
const NOTHING_TO_MOVE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a broker keeps answering after its leadership moved off, before it closes
/// its listeners. A client that still routes to it (its last metadata came a moment
/// before the move, or from a broker whose image was a few ms behind the quorum's) then
/// gets NOT_LEADER_OR_FOLLOWER with the new leader's endpoint (KIP-951) and moves at
/// once. Without it the client finds the port closed; franz-go treats a refused
/// connection as a reason for a *non-urgent* metadata refresh, which waits out its
/// `MetadataMinAge` (5 s) from the last refresh: a partition stalled for up to 5 s in
/// the fault matrix. Long enough for a producer's retry after its first backoff (250 ms
/// in franz-go, 100 ms in the Java client) to land here; short next to a rolling
/// restart. Kafka closes at once.
pub const MOVED_LEADERSHIP_GRACE: Duration = Duration::from_millis(500);

/// Heartbeat every `broker.heartbeat.interval.ms` until shutdown. The first heartbeat
/// of this process (sent by [`register`] at start, or here if that did not get through)
/// registers its incarnation (fenced); the next one lets it back in.
///
/// Once `wants_shut_down` is set (the controlled shutdown began), every heartbeat asks to
/// shut down, as Kafka's `BrokerLifecycleManager` does from `PENDING_CONTROLLED_SHUTDOWN`.
/// A plain heartbeat would take the request back where a controller has not heard this
/// incarnation yet: after a controller failover during the shutdown (or its grace), the
/// new leader's first word from this broker would say it is staying, and the broker could
/// be elected leader or let back into ISRs moments before it stops.
pub async fn heartbeat_loop(
    ctx: Arc<Ctx>,
    incarnation: Uuid,
    wants_shut_down: Arc<AtomicBool>,
    mut shutdown: broadcast::Receiver<()>,
) {
    if !ctx.controller.is_clustered() {
        return;
    }
    let mut failures = 0u32;
    let mut answered = 0u64;
    loop {
        let leadership = ctx.controller.leadership();
        let want = wants_shut_down.load(Ordering::Acquire);
        let offline = ctx.replicas.offline_partitions();
        let beat = ctx.controller.heartbeat(incarnation, want, offline);
        // Shutdown does not wait for an answer: Broker::shutdown waits for this task.
        let answer = tokio::select! {
            answer = beat => answer,
            _ = shutdown.recv() => return,
        };
        match answer {
            Ok(()) => {
                if failures > 0 && answered > 0 {
                    tracing::info!(failures, "controller heartbeats answered again");
                }
                failures = 0;
                answered += 1;
            }
            Err(e) if answered > 0 && !ctx.controller.image().brokers.contains_key(&ctx.config.node_id) => {
                // Registered by this process once, gone from the committed metadata now:
                // an UnregisterBroker named it. Kafka's broker stays out until it is
                // restarted; this one registers again (fenced) and the next heartbeats
                // let it back in.
                tracing::warn!(error = %e, "this broker was unregistered while it runs; registering it again");
                match ctx.controller.register_again().await {
                    // As a new process: the next heartbeat registers, the one after unfences.
                    Ok(()) => (answered, failures) = (0, 0),
                    Err(e) => {
                        tracing::warn!(error = %e, "registering again failed; retrying");
                        failures += 1;
                    }
                }
            }
            Err(e) => {
                failures += 1;
                if failures.is_power_of_two() {
                    tracing::warn!(error = %e, failures, "broker heartbeat not answered");
                }
            }
        }
        // The second heartbeat of an incarnation unfences it: send it at once. Until the
        // first is answered (the quorum forming, the registration committing), retry
        // soon: the broker waits for it before it serves. A new quorum leader (new term
        // or node), or a leader that opened a new replication stream to this node
        // (restarted and resumed its term, or reconnected), is heartbeated at once: until
        // it has heard from a broker it lets it into no ISR, so after a controller
        // failover or restart a partition short of replicas stayed short (below
        // min.insync.replicas, refusing acks=all) for up to a heartbeat interval.
        let wait = match (answered, failures) {
            (1, 0) => 0,
            (0, f) if f < 100 => 100,
            _ => ctx.config.broker_heartbeat_interval_ms,
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            _ = ctx.controller.leadership_changed(leadership) => {}
            _ = shutdown.recv() => return,
        }
    }
}

/// In a cluster, every `replica.high.watermark.checkpoint.interval.ms` (Kafka's 5 s):
/// the high watermarks go to each log directory's `replication-offset-checkpoint`, so a
/// restarted replica starts from the high watermark it knew instead of its log start
/// (see `replica_manager/high_watermarks.rs` for when that matters). A single node's
/// ISR is itself (its high watermark is its log end at open): nothing to keep.
pub async fn high_watermark_checkpoint_loop(ctx: Arc<Ctx>, mut shutdown: broadcast::Receiver<()>) {
    if !ctx.controller.is_clustered() {
        return;
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(HIGH_WATERMARK_CHECKPOINT_INTERVAL) => {}
            // A deleted partition leaves the files at once: a topic created again under
            // its name must not start from the old topic's high watermark after a crash.
            _ = ctx.replicas.high_watermark_checkpoint_due() => {}
            _ = shutdown.recv() => return,
        }
        let replicas = ctx.replicas.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || replicas.checkpoint_high_watermarks()).await {
            tracing::error!(error = %e, "high watermark checkpoint failed");
        }
    }
}

/// How often a broker looks for log directories gone offline (one flag load per dir).
const OFFLINE_DIR_CHECK_INTERVAL: Duration = Duration::from_millis(200);

/// In a cluster: the replicas of a log directory that went offline (an I/O error) are
/// reported to the controller, which takes them out of their ISRs and moves their
/// leadership to the other in-sync replicas (Kafka's broker reports offline dirs in its
/// heartbeat). Without it a leader whose dir failed kept its partitions, answering
/// KAFKA_STORAGE_ERROR, until it was restarted. Reported until the image no longer
/// counts on them: those this broker is in the ISR of beside another member (as the
/// last member it keeps them: see `remove_offline_replicas`); the same set again only
/// after [`ISR_RETRY_BACKOFF`].
pub async fn offline_replicas_loop(ctx: Arc<Ctx>, mut shutdown: broadcast::Receiver<()>) {
    if !ctx.controller.is_clustered() {
        return;
    }
    let me = ctx.config.node_id;
    let mut last: Option<(Vec<(Uuid, i32)>, tokio::time::Instant)> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(OFFLINE_DIR_CHECK_INTERVAL) => {}
            _ = shutdown.recv() => return,
        }
        let offline = ctx.replicas.offline_partitions();
        if offline.is_empty() {
            continue;
        }
        let image = ctx.controller.image();
        let counted_on: Vec<(Uuid, i32)> = offline
            .into_iter()
            .filter(|(topic_id, partition)| {
                let pi = image.topic_by_id(topic_id).and_then(|t| t.partition(*partition));
                pi.is_some_and(|pi| pi.isr.contains(&me) && pi.isr.len() > 1)
            })
            .collect();
        let repeat = last.as_ref().is_some_and(|(sent, at)| *sent == counted_on && at.elapsed() < ISR_RETRY_BACKOFF);
        if counted_on.is_empty() || repeat {
            continue;
        }
        last = Some((counted_on.clone(), tokio::time::Instant::now()));
        let count = counted_on.len();
        match ctx.controller.replicas_offline(counted_on).await {
            Ok(()) => tracing::warn!(partitions = count, "replicas in an offline log dir reported to the controller"),
            Err(e) => tracing::warn!(partitions = count, error = %e, "offline replicas not reported; retrying"),
        }
    }
}

/// At start, in a cluster, before the partitions take their roles from the metadata:
/// this process's first heartbeat registers it (until `deadline`), as Kafka's broker
/// registers before it acts on the metadata. A controller that knew an earlier process
/// of this broker fences it and moves its leadership away; before, the new process
/// could lead a partition in the old one's leader epoch while an ISR addition that the
/// old one proposed was still on its way, and move the high watermark without the added
/// follower once it committed. (A controller that knew no earlier process lets it lead
/// on; the old one's proposals are then refused as stale.)
pub async fn register(controller: &Arc<Controller>, incarnation: Uuid, deadline: tokio::time::Instant) {
    if !controller.is_clustered() {
        return;
    }
    loop {
        // (A new process: its log dirs are all online so far.)
        match controller.heartbeat(incarnation, false, Vec::new()).await {
            Ok(()) => return tracing::info!("registered with the controller quorum"),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return tracing::warn!(error = %e, "not registered with the controller quorum yet; going on");
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// At start, in a cluster: wait (until `deadline`) until the quorum has let this broker
/// in, as Kafka's broker waits to be unfenced before it serves.
pub async fn wait_unfenced(ctx: &Ctx, deadline: tokio::time::Instant) {
    if !ctx.controller.is_clustered() {
        return;
    }
    while !ctx.controller.image().broker_alive(ctx.config.node_id) {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!("not unfenced by the controller quorum yet; serving anyway");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tracing::info!("unfenced by the controller quorum");
}

/// Ask the quorum to move this broker's leadership off (and take it out of ISRs), and
/// wait until the local image shows it leads nothing another live replica could lead.
/// Returns whether leadership moved off this broker to live brokers (then clients may
/// still route here for a moment: see [`MOVED_LEADERSHIP_GRACE`]); `false` on a single
/// node, when it led nothing another live broker could take, or when it timed out.
pub async fn controlled_shutdown(ctx: &Ctx, incarnation: Uuid) -> bool {
    if !ctx.controller.is_clustered() {
        return false;
    }
    let me = ctx.config.node_id;
    let image = ctx.controller.image();
    let shares_isr = shares_isr_with_a_live_broker(&image, me);
    let leads_shared = leads_with_a_live_follower(&image, me).next().is_some();
    drop(image);
    let timeout = if shares_isr { CONTROLLED_SHUTDOWN_TIMEOUT } else { NOTHING_TO_MOVE_TIMEOUT };
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // Bounded here too: the controller gives up on its own deadline, but this loop's
        // deadline is the one that must hold for the process to stop.
        let offline = ctx.replicas.offline_partitions();
        let ask = ctx.controller.heartbeat(incarnation, true, offline);
        let asked = match tokio::time::timeout_at(deadline, ask).await {
            Ok(asked) => asked,
            Err(_) => {
                tracing::warn!("controlled shutdown: the controller did not answer in time; stopping anyway");
                return false;
            }
        };
        let still_leading = leads_with_a_live_follower(&ctx.controller.image(), me).count();
        if asked.is_ok() && still_leading == 0 {
            tracing::info!("controlled shutdown: leadership moved off this broker");
            return leads_shared;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(still_leading, "controlled shutdown timed out; stopping anyway");
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The partitions `me` leads with another in-sync broker that is alive and staying (one
/// leadership could move to).
fn leads_with_a_live_follower(
    image: &crate::controller::image::MetadataImage,
    me: i32,
) -> impl Iterator<Item = &crate::controller::image::PartitionImage> {
    image
        .topics
        .values()
        .flat_map(|t| t.partitions.iter())
        .filter(move |p| p.leader == me && p.isr.iter().any(|r| *r != me && image.broker_staying(*r)))
}

/// Whether some partition has `me` in its ISR beside another broker the image shows
/// alive and not itself shutting down: a leadership the controller can move to it, or a
/// leader that counts on `me` as a follower until the controller takes `me` out of the ISR.
fn shares_isr_with_a_live_broker(image: &crate::controller::image::MetadataImage, me: i32) -> bool {
    image
        .topics
        .values()
        .flat_map(|t| t.partitions.iter())
        .any(|p| p.isr.contains(&me) && p.isr.iter().any(|r| *r != me && image.broker_staying(*r)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use uuid::Uuid;

    use super::shares_isr_with_a_live_broker;
    use crate::controller::image::{BrokerImage, MetadataImage, PartitionImage, TopicImage};

    /// Brokers 1–3, `fenced` among them fenced, one partition per ISR.
    fn image(isrs: &[&[i32]], fenced: &[i32]) -> MetadataImage {
        let mut img = MetadataImage::default();
        for id in 1..=3 {
            let fenced = fenced.contains(&id);
            img.brokers.insert(
                id,
                BrokerImage {
                    node_id: id,
                    host: "h".into(),
                    port: 1,
                    rack: None,
                    fenced,
                    inter_broker: None,
                    incarnation: None,
                    metadata_format: crate::controller::records::METADATA_FORMAT,
                },
            );
        }
        let partitions = isrs
            .iter()
            .enumerate()
            .map(|(i, isr)| PartitionImage {
                partition: i as i32,
                replicas: vec![1, 2, 3],
                isr: isr.to_vec(),
                leader: isr[0],
                leader_epoch: 0,
                partition_epoch: 0,
                adding_replicas: vec![],
                removing_replicas: vec![],
                elr: Vec::new(),
                last_known_elr: Vec::new(),
            })
            .collect();
        let id = Uuid::from_u128(3);
        img.topic_names_by_id.insert(id, "t".into());
        img.topics.insert(
            "t".into(),
            Arc::new(TopicImage { name: "t".into(), topic_id: id, partitions, configs: Default::default() }),
        );
        img
    }

    #[test]
    fn a_broker_shares_an_isr_only_with_live_brokers_beside_it() {
        // Leader 1 with follower 3: both directions count.
        assert!(shares_isr_with_a_live_broker(&image(&[&[1, 3]], &[]), 3));
        assert!(shares_isr_with_a_live_broker(&image(&[&[1, 3]], &[]), 1));
        // The last broker of a stopping cluster: the others were taken out of its ISRs,
        // or are fenced.
        assert!(!shares_isr_with_a_live_broker(&image(&[&[3], &[2]], &[]), 3));
        assert!(!shares_isr_with_a_live_broker(&image(&[&[3, 1, 2]], &[1, 2]), 3));
        // Not in the ISR at all.
        assert!(!shares_isr_with_a_live_broker(&image(&[&[1, 2]], &[]), 3));
    }
}
