//! A bounded pool for CPU-heavy work that must not run on the async workers:
//! decompressing produced batches to validate them, and timestamp lookups that may
//! decompress stored batches. At most `size` jobs run at once, on tokio's blocking
//! threads; the others wait their turn asynchronously. So a client that sends heavy
//! batches occupies pool slots, never the workers that serve other clients' requests.

use std::sync::Arc;

use thiserror::Error;
use tokio::sync::Semaphore;

#[derive(Debug, Error)]
pub enum PoolError {
    #[error("a blocking-pool job failed: {0}")]
    JobFailed(String),
}

pub struct BlockingPool {
    permits: Arc<Semaphore>,
}

impl BlockingPool {
    /// A pool running at most `size` jobs at once (at least one).
    pub fn new(size: usize) -> BlockingPool {
        BlockingPool { permits: Arc::new(Semaphore::new(size.max(1))) }
    }

    /// One slot per core: the jobs are CPU-bound.
    pub fn per_core() -> BlockingPool {
        BlockingPool::new(std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    /// Runs `job` on a blocking thread once a slot is free. A panic inside the job is
    /// contained and reported as an error.
    pub async fn run<T, F>(&self, job: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let permit =
            self.permits.clone().acquire_owned().await.map_err(|_| PoolError::JobFailed("pool closed".into()))?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            job()
        })
        .await
        .map_err(|e| PoolError::JobFailed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// On a single-threaded runtime, a job that blocks until the async side answers
    /// would deadlock if it ran on the worker; on the pool it does not.
    #[tokio::test(flavor = "current_thread")]
    async fn jobs_leave_the_async_worker_free() {
        let pool = BlockingPool::new(1);
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let job = pool.run(move || rx.recv().unwrap() + 1);
        let answer = async {
            tokio::task::yield_now().await;
            tx.send(41).unwrap();
        };
        let (got, ()) = tokio::join!(job, answer);
        assert_eq!(got.unwrap(), 42);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn at_most_size_jobs_run_at_once() {
        let pool = Arc::new(BlockingPool::new(2));
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<_> = (0..8)
            .map(|_| {
                let (pool, running, peak) = (pool.clone(), running.clone(), peak.clone());
                tokio::spawn(async move {
                    pool.run(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await
                    .unwrap()
                })
            })
            .collect();
        for j in jobs {
            j.await.unwrap();
        }
        assert!(peak.load(Ordering::SeqCst) <= 2, "peak {}", peak.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_panicking_job_is_an_error() {
        let pool = BlockingPool::new(1);
        assert!(pool.run(|| panic!("boom")).await.is_err());
        assert_eq!(pool.run(|| 7).await.unwrap(), 7, "the slot is returned");
    }
}
