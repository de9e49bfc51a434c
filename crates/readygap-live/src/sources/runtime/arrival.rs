//! When an answer's bytes reached this host: the kernel's receive time of each segment
//! (`SO_TIMESTAMPNS`, socket(7)), read with recvmsg(2) by a TCP stream that keeps the last
//! one. A direct-access generate is sent over such a stream, so T4 is the moment the end
//! of the answer arrived, not the moment readygap's thread was next scheduled (on another
//! vCPU that is 0.1 ms here, on a busy node it is milliseconds; `docs/benchmarks.md`).
//!
//! The stamp is the receive time of the last segment read when the end was seen: the end's
//! own, or one the server sent right after it (the chunked body's terminator, microseconds
//! later) when the connection had already read it.
//!
//! The kernel stamps arriving packets only while some socket asks for it, and turning that
//! on when no socket did is deferred to a workqueue (net/core/dev.c `net_enable_timestamp`),
//! so segments that arrive before it ran carry no stamp: 21 of 200 and 179 of 500 fresh
//! loopback connections here got none (`scripts/kernel-stamp-race.py`), 0 of 500 with one
//! asking socket held. [`keep_stamping`] holds one for the process's life; a read without a
//! stamp leaves the answer to the read's own time.

use super::HttpResponse;
use chrono::{DateTime, Utc};
use hyper::body::Bytes;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// The kernel's receive time of the last bytes a [`StampedTcp`] read.
#[derive(Debug, Clone, Default)]
pub struct Arrival(Arc<AtomicI64>);

impl Arrival {
    /// The last receive time, if the kernel gave one.
    pub fn last(&self) -> Option<DateTime<Utc>> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            ns => Some(DateTime::from_timestamp_nanos(ns)),
        }
    }
}

/// A TCP stream whose reads keep the kernel's receive time of what they read.
pub struct StampedTcp {
    inner: TcpStream,
    last: Arrival,
}

/// Keep the kernel's receive stamps on from now until the process ends, so the first stamped
/// connection does not race the kernel turning them on. It costs the host one clock read
/// per received packet; nothing is sent.
pub fn keep_stamping() {
    static HOLD: OnceLock<Option<std::net::UdpSocket>> = OnceLock::new();
    HOLD.get_or_init(|| {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
        set_timestamping(s.as_raw_fd()).ok()?;
        Some(s)
    });
}

impl StampedTcp {
    /// Connect and ask the kernel to stamp what arrives.
    pub async fn connect(host: &str, port: u16) -> io::Result<(Self, Arrival)> {
        keep_stamping();
        let inner = TcpStream::connect((host, port)).await?;
        inner.set_nodelay(true)?;
        set_timestamping(inner.as_raw_fd())?;
        let last = Arrival::default();
        let stream = Self { inner, last };
        let arrival = stream.last.clone();
        Ok((stream, arrival))
    }
}

fn set_timestamping(fd: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: `fd` is an open socket owned by the caller's stream; the option value is a
    // c_int that lives across the call, and its size is passed with it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One recvmsg(2): the bytes read and the receive time (ns since the epoch) it carried.
fn recv_stamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<i64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one `SCM_TIMESTAMPNS` (a cmsghdr and a timespec), 8-byte aligned.
    let mut control = [0u64; 8];
    // SAFETY: an all-zero msghdr is valid (no name, no iov, no control) before it is filled.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `iov` (into `buf`, of its length) and `control` (of its
    // length); all three outlive the call. MSG_DONTWAIT: tokio's readiness decides waits.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, bounded by the
    // `msg_controllen` it set; a timestamp's data is a timespec, read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                stamp = Some(ts.tv_sec * 1_000_000_000 + ts.tv_nsec);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

impl AsyncRead for StampedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let fd = this.inner.as_raw_fd();
        loop {
            ready!(this.inner.poll_read_ready(cx))?;
            let room = buf.initialize_unfilled();
            match this
                .inner
                .try_io(Interest::READABLE, || recv_stamped(fd, room))
            {
                Ok((n, stamp)) => {
                    // A read without a stamp clears the last one: an earlier segment's
                    // time would be too early for these bytes.
                    if n > 0 {
                        this.last.0.store(stamp.unwrap_or(0), Ordering::Release);
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for StampedTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Send one HTTP/1.1 request on a new stamped connection to an `http://` URL; the
/// response's body stream carries the connection's [`Arrival`].
pub async fn send(
    url: &reqwest::Url,
    method: http::Method,
    body: Option<Vec<u8>>,
    connect_timeout: Duration,
) -> Result<HttpResponse, String> {
    let fail = |e: &dyn std::fmt::Display| format!("{url}: {e}");
    let Some(authority) = url.host_str() else {
        return Err(fail(&"no host"));
    };
    let host = authority.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(80);
    let (stream, arrival) = tokio::time::timeout(connect_timeout, StampedTcp::connect(host, port))
        .await
        .map_err(|_| fail(&format!("connect timed out after {connect_timeout:?}")))?
        .map_err(|e| fail(&e))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| fail(&e))?;
    // The connection lives until the body is read or dropped.
    tokio::spawn(conn);
    let authority = url
        .port()
        .map_or(authority.to_string(), |p| format!("{authority}:{p}"));
    let path = url
        .query()
        .map_or(url.path().to_string(), |q| format!("{}?{q}", url.path()));
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", authority);
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req
        .body(http_body_util::Full::new(Bytes::from(
            body.unwrap_or_default(),
        )))
        .map_err(|e| fail(&e))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| fail(&super::error_chain(&e)))?;
    Ok(HttpResponse::from_http(resp, Some(arrival)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use std::io::{Read, Write};

    /// Wait until the kernel stamps a fresh loopback connection's reads, as it does once
    /// [`keep_stamping`]'s socket has been seen; a kernel that never does fails here, named.
    async fn kernel_stamps() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        keep_stamping();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let (mut c, arrival) = StampedTcp::connect("127.0.0.1", port).await.unwrap();
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(b"x").await.unwrap();
            c.read_exact(&mut [0u8; 1]).await.unwrap();
            if arrival.last().is_some() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "this kernel gives TCP reads no SO_TIMESTAMPNS receive time"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The stamp is the kernel's receive time, not the read's: the bytes are read only
    /// after the server said its write returned, and the stamp falls before that read.
    #[tokio::test]
    async fn a_read_keeps_the_time_the_bytes_arrived_not_the_time_it_ran() {
        use tokio::io::AsyncReadExt;
        kernel_stamps().await;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (wrote_tx, wrote_rx) = std::sync::mpsc::channel();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let before = Utc::now();
            s.write_all(b"done\n").unwrap();
            wrote_tx.send(before).unwrap();
            s
        });
        let (mut stream, arrival) = StampedTcp::connect("127.0.0.1", port).await.unwrap();
        assert_eq!(arrival.last(), None, "nothing read yet");
        let before_write = tokio::task::spawn_blocking(move || wrote_rx.recv().unwrap())
            .await
            .unwrap();
        let reading = Utc::now();
        let mut b = [0u8; 5];
        stream.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"done\n");
        let stamp = arrival.last().expect("the kernel stamped");
        assert!(
            before_write <= stamp && stamp < reading,
            "write {before_write}, stamp {stamp}, read {reading}"
        );
        drop(server.join().unwrap());
    }

    /// A whole exchange: the request as sent, the body, and the stamp of its last bytes.
    #[tokio::test]
    async fn an_answer_carries_the_time_its_last_bytes_reached_the_host() {
        kernel_stamps().await;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url: reqwest::Url = format!("http://{}/api/generate", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let (wrote_tx, wrote_rx) = std::sync::mpsc::channel();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut req = Vec::new();
            let mut b = [0u8; 4096];
            while !String::from_utf8_lossy(&req).contains("\r\n\r\n{\"p\":1}") {
                let n = s.read(&mut b).unwrap();
                assert!(
                    n > 0,
                    "the request ended early: {:?}",
                    String::from_utf8_lossy(&req)
                );
                req.extend_from_slice(&b[..n]);
            }
            s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                .unwrap();
            s.write_all(b"6\r\nfirst\n\r\n").unwrap();
            let before = Utc::now();
            s.write_all(b"5\r\nlast\n\r\n0\r\n\r\n").unwrap();
            wrote_tx.send(before).unwrap();
            String::from_utf8(req).unwrap()
        });
        let mut resp = send(
            &url,
            http::Method::POST,
            Some(br#"{"p":1}"#.to_vec()),
            Duration::from_secs(3),
        )
        .await
        .unwrap();
        assert_eq!(resp.status, 200);
        let before_last = tokio::task::spawn_blocking(move || wrote_rx.recv().unwrap())
            .await
            .unwrap();
        let mut body = Vec::new();
        while let Some(chunk) = resp.body.next().await {
            body.extend_from_slice(&chunk.unwrap());
        }
        let read = Utc::now();
        assert_eq!(body, b"first\nlast\n");
        let stamp = resp
            .arrival
            .as_ref()
            .and_then(Arrival::last)
            .expect("the kernel stamped");
        assert!(
            before_last <= stamp && stamp <= read,
            "{before_last} {stamp} {read}"
        );
        let req = server.join().unwrap();
        assert!(req.starts_with("POST /api/generate HTTP/1.1\r\n"), "{req}");
        assert!(
            req.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{req}"
        );
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_url() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let url: reqwest::Url = format!("http://127.0.0.1:{port}/api/generate")
            .parse()
            .unwrap();
        let e = send(&url, http::Method::POST, None, Duration::from_secs(3))
            .await
            .err()
            .expect("nothing listens");
        assert!(
            e.starts_with(&format!("{url}: ")) && e.contains("refused"),
            "{e}"
        );
    }
}
