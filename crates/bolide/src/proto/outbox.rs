//! A connection's queue of messages to send: an unbounded channel for one thread.
//!
//! Every session has one, between its user and its connection's task, both on the same worker
//! thread. tokio's unbounded channel costs 1.3 KB a session (its shared state and a first block of
//! 32 slots); this one is a queue in an `Rc`, about 100 bytes, and needs no atomics.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};

struct Inner<T> {
    queue: RefCell<VecDeque<T>>,
    /// The receiver waiting for a message (or for the last sender to go).
    waker: Cell<Option<Waker>>,
    senders: Cell<usize>,
    receiving: Cell<bool>,
}

/// The sending side; cloned for every writer.
pub struct Sender<T>(Rc<Inner<T>>);

/// The receiving side: the connection's task.
pub struct Receiver<T>(Rc<Inner<T>>);

/// A new queue.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let inner = Rc::new(Inner {
        queue: RefCell::new(VecDeque::new()),
        waker: Cell::new(None),
        senders: Cell::new(1),
        receiving: Cell::new(true),
    });
    (Sender(Rc::clone(&inner)), Receiver(inner))
}

impl<T> Sender<T> {
    /// Queues `value`; gives it back when the receiver is gone.
    pub fn send(&self, value: T) -> Result<(), T> {
        if !self.0.receiving.get() {
            return Err(value);
        }
        self.0.queue.borrow_mut().push_back(value);
        if let Some(w) = self.0.waker.take() {
            w.wake();
        }
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.0.senders.set(self.0.senders.get() + 1);
        Sender(Rc::clone(&self.0))
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.0.senders.set(self.0.senders.get() - 1);
        if self.0.senders.get() == 0 {
            if let Some(w) = self.0.waker.take() {
                w.wake();
            }
        }
    }
}

impl<T> Receiver<T> {
    /// The next message; `None` once it is empty and every sender is gone. Cancel-safe: a message
    /// is taken only when it is returned.
    pub async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| {
            if let Some(v) = self.0.queue.borrow_mut().pop_front() {
                return Poll::Ready(Some(v));
            }
            if self.0.senders.get() == 0 {
                return Poll::Ready(None);
            }
            self.0.waker.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }

    /// The next message if one is queued now.
    pub fn try_recv(&mut self) -> Option<T> {
        self.0.queue.borrow_mut().pop_front()
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.0.receiving.set(false);
        self.0.waker.take();
        // What was queued is dropped with the receiver, as it would be with tokio's channel.
        std::mem::take(&mut *self.0.queue.borrow_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    }

    #[test]
    fn messages_come_in_order_and_the_end_is_seen() {
        let (tx, mut rx) = channel();
        let tx2 = tx.clone();
        tx.send(1).unwrap();
        tx2.send(2).unwrap();
        assert_eq!(rx.try_recv(), Some(1));
        drop(tx);
        assert_eq!(block_on(rx.recv()), Some(2));
        drop(tx2);
        assert_eq!(block_on(rx.recv()), None);
    }

    #[test]
    fn a_waiting_receiver_is_woken_and_a_gone_one_refuses() {
        let local = tokio::task::LocalSet::new();
        block_on(local.run_until(async {
            let (tx, mut rx) = channel::<String>();
            let task = tokio::task::spawn_local(async move { rx.recv().await });
            tokio::task::yield_now().await;
            tx.send("a".into()).unwrap();
            assert_eq!(task.await.unwrap().as_deref(), Some("a"));
            // The receiver went with its task.
            assert_eq!(tx.send("b".into()), Err("b".to_string()));
        }));
    }
}
