//! Accepting and serving HTTP/1.1 connections, with the two things `axum::serve` cannot do:
//! cutting one connection from inside a handler (dropped-connection faults), and outages,
//! during which the port is closed (connects are refused) and every open connection is cut.

use crate::clock::SimClock;
use crate::stats::SimCounters;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How long to keep trying to re-bind the port after an outage.
const REBIND_ATTEMPTS: u32 = 250;
const REBIND_PAUSE: Duration = Duration::from_millis(20);

/// The connection a request arrived on, available to handlers as an extension.
#[derive(Clone, Debug)]
pub(crate) struct Connection {
    cut: CancellationToken,
    outage_after_close: Arc<Mutex<Option<Duration>>>,
}

impl Connection {
    /// Closes the connection at once, without finishing the response in progress.
    pub fn sever(&self) {
        self.cut.cancel();
    }

    /// Starts an outage of `simulated` length once this connection has closed, so the
    /// response announcing it is delivered first (it carries `Connection: close`).
    pub fn outage_after_close(&self, simulated: Duration) {
        *self.outage_after_close.lock().expect("never poisoned") = Some(simulated);
    }
}

/// What the accept loop is asked to do to the server's connections.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Outage {
    /// Close the port and cut every connection for this simulated time (a dead process).
    Down(Duration),
    /// Cut every open connection but keep listening (the engine behind a proxy restarted).
    CutConnections,
}

/// Asks the accept loop for outages.
#[derive(Clone, Debug)]
pub(crate) struct Outages(mpsc::UnboundedSender<Outage>);

impl Outages {
    pub fn start(&self, simulated: Duration) {
        // Closed only when the server has stopped, when there is nothing left to take down.
        let _ = self.0.send(Outage::Down(simulated));
    }

    pub fn cut_connections(&self) {
        let _ = self.0.send(Outage::CutConnections);
    }
}

pub(crate) struct Server {
    pub app: Router,
    pub clock: SimClock,
    pub counters: Arc<SimCounters>,
    pub shutdown: CancellationToken,
}

pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    // Re-binding after an outage must not wait for the old connections' TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

pub(crate) fn outage_channel() -> (Outages, mpsc::UnboundedReceiver<Outage>) {
    let (sender, receiver) = mpsc::unbounded_channel();
    (Outages(sender), receiver)
}

impl Server {
    /// Serves until shutdown. `outages` is the receiving end of the channel that the
    /// handlers' `Outages` feeds.
    pub async fn run(
        self,
        mut listener: TcpListener,
        outages: Outages,
        mut requests: mpsc::UnboundedReceiver<Outage>,
    ) {
        let addr = listener.local_addr().expect("a bound listener has an address");
        let mut open_connections = CancellationToken::new();
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => break,
                Some(outage) = requests.recv() => {
                    open_connections.cancel();
                    open_connections = CancellationToken::new();
                    let Outage::Down(simulated) = outage else { continue };
                    drop(listener);
                    SimCounters::bump(&self.counters.outages);
                    tracing::info!(?simulated, "simulated outage: port closed");
                    tokio::select! {
                        () = self.clock.sleep(simulated) => {}
                        () = self.shutdown.cancelled() => break,
                    }
                    listener = match rebind(addr).await {
                        Ok(listener) => listener,
                        Err(error) => {
                            tracing::error!(%addr, %error, "cannot re-bind after the outage; stopping");
                            break;
                        }
                    };
                    tracing::info!(%addr, "outage over: listening again");
                }
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => self.serve_connection(stream, open_connections.child_token(), outages.clone()),
                    Err(error) => {
                        // Usually out of file descriptors: back off instead of spinning.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(REBIND_PAUSE).await;
                    }
                },
            }
        }
        open_connections.cancel();
    }

    fn serve_connection(&self, stream: TcpStream, cut: CancellationToken, outages: Outages) {
        // SSE chunks are small and latency-sensitive; Nagle would batch them.
        let _ = stream.set_nodelay(true);
        let connection = Connection { cut: cut.clone(), outage_after_close: Arc::default() };
        let app = self.app.clone();
        let for_requests = connection.clone();
        let service = service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(for_requests.clone());
            app.clone().oneshot(request)
        });
        tokio::spawn(async move {
            let serving = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                // Errors here are clients going away mid-response: routine for this server.
                _ = serving => {}
                // Dropping the connection future closes the socket mid-response.
                () = cut.cancelled() => {}
            }
            let outage = connection.outage_after_close.lock().expect("never poisoned").take();
            if let Some(simulated) = outage {
                outages.start(simulated);
            }
        });
    }
}

async fn rebind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let mut attempt = 1;
    loop {
        match bind(addr) {
            Ok(listener) => return Ok(listener),
            Err(_) if attempt < REBIND_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(REBIND_PAUSE).await;
            }
            Err(error) => return Err(error),
        }
    }
}
