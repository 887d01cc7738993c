//! The HTTP listener: every accepted connection gets `TCP_NODELAY`.
//!
//! A page is rendered as a stream (its shell first, then each `Suspense` as its data arrives),
//! so a response leaves in several small writes. With Nagle's algorithm on, the kernel holds a
//! small write back until the previous one is acknowledged, and a client delays that
//! acknowledgement by up to 40 ms when it has nothing to send: every page that streamed took
//! at least 40 ms more than its work (the scale benchmark's `/`, `/runs`, `/datasets/{id}` and
//! `/exports`: 48 ms at p50 each). `axum::serve` leaves the option as the system has it.

use axum::serve::{ListenerExt, TapIo};
use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpStream};

/// Listens on `addr`, with `TCP_NODELAY` on each connection it accepts.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TapIo<TcpListener, fn(&mut TcpStream)>> {
    let listener = TcpListener::bind(addr).await?;
    Ok(listener.tap_io(no_delay as fn(&mut TcpStream)))
}

fn no_delay(stream: &mut TcpStream) {
    // A connection without it is slower, not wrong: serve it anyway.
    if let Err(error) = stream.set_nodelay(true) {
        tracing::warn!(%error, "cannot set TCP_NODELAY on a connection; its pages may arrive up to 40 ms late");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::serve::Listener;

    #[tokio::test]
    async fn accepted_connections_send_small_writes_at_once() {
        let mut listener = bind("127.0.0.1:0".parse().expect("an address")).await.expect("a port");
        let addr = listener.local_addr().expect("its address");
        let client = TcpStream::connect(addr);
        let ((stream, _), _client) = tokio::join!(listener.accept(), client);
        assert!(stream.nodelay().expect("the option can be read"), "TCP_NODELAY is off");
    }
}
