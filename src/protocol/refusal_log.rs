//! Log lines for refused client input that a hostile or broken client cannot turn into a
//! flood: the first refusal from a client (peer IP and client id) is logged at warn, later
//! ones at most once per [`WARN_INTERVAL_MS`] with how many were refused meanwhile; the
//! rest go to debug.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// At most one warn line per client per minute.
pub const WARN_INTERVAL_MS: i64 = 60_000;
/// Clients remembered; past this the table starts over (bounded memory).
const MAX_CLIENTS: usize = 10_000;

#[derive(Default)]
struct Seen {
    last_warn_ms: i64,
    suppressed: u64,
}

#[derive(Default)]
pub struct RefusalLog {
    clients: Mutex<HashMap<(Option<IpAddr>, String), Seen>>,
}

impl RefusalLog {
    /// Decides whether this refusal is logged at warn: `Some(n)` with the number of
    /// refusals from the client not warned about since its last warn line, or `None`.
    pub fn should_warn(&self, peer: Option<IpAddr>, client_id: &str, now_ms: i64) -> Option<u64> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if clients.len() >= MAX_CLIENTS && !clients.contains_key(&(peer, client_id.to_owned())) {
            clients.clear();
        }
        let seen =
            clients.entry((peer, client_id.to_owned())).or_insert(Seen { last_warn_ms: i64::MIN, suppressed: 0 });
        if now_ms.saturating_sub(seen.last_warn_ms) >= WARN_INTERVAL_MS {
            seen.last_warn_ms = now_ms;
            Some(std::mem::take(&mut seen.suppressed))
        } else {
            seen.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_once_per_client_per_interval() {
        let log = RefusalLog::default();
        let ip = Some(IpAddr::from([127, 0, 0, 1]));
        assert_eq!(log.should_warn(ip, "a", 0), Some(0));
        assert_eq!(log.should_warn(ip, "a", 1), None);
        assert_eq!(log.should_warn(ip, "a", 2), None);
        // Another client is warned about on its own.
        assert_eq!(log.should_warn(ip, "b", 3), Some(0));
        assert_eq!(log.should_warn(Some(IpAddr::from([127, 0, 0, 2])), "a", 3), Some(0));
        assert_eq!(log.should_warn(ip, "a", WARN_INTERVAL_MS - 1), None);
        assert_eq!(log.should_warn(ip, "a", WARN_INTERVAL_MS), Some(3));
    }
}
