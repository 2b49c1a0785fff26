//! One client connection: size-prefixed frames in, responses out, in request order.
//!
//! Framing: `check` that a whole frame is buffered, then take it; a partial frame stays in
//! the buffer (`Ok(None)`). The buffer grows only as bytes actually arrive, so a size
//! prefix read from the wire never decides an allocation by itself.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::protocol::{handle_frame, peek_correlation_id, Ctx};

/// Read at most this much per syscall; also the growth step of the buffer.
const READ_CHUNK: usize = 64 * 1024;

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

pub async fn serve(
    ctx: Arc<Ctx>,
    mut stream: TcpStream,
    peer: SocketAddr,
    mut shutdown: tokio::sync::broadcast::Receiver<()>,
) {
    let _ = stream.set_nodelay(true);
    let max = ctx.config.socket_request_max_bytes;
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    loop {
        // Drain every whole frame already buffered, answering each in order.
        loop {
            match parse_frame(&mut buf, max) {
                Ok(Some(frame)) => {
                    let correlation = peek_correlation_id(&frame);
                    match handle_frame(&ctx, Some(peer), frame).await {
                        Ok(Some(resp)) => {
                            if let Err(e) = write_chunks(&mut stream, resp).await {
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
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection");
                    return;
                }
            }
        }
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        tokio::select! {
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
            _ = shutdown.recv() => return,
        }
    }
}

/// Write a response made of several chunks with vectored writes.
async fn write_chunks(stream: &mut TcpStream, chunks: Vec<Bytes>) -> std::io::Result<()> {
    if let [one] = chunks.as_slice() {
        return stream.write_all(one).await;
    }
    let mut chunks: std::collections::VecDeque<Bytes> = chunks.into();
    while !chunks.is_empty() {
        let slices: Vec<std::io::IoSlice<'_>> = chunks.iter().take(64).map(|c| std::io::IoSlice::new(c)).collect();
        let mut written = stream.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let Some(front) = chunks.front_mut() else { break };
            if written >= front.len() {
                written -= front.len();
                chunks.pop_front();
            } else {
                front.advance(written);
                written = 0;
            }
        }
    }
    Ok(())
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
