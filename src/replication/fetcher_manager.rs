//! Starts and stops the follower fetchers: one [`Fetcher`] per leader broker that leads a
//! partition this broker follows, looked at again whenever a local partition changes
//! role or leader (and every few seconds, as a safety net). Also runs the leader's periodic
//! ISR lag check (Kafka's `isr-expiration` task, every `replica.lag.time.max.ms / 2`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::fetcher::Fetcher;
use super::leader_endpoint::LeaderEndpoints;
use super::ReplicaManager;

/// The safety net behind the role-change signal: a fetcher that ended (a panic) restarts.
const RECONCILE_EVERY: Duration = Duration::from_secs(5);

/// The running fetchers; [`FetcherManager::shutdown`] stops them and waits.
pub struct FetcherManager {
    stop: watch::Sender<bool>,
    supervisor: Option<JoinHandle<()>>,
}

struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl FetcherManager {
    /// Starts supervising; fetchers start as partitions become followers.
    pub fn start(manager: Arc<ReplicaManager>, endpoints: Arc<dyn LeaderEndpoints>) -> FetcherManager {
        let (stop, stopped) = watch::channel(false);
        let supervisor = tokio::spawn(supervise(manager, endpoints, stopped));
        FetcherManager { stop, supervisor: Some(supervisor) }
    }

    /// Stops every fetcher (a fetch in flight is abandoned, nothing half applied: each
    /// answer is applied under the partition lock or not at all) and waits for them.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.supervisor.take() {
            let _ = task.await;
        }
    }
}

impl Drop for FetcherManager {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn supervise(manager: Arc<ReplicaManager>, endpoints: Arc<dyn LeaderEndpoints>, mut stop: watch::Receiver<bool>) {
    let mut roles = manager.role_changes();
    let mut running: HashMap<i32, Running> = HashMap::new();
    let lag_check_every = (manager.replica_lag_time_max_ms() / 2).max(1);
    let mut lag_check = tokio::time::interval(Duration::from_millis(lag_check_every as u64));
    loop {
        if *stop.borrow() || stop.has_changed().is_err() {
            break;
        }
        reconcile(&manager, &endpoints, &mut running);
        tokio::select! {
            _ = roles.changed() => {}
            _ = tokio::time::sleep(RECONCILE_EVERY) => {}
            _ = lag_check.tick() => manager.check_isr_lag(manager.now_ms()),
            _ = stop.changed() => {}
        }
    }
    for (_, r) in running.iter() {
        let _ = r.stop.send(true);
    }
    for (_, r) in running {
        let _ = r.task.await;
    }
}

/// One fetcher per leader that leads a followed partition; none for any other.
fn reconcile(manager: &Arc<ReplicaManager>, endpoints: &Arc<dyn LeaderEndpoints>, running: &mut HashMap<i32, Running>) {
    let leaders: BTreeSet<i32> =
        manager.all_partitions().iter().filter_map(|p| p.follower_fetch_state()).map(|s| s.leader).collect();
    running.retain(|leader, r| {
        let keep = leaders.contains(leader) && !r.task.is_finished();
        if !keep {
            let _ = r.stop.send(true);
        }
        keep
    });
    for leader in leaders {
        running.entry(leader).or_insert_with(|| {
            let (stop, stopped) = watch::channel(false);
            let fetcher = Fetcher::new(leader, manager.clone(), endpoints.endpoint(leader));
            Running { stop, task: tokio::spawn(fetcher.run(stopped)) }
        });
    }
}
