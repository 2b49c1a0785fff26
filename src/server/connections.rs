//! Every open client connection, so that no client can lock others out: per-IP limits
//! (Kafka's `max.connections.per.ip`), and at `max_connections` the least recently active
//! connection that is not in the middle of a request is closed to make room for the new
//! one (idle connections first, then those stalled on a partial frame), as Kafka's
//! listeners close idle connections. A connection that is serving a request is never
//! closed this way.
//!
//! The hot path touches only the connection's own atomics; the table's lock is taken when
//! a connection opens or closes.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

/// What a connection is doing, as the eviction policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Activity {
    /// Between requests: nothing buffered.
    Idle = 0,
    /// Part of a request frame has arrived.
    Partial = 1,
    /// A request is being handled or its response written.
    Serving = 2,
}

/// One connection's state, shared between its task and the table.
pub struct ConnState {
    pub peer: SocketAddr,
    activity: AtomicU8,
    /// Nanoseconds since `epoch` at the last change of activity (orders connections that
    /// were active within the same millisecond).
    last_active: AtomicI64,
    epoch: Instant,
    close: Notify,
}

impl ConnState {
    /// A request starts: `activity` from now on, and this connection counts as active now.
    pub fn begin(&self, activity: Activity) {
        let stamp = i64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(i64::MAX);
        self.set_at(activity, stamp);
    }

    /// `activity` from now on, keeping when the connection was last active.
    pub fn settle(&self, activity: Activity) {
        self.activity.store(activity as u8, Ordering::Relaxed);
    }

    fn set_at(&self, activity: Activity, stamp: i64) {
        self.activity.store(activity as u8, Ordering::Relaxed);
        self.last_active.store(stamp, Ordering::Relaxed);
    }

    fn activity(&self) -> Activity {
        match self.activity.load(Ordering::Relaxed) {
            0 => Activity::Idle,
            1 => Activity::Partial,
            _ => Activity::Serving,
        }
    }

    /// Resolves when the table asks this connection to close.
    pub async fn closed(&self) {
        self.close.notified().await
    }
}

/// Why a new connection was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{count} connections from {ip} already (max_connections_per_ip)")]
    PerIp { ip: IpAddr, count: usize },
    #[error("{0} connections open and every one is serving a request (max_connections)")]
    Full(usize),
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    conns: HashMap<u64, Arc<ConnState>>,
    per_ip: HashMap<IpAddr, usize>,
}

pub struct ConnectionTable {
    epoch: Instant,
    max: usize,
    max_per_ip: usize,
    inner: Mutex<Inner>,
}

/// A registered connection; dropping it frees its slot.
pub struct Registration {
    table: Arc<ConnectionTable>,
    id: u64,
    pub state: Arc<ConnState>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.table.lock().forget(self.id);
    }
}

impl Inner {
    /// Removes a connection and its count (a no-op if it was evicted already).
    fn forget(&mut self, id: u64) -> Option<Arc<ConnState>> {
        let state = self.conns.remove(&id)?;
        let ip = state.peer.ip();
        if let Some(n) = self.per_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_ip.remove(&ip);
            }
        }
        Some(state)
    }
}

impl ConnectionTable {
    pub fn new(max: usize, max_per_ip: usize) -> Arc<ConnectionTable> {
        Arc::new(ConnectionTable {
            epoch: Instant::now(),
            max: max.max(1),
            max_per_ip: max_per_ip.max(1),
            inner: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn open_count(&self) -> usize {
        self.lock().conns.len()
    }

    /// Registers a new connection from `peer`, closing the least recently active idle or
    /// stalled connection if the table is full. Returns the evicted peer, if any.
    pub fn admit(self: &Arc<Self>, peer: SocketAddr) -> Result<(Registration, Option<SocketAddr>), Refused> {
        let mut inner = self.lock();
        let ip = peer.ip();
        let from_ip = inner.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.max_per_ip {
            return Err(Refused::PerIp { ip, count: from_ip });
        }
        let mut evicted = None;
        if inner.conns.len() >= self.max {
            // Idle before stalled, then least recently active.
            let victim = inner
                .conns
                .iter()
                .filter(|(_, c)| c.activity() != Activity::Serving)
                .min_by_key(|(_, c)| (c.activity() as u8, c.last_active.load(Ordering::Relaxed)))
                .map(|(id, _)| *id);
            let Some(victim) = victim.and_then(|id| inner.forget(id)) else {
                return Err(Refused::Full(inner.conns.len()));
            };
            // The victim's slot is freed now; its task closes the socket on the notice.
            victim.close.notify_one();
            evicted = Some(victim.peer);
        }
        let id = inner.next_id;
        inner.next_id += 1;
        let state = Arc::new(ConnState {
            peer,
            activity: AtomicU8::new(Activity::Idle as u8),
            last_active: AtomicI64::new(0),
            epoch: self.epoch,
            close: Notify::new(),
        });
        state.begin(Activity::Idle);
        inner.conns.insert(id, state.clone());
        *inner.per_ip.entry(ip).or_insert(0) += 1;
        Ok((Registration { table: self.clone(), id, state }, evicted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(ip: u8, port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, ip], port))
    }

    #[test]
    fn per_ip_limit_and_release() {
        let t = ConnectionTable::new(100, 2);
        let a = t.admit(peer(1, 1)).unwrap().0;
        let _b = t.admit(peer(1, 2)).unwrap().0;
        assert_eq!(t.admit(peer(1, 3)).err(), Some(Refused::PerIp { ip: peer(1, 0).ip(), count: 2 }));
        assert!(t.admit(peer(2, 1)).is_ok(), "other addresses are not affected");
        drop(a);
        assert!(t.admit(peer(1, 3)).is_ok(), "a closed connection frees its slot");
    }

    #[tokio::test]
    async fn a_full_table_closes_the_least_recently_active_idle_connection() {
        let t = ConnectionTable::new(3, 10);
        let (old_idle, _) = t.admit(peer(1, 1)).unwrap();
        let (stalled, _) = t.admit(peer(1, 2)).unwrap();
        let (serving, _) = t.admit(peer(1, 3)).unwrap();
        stalled.state.set_at(Activity::Partial, 1);
        serving.state.set_at(Activity::Serving, 1);
        old_idle.state.set_at(Activity::Idle, 5);
        // Idle goes first, even though the stalled one is older.
        let (new, evicted) = t.admit(peer(2, 1)).unwrap();
        assert_eq!(evicted, Some(peer(1, 1)));
        old_idle.state.closed().await; // the notice is waiting for it
        assert_eq!(t.open_count(), 3);
        drop(old_idle); // its task ends: nothing double-counted
        assert_eq!(t.open_count(), 3);
        // With no idle one left, the stalled one; those serving a request are never taken.
        new.state.set_at(Activity::Serving, 10);
        let (newer, evicted) = t.admit(peer(2, 2)).unwrap();
        assert_eq!(evicted, Some(peer(1, 2)));
        let (_newest, evicted) = t.admit(peer(2, 3)).unwrap();
        assert_eq!(evicted, Some(newer.state.peer));
        assert_eq!(t.open_count(), 3);
    }

    #[test]
    fn a_table_of_busy_connections_refuses() {
        let t = ConnectionTable::new(1, 10);
        let (busy, _) = t.admit(peer(1, 1)).unwrap();
        busy.state.set_at(Activity::Serving, 0);
        assert_eq!(t.admit(peer(1, 2)).err(), Some(Refused::Full(1)));
    }
}
