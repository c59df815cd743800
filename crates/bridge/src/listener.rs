//! Connections of the HTTP bridge: HTTP/1.1 (what MCP clients speak),
//! plain or TLS, each bounded so that no client can hold the bridge:
//!
//! - at most `--max-connections` open (more wait in the listen backlog);
//! - the TLS handshake, a request's headers, and the wait for the next
//!   request on a kept-alive connection each within `--header-read-timeout`
//!   (hyper's header timer starts when it waits for a request, so a
//!   slowloris client dribbling headers and a silent one are both closed);
//! - headers within `--max-header-bytes` (431 otherwise);
//! - every read and write makes progress within `--idle-timeout` (a client
//!   that stops reading its answer is dropped, its buffers freed).
//!
//! hyper's own connection builder (hyper-util's tokio glue) serves here
//! instead of `axum::serve`, which has none of these knobs; tokio-rustls
//! (rustls with the `ring` provider, as kube uses) adds TLS on the same path.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_io_timeout::TimeoutStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::limits::Limits;

/// Pause after a failed `accept` (out of file descriptors, say) before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` (TLS when `tls` is given) until `shutdown`
/// is cancelled, then lets open connections finish their requests.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    tls: Option<TlsAcceptor>,
    limits: &Limits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes);
    let connection = Connection {
        http,
        app,
        tls,
        handshake_timeout: limits.header_read_timeout,
        idle_timeout: limits.idle_timeout,
        shutdown: shutdown.clone(),
    };
    let open = TaskTracker::new();
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.map_err(std::io::Error::other)?,
            () = shutdown.cancelled() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        open.spawn(connection.clone().serve(stream, slot));
    }
    open.close();
    open.wait().await;
    Ok(())
}

/// What every connection is served with.
#[derive(Clone)]
struct Connection {
    http: hyper::server::conn::http1::Builder,
    app: axum::Router,
    tls: Option<TlsAcceptor>,
    handshake_timeout: Duration,
    idle_timeout: Duration,
    shutdown: CancellationToken,
}

impl Connection {
    /// Serves one connection; `_slot` is its place among the open ones.
    async fn serve(self, stream: TcpStream, _slot: OwnedSemaphorePermit) {
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(error = %err, "cannot set TCP_NODELAY");
        }
        let mut stream = TimeoutStream::new(stream);
        stream.set_read_timeout(Some(self.idle_timeout));
        stream.set_write_timeout(Some(self.idle_timeout));
        let stream = Box::pin(stream);
        let Some(acceptor) = &self.tls else {
            return self.http1(stream).await;
        };
        match tokio::time::timeout(self.handshake_timeout, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => self.http1(tls).await,
            Ok(Err(err)) => tracing::debug!(error = %err, "TLS handshake failed"),
            Err(_) => tracing::debug!("TLS handshake timed out"),
        }
    }

    async fn http1<S>(&self, io: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let service = TowerToHyperService::new(self.app.clone());
        let connection = self.http.serve_connection(TokioIo::new(io), service);
        let mut connection = std::pin::pin!(connection);
        let ended = tokio::select! {
            ended = connection.as_mut() => ended,
            () = self.shutdown.cancelled() => {
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        };
        if let Err(err) = ended {
            tracing::debug!(error = %err, "connection closed with an error");
        }
    }
}
