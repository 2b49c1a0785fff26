//! Idempotent producers: retries are answered with the original offsets and never
//! appended twice, sequence gaps and fenced epochs are refused, and the state survives a
//! restart because it is rebuilt from the log.

mod common;

use common::batches::{self, Idempotence};
use common::{Client, TestBroker};
use kafka_protocol::messages::{InitProducerIdRequest, ProducerId};

const TOPIC: &str = "idem";

async fn init_producer_id(c: &mut Client) -> (i64, i16) {
    let resp = c
        .send(4, InitProducerIdRequest::default().with_transactional_id(None).with_transaction_timeout_ms(60_000))
        .await;
    assert_eq!(resp.error_code, 0);
    assert!(resp.producer_id.0 >= 0);
    (resp.producer_id.0, resp.producer_epoch)
}

fn batch(producer_id: i64, producer_epoch: i16, base_sequence: i32, n: usize) -> bytes::Bytes {
    batches::idempotent(Idempotence { producer_id, producer_epoch, base_sequence }, &format!("s{base_sequence}"), n)
}

/// Two plain records first, so the idempotent batch does not start at offset 0.
async fn setup(broker: &TestBroker) -> (Client, i64, i16) {
    let mut c = broker.client().await;
    c.create_topic_ok(TOPIC, 1, &[]).await;
    assert_eq!(c.produce_ok(TOPIC, 0, batches::values("plain", 2)).await, 0);
    let (pid, epoch) = init_producer_id(&mut c).await;
    assert_eq!(epoch, 0);
    (c, pid, epoch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_ids_are_unique() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let (a, _) = init_producer_id(&mut c).await;
    let (b, _) = init_producer_id(&mut broker.client().await).await;
    assert_ne!(a, b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_gaps_and_fenced_epochs() {
    let broker = TestBroker::start().await;
    let (mut c, pid, epoch) = setup(&broker).await;

    let first = c.produce(TOPIC, 0, batch(pid, epoch, 0, 3)).await;
    assert_eq!(first.error_code, 0);
    assert_eq!(first.base_offset, 2);
    assert_eq!(c.log_end_offset(TOPIC, 0).await, 5);

    // The identical batch again (a retry after a lost response): same offset, no append.
    let retry = c.produce(TOPIC, 0, batch(pid, epoch, 0, 3)).await;
    assert_eq!(retry.error_code, 0);
    assert_eq!(retry.base_offset, 2);
    assert_eq!(c.log_end_offset(TOPIC, 0).await, 5);

    // A gap: sequence 5 when 3 is next.
    let gap = c.produce(TOPIC, 0, batch(pid, epoch, 5, 1)).await;
    assert_eq!(gap.error_code, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER");
    assert_eq!(c.log_end_offset(TOPIC, 0).await, 5);

    // The next batch in order.
    let next = c.produce(TOPIC, 0, batch(pid, epoch, 3, 2)).await;
    assert_eq!((next.error_code, next.base_offset), (0, 5));
    assert_eq!(c.log_end_offset(TOPIC, 0).await, 7);

    // A retry of an older batch, still among the last five: its original offsets.
    let old_retry = c.produce(TOPIC, 0, batch(pid, epoch, 0, 3)).await;
    assert_eq!((old_retry.error_code, old_retry.base_offset), (0, 2));
    assert_eq!(c.log_end_offset(TOPIC, 0).await, 7);

    // The log holds each record once, in order.
    let values = batches::decode_values(&c.fetch(TOPIC, 0, 0).await.records);
    assert_eq!(values, ["plain-0", "plain-1", "s0-0", "s0-1", "s0-2", "s3-0", "s3-1"]);

    // The producer bumps its epoch (as the Java idempotent producer does locally, KIP-360);
    // a new epoch starts at sequence 0.
    let skipped = c.produce(TOPIC, 0, batch(pid, epoch + 1, 3, 1)).await;
    assert_eq!(skipped.error_code, 45, "a new epoch must start at sequence 0");
    let new_epoch = c.produce(TOPIC, 0, batch(pid, epoch + 1, 0, 1)).await;
    assert_eq!((new_epoch.error_code, new_epoch.base_offset), (0, 7));
    // The old epoch is fenced, whatever its sequence.
    for seq in [5, 0] {
        let fenced = c.produce(TOPIC, 0, batch(pid, epoch, seq, 1)).await;
        assert_eq!(fenced.error_code, 47, "INVALID_PRODUCER_EPOCH (seq {seq})");
    }
    assert_eq!(c.log_end_offset(TOPIC, 0).await, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequences_are_per_partition() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("idem2", 2, &[]).await;
    let (pid, epoch) = init_producer_id(&mut c).await;
    assert_eq!(c.produce("idem2", 0, batch(pid, epoch, 0, 2)).await.error_code, 0);
    // Partition 1 has its own sequence space: 0 is new there, not a duplicate.
    let p1 = c.produce("idem2", 1, batch(pid, epoch, 0, 2)).await;
    assert_eq!((p1.error_code, p1.base_offset), (0, 0));
    assert_eq!(c.log_end_offset("idem2", 1).await, 2);
}

/// `crash`: drop the broker without shutdown instead of stopping it cleanly.
async fn retry_survives(crash: bool) {
    let mut broker = TestBroker::start().await;
    let (mut c, pid, epoch) = setup(&broker).await;
    assert_eq!(c.produce_ok(TOPIC, 0, batch(pid, epoch, 0, 3)).await, 2);
    assert_eq!(c.produce_ok(TOPIC, 0, batch(pid, epoch, 3, 2)).await, 5);
    drop(c);

    if crash {
        broker.crash_and_restart().await;
    } else {
        broker.restart().await;
    }

    let mut c = broker.client().await;
    assert_eq!(c.log_end_offset(TOPIC, 0).await, 7);
    for (seq, n, base) in [(3, 2, 5), (0, 3, 2)] {
        let retry = c.produce(TOPIC, 0, batch(pid, epoch, seq, n)).await;
        assert_eq!((retry.error_code, retry.base_offset), (0, base), "retry of sequence {seq} after restart");
    }
    assert_eq!(c.log_end_offset(TOPIC, 0).await, 7);
    let gap = c.produce(TOPIC, 0, batch(pid, epoch, 9, 1)).await;
    assert_eq!(gap.error_code, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER after restart");
    assert_eq!(c.produce_ok(TOPIC, 0, batch(pid, epoch, 5, 1)).await, 7);
    // A producer id allocated after the restart is not one handed out before it.
    let (fresh, _) = init_producer_id(&mut c).await;
    assert_ne!(fresh, pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_restart_is_still_a_duplicate() {
    retry_survives(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_crash_is_still_a_duplicate() {
    retry_survives(true).await;
}

/// Kafka's coordinator answers every InitProducerId without a transactional id with a
/// fresh producer id at epoch 0, whatever id and epoch the request carries, and refuses
/// an id without an epoch (or the reverse) with INVALID_REQUEST. Bumping the epoch of the
/// id in the request would let any client fence any idempotent producer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_producer_id_without_transactional_id_allocates_a_new_id() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let (pid, epoch) = init_producer_id(&mut c).await;
    let req = |id: i64, epoch: i16| {
        InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch)
    };
    let again = c.send(4, req(pid, epoch)).await;
    assert_eq!(again.error_code, 0);
    assert_ne!(again.producer_id.0, pid, "a new producer id");
    assert_eq!(again.producer_epoch, 0);
    for (id, ep) in [(pid, -1), (-1, 0)] {
        let bad = c.send(4, req(id, ep)).await;
        assert_eq!(bad.error_code, 42, "INVALID_REQUEST for id {id} epoch {ep}");
    }
}
