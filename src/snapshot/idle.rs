//! An import's input that gives up when it stalls: the file is read for as long as bytes come,
//! and the read fails once none has come for the idle limit while the import waits for them.
//! A stalled pipe (`import -` behind a producer that hangs) would otherwise hold the import,
//! and let its staging keys expire, for ever. Time the import spends on Redis between reads
//! does not count.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::{Instant, Sleep};

/// How long an import waits for its input's next byte by default: well inside the staging
/// keys' TTL, which only a stopped importer outlives.
pub(crate) const IDLE_INPUT: Duration = Duration::from_secs(60);

/// `R`, failing a read that waits longer than `limit` with [`io::ErrorKind::TimedOut`].
pub(crate) struct Idle<R> {
    inner: R,
    limit: Duration,
    timer: Pin<Box<Sleep>>,
    /// A read is waiting for the input (the timer runs for it).
    waiting: bool,
}

impl<R> Idle<R> {
    pub(crate) fn new(inner: R, limit: Duration) -> Self {
        Idle {
            inner,
            limit,
            timer: Box::pin(tokio::time::sleep(limit)),
            waiting: false,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Idle<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.waiting {
            this.timer.as_mut().reset(Instant::now() + this.limit);
            this.waiting = true;
        }
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(done) => {
                this.waiting = false;
                Poll::Ready(done)
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no input for {:?}: the import stopped waiting, and nothing was written",
                        this.limit
                    ),
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}
