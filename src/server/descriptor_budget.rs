//! How the process's file descriptors are shared, so that clients can never take the
//! ones the logs need: the file cache's bound (segment files), a headroom for what opens
//! files beside it (index files on append, checkpoints, the metadata log, the controller's
//! connections, listeners), the HTTP listener's connections, and what is left for Kafka
//! connections. `max_connections` above that is clamped, with a log line: at
//! `ulimit -n 256` the default 1,024 let idle sockets take every descriptor, and new
//! clients were locked out with "accept failed … Too many open files" every 100 ms.

/// Descriptors kept for files opened beside the file cache and for the broker's own
/// sockets.
pub const HEADROOM: usize = 64;

/// The most HTTP connections served at once (health checks, scrapes, the console and the
/// HTTP API); an eighth of the descriptor limit when that is lower.
pub const HTTP_MAX_CONNECTIONS: usize = 512;

/// The fewest connections of either kind, however low the limit (a broker with fewer
/// descriptors than this does not serve anyway).
const MIN_CONNECTIONS: usize = 8;

/// Connection bounds for a process with `soft_limit` descriptors and a file cache of
/// `file_cache` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorBudget {
    /// The Kafka listeners' bound: `max_connections`, or less when the limit is lower.
    pub kafka_connections: usize,
    /// The HTTP listener's bound.
    pub http_connections: usize,
}

impl DescriptorBudget {
    pub fn plan(soft_limit: u64, file_cache: usize, max_connections: usize) -> DescriptorBudget {
        let soft = usize::try_from(soft_limit).unwrap_or(usize::MAX);
        let http_connections = HTTP_MAX_CONNECTIONS.min(soft / 8).max(MIN_CONNECTIONS);
        let left = soft.saturating_sub(file_cache).saturating_sub(http_connections).saturating_sub(HEADROOM);
        let kafka_connections = max_connections.min(left.max(MIN_CONNECTIONS));
        DescriptorBudget { kafka_connections, http_connections }
    }

    /// The budget of this process now, logging when `max_connections` had to be lowered.
    pub fn of_process(file_cache: usize, max_connections: usize) -> DescriptorBudget {
        let soft = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft);
        let budget = DescriptorBudget::plan(soft, file_cache, max_connections);
        if budget.kafka_connections < max_connections {
            tracing::warn!(
                max_connections,
                clamped_to = budget.kafka_connections,
                descriptor_limit = soft,
                file_cache,
                http_connections = budget.http_connections,
                "max_connections is above what the open-file limit leaves for connections; clamped (raise `ulimit -n` to serve more)"
            );
        }
        budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_leave_the_file_cache_and_headroom_their_descriptors() {
        // The adversarial pass's nofile=256: the cache takes half, HTTP an eighth.
        let b = DescriptorBudget::plan(256, 128, 1024);
        assert_eq!(b, DescriptorBudget { kafka_connections: 256 - 128 - 32 - HEADROOM, http_connections: 32 });
        // A usual limit changes nothing.
        let b = DescriptorBudget::plan(1 << 20, 1 << 19, 1024);
        assert_eq!(b, DescriptorBudget { kafka_connections: 1024, http_connections: HTTP_MAX_CONNECTIONS });
        // Nothing left: still a few.
        let b = DescriptorBudget::plan(64, 64, 1024);
        assert_eq!(b, DescriptorBudget { kafka_connections: MIN_CONNECTIONS, http_connections: MIN_CONNECTIONS });
        // A configured bound below that is kept.
        assert_eq!(DescriptorBudget::plan(64, 64, 2).kafka_connections, 2);
    }
}
