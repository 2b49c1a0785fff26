//! A limit on repeated log lines of the Raft library (openraft), for the default log
//! filter.
//!
//! openraft logs a WARN or an ERROR for every heartbeat, replication attempt and vote
//! request that fails, and for every leadership check that times out: while a voter is
//! unreachable that is tens of lines a second on the quorum leader (1,609 of a node's
//! 1,622 lines in a 45 s test where the quorum was lost for 25 s). runnel's own lines
//! about the same fault (fencing, ISR changes, timeouts) drowned in them. So each
//! openraft call site prints at most [`LINES_PER_WINDOW`] lines per [`WINDOW`]; a line
//! every window says how many were held back. `RUNNEL_LOG` set to anything turns the
//! limit off: an operator who chose a filter sees every line it lets through.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::callsite::Identifier;
use tracing::subscriber::Interest;
use tracing::{Event, Metadata};
use tracing_subscriber::layer::{Context, Filter};

/// How long a call site's count lasts.
pub const WINDOW: Duration = Duration::from_secs(30);
/// Lines each openraft call site prints per window: enough to show what is failing and
/// towards which nodes (a leader logs one line per unreachable voter).
pub const LINES_PER_WINDOW: u32 = 4;

/// The limited targets: the Raft library's.
fn limited(meta: &Metadata<'_>) -> bool {
    meta.target().starts_with("openraft")
}

/// Per call site, the lines printed in its current window; and the lines held back
/// since [`LogLimit::take_held_back`] last ran.
#[derive(Default)]
pub struct LogLimit {
    windows: Mutex<HashMap<Identifier, (Instant, u32)>>,
    held_back: AtomicU64,
}

impl LogLimit {
    /// Whether a line of `callsite` logged at `now` is printed.
    pub fn admit(&self, callsite: Identifier, now: Instant) -> bool {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let (start, printed) = windows.entry(callsite).or_insert((now, 0));
        if now.saturating_duration_since(*start) >= WINDOW {
            (*start, *printed) = (now, 0);
        }
        if *printed < LINES_PER_WINDOW {
            *printed += 1;
            return true;
        }
        drop(windows);
        self.held_back.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// The lines held back since the last call.
    pub fn take_held_back(&self) -> u64 {
        self.held_back.swap(0, Ordering::Relaxed)
    }

    /// Says how many lines were held back in each window that held some back, until the
    /// process exits. Runs on a thread of its own: it must not depend on the runtime
    /// whose troubles it reports.
    pub fn report_every_window(limit: &'static LogLimit) {
        let spawned = std::thread::Builder::new().name("log-limit".into()).spawn(move || loop {
            std::thread::sleep(WINDOW);
            let held_back = limit.take_held_back();
            if held_back > 0 {
                tracing::warn!(
                    held_back,
                    "repeated openraft log lines held back in the last {} s (set RUNNEL_LOG to see every line)",
                    WINDOW.as_secs()
                );
            }
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the thread that reports held-back log lines");
        }
    }
}

impl<S> Filter<S> for &'static LogLimit {
    fn enabled(&self, _: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if limited(meta) {
            Interest::sometimes()
        } else {
            Interest::always()
        }
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        let meta = event.metadata();
        !limited(meta) || self.admit(meta.callsite(), Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Site(#[allow(dead_code)] u8);
    impl tracing::callsite::Callsite for Site {
        fn set_interest(&self, _: Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            unreachable!("not registered")
        }
    }
    // Not zero-sized: two statics, two addresses, two identifiers.
    static A: Site = Site(0);
    static B: Site = Site(1);

    #[test]
    fn each_call_site_prints_its_lines_per_window_and_counts_the_rest() {
        let limit = LogLimit::default();
        let (a, b) = (Identifier(&A), Identifier(&B));
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let printed_a = (0..10).filter(|&i| limit.admit(a.clone(), at(i * 100))).count();
        assert_eq!(printed_a, LINES_PER_WINDOW as usize);
        assert!(limit.admit(b.clone(), at(1_000)), "another call site has a window of its own");
        assert_eq!(limit.take_held_back(), 10 - LINES_PER_WINDOW as u64);
        assert_eq!(limit.take_held_back(), 0, "taken");
        assert!(!limit.admit(a.clone(), t0 + WINDOW - Duration::from_millis(1)), "still the first window");
        assert!(limit.admit(a.clone(), t0 + WINDOW), "a new window");
        let next = (0..10).filter(|_| limit.admit(a.clone(), t0 + WINDOW)).count();
        assert_eq!(next, LINES_PER_WINDOW as usize - 1);
    }
}
