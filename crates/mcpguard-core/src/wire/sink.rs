//! Where the messages for one peer are written.
//!
//! The fast path writes directly from the thread that decided (one `writev` per batch of
//! messages: no hand-off to another thread, no copy). Only when the destination cannot take
//! more without blocking does a message go to a queue that a writer thread drains; while
//! anything is queued, later messages queue behind it, so order is kept.
//!
//! The server's stdin is made non-blocking (the pipe is ours alone), so a reader thread never
//! blocks on the server: a server that writes while not reading cannot deadlock the proxy. The
//! host's stdout stays blocking (the host may share that file description with others), which
//! only ever makes a thread wait for the host it is writing to: backpressure, not deadlock.
//!
//! Knows file descriptors and byte budgets; it never looks inside a message and decides nothing.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::os::fd::AsFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;

use bytes::{Buf, Bytes, BytesMut};

const NEWLINE: Bytes = Bytes::from_static(b"\n");

/// One destination.
pub struct Sink {
    inner: Mutex<Inner>,
    /// Signalled when items are queued or the sink closes (the writer thread waits on it).
    queued: Condvar,
    /// Signalled when the queue shrinks (senders over budget wait on it).
    drained: Condvar,
    budget: usize,
}

struct Inner {
    file: Option<Arc<File>>,
    nonblocking: bool,
    queue: VecDeque<Bytes>,
    queued_bytes: usize,
    /// The writer thread holds items it has taken from the queue.
    busy: bool,
    closed: bool,
    failed: Option<io::ErrorKind>,
}

impl Sink {
    /// A sink over `file`. With `nonblocking`, the file is switched to non-blocking mode and a
    /// writer thread named `name` drains what cannot be written at once.
    pub fn new(file: File, nonblocking: bool, budget: usize, name: &str) -> io::Result<Arc<Sink>> {
        if nonblocking {
            set_nonblocking(&file)?;
        }
        let sink = Arc::new(Sink {
            inner: Mutex::new(Inner {
                file: Some(Arc::new(file)),
                nonblocking,
                queue: VecDeque::new(),
                queued_bytes: 0,
                busy: false,
                closed: false,
                failed: None,
            }),
            queued: Condvar::new(),
            drained: Condvar::new(),
            budget,
        });
        if nonblocking {
            let s = sink.clone();
            thread::Builder::new()
                .name(name.to_string())
                .spawn(move || s.drain_loop())?;
        }
        Ok(sink)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `messages` (each without its newline), in order. `forwarded` traffic waits while
    /// the queue is over budget; replies mcpguard generates wait only past four times that.
    /// Returns the error once the destination has failed or closed.
    pub fn send(&self, messages: Vec<Bytes>, forwarded: bool) -> Result<(), io::ErrorKind> {
        if messages.is_empty() {
            return Ok(());
        }
        let (mut items, size) = pack(messages);
        let limit = if forwarded {
            self.budget
        } else {
            self.budget * 4
        };
        let mut st = self.lock();
        loop {
            if let Some(kind) = st.failed {
                return Err(kind);
            }
            if st.closed {
                return Err(io::ErrorKind::BrokenPipe);
            }
            if st.queue.is_empty() && !st.busy {
                break;
            }
            if st.queued_bytes + size <= limit || st.queue.is_empty() {
                st.queued_bytes += size;
                st.queue.extend(items);
                self.queued.notify_one();
                return Ok(());
            }
            st = self.drained.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        // Nothing is queued or in flight: write directly, holding the lock so that order is
        // kept against the other thread that may write here.
        let Some(file) = st.file.clone() else {
            return Err(io::ErrorKind::BrokenPipe);
        };
        let blocking = !st.nonblocking;
        match write_items(&file, &mut items, blocking) {
            Ok(()) if items.is_empty() => Ok(()),
            Ok(()) => {
                // The destination is full: the writer thread takes over the rest.
                st.queued_bytes += items.iter().map(Bytes::len).sum::<usize>();
                st.queue.extend(items);
                self.queued.notify_one();
                Ok(())
            }
            Err(e) => {
                st.failed = Some(e.kind());
                self.queued.notify_all();
                self.drained.notify_all();
                Err(e.kind())
            }
        }
    }

    /// No more messages will be accepted; what is queued is still written, then the file is
    /// closed (for the server's stdin, that is what tells the server the host is gone).
    pub fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        if st.queue.is_empty() && !st.busy {
            st.file = None;
        }
        self.queued.notify_all();
        self.drained.notify_all();
    }

    fn drain_loop(&self) {
        let mut st = self.lock();
        loop {
            while st.queue.is_empty() && !(st.closed || st.failed.is_some()) {
                st = self.queued.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.failed.is_some() || (st.queue.is_empty() && st.closed) {
                st.queue.clear();
                st.queued_bytes = 0;
                st.file = None;
                self.drained.notify_all();
                return;
            }
            let mut items: VecDeque<Bytes> = std::mem::take(&mut st.queue);
            st.queued_bytes = 0;
            st.busy = true;
            let file = st.file.clone();
            drop(st);
            self.drained.notify_all();
            let result = match &file {
                Some(f) => write_items(f, &mut items, true),
                None => Err(io::Error::from(io::ErrorKind::BrokenPipe)),
            };
            st = self.lock();
            st.busy = false;
            if let Err(e) = result {
                st.failed = Some(e.kind());
            }
        }
    }
}

/// Below this size a message is copied into one buffer with its neighbours instead of being
/// written from its own slice. A pipelining host sends hundreds of small messages per read; one
/// contiguous buffer costs a copy of a few kilobytes, where one slice per message and per newline
/// costs the kernel two iovec entries each and several `writev` calls per batch. Larger messages
/// are still written without a copy.
const COPY_BELOW: usize = 4096;

/// The batch as write items, each message followed by its newline, and its size in bytes.
fn pack(messages: Vec<Bytes>) -> (VecDeque<Bytes>, usize) {
    let size: usize = messages.iter().map(|m| m.len() + 1).sum();
    let mut items = VecDeque::new();
    let mut packed = BytesMut::new();
    for m in messages {
        if m.len() < COPY_BELOW {
            if packed.capacity() == 0 {
                packed.reserve(size.min(1 << 16));
            }
            packed.extend_from_slice(&m);
            packed.extend_from_slice(b"\n");
        } else {
            if !packed.is_empty() {
                items.push_back(packed.split().freeze());
            }
            items.push_back(m);
            items.push_back(NEWLINE);
        }
    }
    if !packed.is_empty() {
        items.push_back(packed.freeze());
    }
    (items, size)
}

/// Writes as much of `items` as possible with vectored writes, removing what was written. With
/// `wait`, blocks (polling a non-blocking file) until everything is written; without, stops when
/// the file would block.
fn write_items(file: &File, items: &mut VecDeque<Bytes>, wait: bool) -> io::Result<()> {
    let mut w: &File = file;
    while !items.is_empty() {
        let slices: Vec<IoSlice<'_>> = items.iter().take(512).map(|b| IoSlice::new(b)).collect();
        match w.write_vectored(&slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(mut n) => {
                drop(slices);
                while n > 0 {
                    let Some(front) = items.front_mut() else {
                        break;
                    };
                    if front.len() <= n {
                        n -= front.len();
                        items.pop_front();
                    } else {
                        front.advance(n);
                        n = 0;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if !wait {
                    return Ok(());
                }
                wait_writable(file)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn wait_writable(file: &File) -> io::Result<()> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLOUT)];
    loop {
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

fn set_nonblocking(file: &File) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = fcntl(file, FcntlArg::F_GETFL)?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(file, FcntlArg::F_SETFL(flags))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_packed_in_order_with_a_newline_after_every_message() {
        let big = Bytes::from(vec![b'x'; COPY_BELOW]);
        let batch = vec![
            Bytes::from_static(b"a"),
            Bytes::from_static(b"bc"),
            big.clone(),
            Bytes::from_static(b"d"),
        ];
        let (items, size) = pack(batch);
        let joined: Vec<u8> = items.iter().flat_map(|b| b.iter().copied()).collect();
        let mut want = b"a\nbc\n".to_vec();
        want.extend_from_slice(&big);
        want.extend_from_slice(b"\nd\n");
        assert_eq!(joined, want);
        assert_eq!(size, want.len());
        // The small neighbours share one buffer; the large message is its own slice, not a copy.
        assert_eq!(items.len(), 4);
        assert_eq!(items[1].as_ptr(), big.as_ptr());
    }
}
