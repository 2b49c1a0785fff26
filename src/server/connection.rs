//! One client connection: size-prefixed frames in, responses out, in request order.
//!
//! Framing: `check` that a whole frame is buffered, then take it; a partial frame stays in
//! the buffer (`Ok(None)`). The buffer grows only as bytes actually arrive, so a size
//! prefix read from the wire never decides an allocation by itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::connections::{Activity, Registration};
use super::response_writer::write_response;
use crate::protocol::{handle_frame, peek_correlation_id, Ctx, Listener};

/// The smallest growth step of a buffer holding part of a request.
const READ_CHUNK: usize = 64 * 1024;
/// What an idle connection's buffer holds: enough for most requests, and thousands of
/// idle connections stay cheap.
const IDLE_BUFFER: usize = 4 * 1024;

#[derive(Debug, Error)]
pub enum FrameError {
    #[error("frame size {size} is negative or exceeds socket_request_max_bytes ({max})")]
    BadSize { size: i64, max: usize },
}

/// Return the next whole frame (without its size prefix), `Ok(None)` if more bytes are
/// needed, or an error if the size prefix is invalid.
pub fn parse_frame(buf: &mut BytesMut, max: usize) -> Result<Option<Bytes>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if size < 0 || size as usize > max {
        return Err(FrameError::BadSize { size: i64::from(size), max });
    }
    let size = size as usize;
    if buf.len() < 4 + size {
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(size).freeze()))
}

/// What bounds one connection: its idle and partial-request timeouts, and the budget of
/// bytes that partially received requests may hold across all connections.
#[derive(Clone)]
pub struct ConnectionLimits {
    pub idle: Duration,
    pub read_timeout: Duration,
    /// `None` = unbounded (queued_max_request_bytes = -1).
    pub budget: Option<Arc<Semaphore>>,
}

/// A buffer that grew past this for a big request is replaced once empty, so the memory
/// goes back when the request is done.
const SHRINK_ABOVE: usize = READ_CHUNK;

pub async fn serve(
    ctx: Arc<Ctx>,
    mut stream: TcpStream,
    listener: Listener,
    reg: Registration,
    limits: ConnectionLimits,
    mut shutdown: tokio::sync::broadcast::Receiver<()>,
) {
    let _ = stream.set_nodelay(true);
    let state = &reg.state;
    let peer = state.peer;
    let max = ctx.config.socket_request_max_bytes;
    let mut buf = BytesMut::with_capacity(IDLE_BUFFER);
    let mut last_active = Instant::now();
    // When the first byte of the frame now partly buffered arrived (or its budget was
    // granted).
    let mut frame_started: Option<Instant> = None;
    // Budget held for the frame being received.
    let mut held: Option<OwnedSemaphorePermit> = None;
    // KIP-511: the client software its ApiVersions named (KIP-714 `match` patterns).
    let mut client_software = None;
    loop {
        // Drain every whole frame already buffered, answering each in order.
        loop {
            match parse_frame(&mut buf, max) {
                Ok(Some(frame)) => {
                    state.begin(Activity::Serving);
                    let correlation = peek_correlation_id(&frame);
                    let result = handle_frame(&ctx, Some(peer), listener, &mut client_software, frame).await;
                    held = None;
                    frame_started = None;
                    // Evictable again before the client can see the answer (an eviction
                    // notice is only acted on after the response is written), so that
                    // "least recently active" follows the order in which requests came.
                    state.settle(Activity::Idle);
                    match result {
                        Ok(Some(resp)) => {
                            if let Err(e) = write_response(&mut stream, resp).await {
                                tracing::debug!(%peer, error = %e, "write failed; closing connection");
                                return;
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(%peer, ?correlation, error = %e, "closing connection after a bad request");
                            return;
                        }
                    }
                    last_active = Instant::now();
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection");
                    return;
                }
            }
        }
        if buf.is_empty() {
            state.settle(Activity::Idle);
            if buf.capacity() > SHRINK_ABOVE {
                buf = BytesMut::with_capacity(IDLE_BUFFER);
            }
        } else {
            state.settle(Activity::Partial);
            frame_started.get_or_insert_with(Instant::now);
            if let (Some(budget), None, Some(size)) = (&limits.budget, &held, declared_size(&buf)) {
                // Hold the whole frame's share of the budget before reading more of it;
                // while it is not free, this client waits (unread) and others go on.
                let need = u32::try_from(size + 4).unwrap_or(u32::MAX);
                tokio::select! {
                    p = budget.clone().acquire_many_owned(need) => match p {
                        Ok(p) => held = Some(p),
                        Err(_) => return,
                    },
                    _ = state.closed() => return, // evicted; the accept loop logs it

                    _ = shutdown.recv() => return,
                }
                frame_started = Some(Instant::now());
            }
        }
        if let Some(more) = growth(&buf) {
            // Not `reserve`, which may double the capacity past the frame.
            let mut bigger = BytesMut::with_capacity(buf.len() + more);
            bigger.extend_from_slice(&buf);
            buf = bigger;
        }
        let deadline = match frame_started {
            Some(t) => t + limits.read_timeout,
            None => last_active + limits.idle,
        };
        tokio::select! {
            // Shutdown first: a busy client must not keep its connection open by always
            // having more bytes ready.
            biased;
            _ = shutdown.recv() => return,
            r = stream.read_buf(&mut buf) => match r {
                Ok(0) => {
                    if !buf.is_empty() {
                        tracing::debug!(%peer, pending = buf.len(), "client closed mid-frame");
                    }
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "read failed; closing connection");
                    return;
                }
            },
            _ = tokio::time::sleep_until(deadline.into()) => {
                if frame_started.is_some() {
                    tracing::info!(%peer, pending = buf.len(), timeout_ms = limits.read_timeout.as_millis() as u64,
                        "closing connection: request not received whole in time (request_read_timeout_ms)");
                } else {
                    tracing::debug!(%peer, "closing idle connection (connections_max_idle_ms)");
                }
                return;
            }
            _ = state.closed() => return, // evicted; the accept loop logs it
        }
    }
}

/// How much room to add before the next read, if any: the buffer grows with the bytes
/// that actually arrived (at most doubling) and never past the frame being received, so
/// a large request ends in a buffer of its own size, not the next power of two.
fn growth(buf: &BytesMut) -> Option<usize> {
    let spare = buf.capacity() - buf.len();
    if buf.is_empty() || spare >= READ_CHUNK / 4 {
        return None;
    }
    let step = buf.len().max(READ_CHUNK);
    let rest_of_frame = declared_size(buf).map_or(step, |size| (size + 4).saturating_sub(buf.len()));
    Some(step.min(rest_of_frame)).filter(|n| *n > spare)
}

/// The size prefix of the buffered frame, once its 4 bytes are in.
fn declared_size(buf: &[u8]) -> Option<usize> {
    let size = i32::from_be_bytes(buf.get(..4)?.try_into().ok()?);
    usize::try_from(size).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_split_and_partial_frames_wait() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[0, 0, 0, 3, b'a', b'b']);
        assert_eq!(parse_frame(&mut buf, 100).unwrap(), None);
        buf.extend_from_slice(&[b'c', 0, 0, 0, 1]);
        assert_eq!(parse_frame(&mut buf, 100).unwrap().unwrap(), Bytes::from_static(b"abc"));
        assert_eq!(parse_frame(&mut buf, 100).unwrap(), None);
        assert_eq!(buf.len(), 4);
    }

    #[test]
    fn bad_sizes_are_refused() {
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xff][..]);
        assert!(parse_frame(&mut buf, 100).is_err());
        let mut buf = BytesMut::from(&[0, 0, 0, 101][..]);
        assert!(parse_frame(&mut buf, 100).is_err());
    }
}
