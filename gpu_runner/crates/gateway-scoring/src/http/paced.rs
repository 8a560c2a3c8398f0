//! The connection as a slow or impatient client reads it
//! ([`super::ClientBehavior`]).

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::ClientBehavior;

/// The connection as a slow or impatient client reads it
/// ([`ClientBehavior`]): at most `read_size` bytes per read, and a pause
/// before every read after the first.
pub(super) struct Paced {
    inner: tokio::net::TcpStream,
    read_size: Option<usize>,
    delay: Option<Duration>,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
    first: bool,
    /// Bytes read so far.
    read: Arc<AtomicUsize>,
}

impl Paced {
    pub(super) fn new(inner: tokio::net::TcpStream, client: &ClientBehavior, read: Arc<AtomicUsize>) -> Paced {
        Paced {
            inner,
            read_size: client.read_size.map(|n| n.max(1)),
            delay: client.read_delay,
            pause: None,
            first: true,
            read,
        }
    }
}

impl AsyncRead for Paced {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if let (Some(d), false) = (this.delay, this.first) {
            let pause = this.pause.get_or_insert_with(|| Box::pin(tokio::time::sleep(d)));
            if std::future::Future::poll(pause.as_mut(), cx).is_pending() {
                return Poll::Pending;
            }
        }
        let Some(max) = this.read_size else {
            let before = buf.filled().len();
            let r = Pin::new(&mut this.inner).poll_read(cx, buf);
            if let Poll::Ready(Ok(())) = r {
                this.done_read(buf.filled().len() - before);
            }
            return r;
        };
        let mut sub = buf.take(max);
        let r = Pin::new(&mut this.inner).poll_read(cx, &mut sub);
        let n = sub.filled().len();
        if let Poll::Ready(Ok(())) = r {
            // SAFETY: `sub` is the start of `buf`'s unfilled part, and the
            // read initialised and filled `n` bytes of it.
            unsafe { buf.assume_init(n) };
            buf.advance(n);
            this.done_read(n);
        }
        r
    }
}

impl Paced {
    fn done_read(&mut self, n: usize) {
        self.read.fetch_add(n, Ordering::Relaxed);
        self.first = false;
        self.pause = None;
    }
}

impl AsyncWrite for Paced {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
