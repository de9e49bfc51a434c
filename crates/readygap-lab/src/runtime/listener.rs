//! The runtime's TCP listener: every connection it accepted fails once the container is gone
//! (reset, not closed, when the container was OOM-killed), like the sockets of a process that
//! died. The HTTP API and the request log both see connections through it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// A TCP listener whose connections all fail once the container is gone.
pub(crate) struct KillableListener {
    inner: TcpListener,
    shutdown: CancellationToken,
    killed: Arc<AtomicBool>,
}

impl KillableListener {
    pub(crate) fn new(
        inner: TcpListener,
        shutdown: CancellationToken,
        killed: Arc<AtomicBool>,
    ) -> Self {
        Self {
            inner,
            shutdown,
            killed,
        }
    }
}

impl axum::serve::Listener for KillableListener {
    type Io = KillableStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    let _ = stream.set_nodelay(true);
                    return (
                        KillableStream {
                            inner: stream,
                            dead: Box::pin(self.shutdown.clone().cancelled_owned()),
                            killed: self.killed.clone(),
                            reset: false,
                        },
                        addr,
                    );
                }
                // Too many open files and the like: back off a little, as axum does.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection that errors as soon as the container dies.
pub(crate) struct KillableStream {
    inner: TcpStream,
    dead: Pin<Box<WaitForCancellationFutureOwned>>,
    killed: Arc<AtomicBool>,
    reset: bool,
}

impl KillableStream {
    fn check(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if self.dead.as_mut().poll(cx).is_ready() {
            if !self.reset && self.killed.load(Ordering::SeqCst) {
                // A killed process's sockets are reset, not closed: linger 0 sends RST.
                #[allow(deprecated)]
                let _ = self.inner.set_linger(Some(Duration::ZERO));
                self.reset = true;
            }
            return Some(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "lab container stopped",
            ));
        }
        None
    }
}

impl AsyncRead for KillableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(e) = self.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(e) = self.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
