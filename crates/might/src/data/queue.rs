//! The bounded queue between a `DataLoader`'s thread and the training loop.
//!
//! Why not `std::sync::mpsc::sync_channel`: once the loader is ahead (the usual case), every
//! batch taken frees one slot and wakes the blocked loader, a futex wake-up per training step
//! (~13 µs of the MNIST MLP's ~400 µs step on this VM, and the woken thread then preempts a
//! compute thread). Here the loader, once the queue is full, sleeps until it has drained to
//! half, then refills it in one go: one wake-up per `capacity / 2` batches.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

pub(crate) struct Queue<T> {
    state: Mutex<State<T>>,
    /// Signalled when an item arrives or the producer finishes.
    ready: Condvar,
    /// Signalled when the queue has drained to half or the consumer left.
    room: Condvar,
    cap: usize,
}

struct State<T> {
    items: VecDeque<T>,
    producer_done: bool,
    consumer_gone: bool,
    producer_waiting: bool,
    consumer_waiting: bool,
}

impl<T> Queue<T> {
    pub(crate) fn new(capacity: usize) -> Queue<T> {
        let cap = capacity.max(1);
        Queue {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(cap),
                producer_done: false,
                consumer_gone: false,
                producer_waiting: false,
                consumer_waiting: false,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
            cap,
        }
    }

    /// Add `item`, waiting while the queue is full. False (item dropped) once the consumer
    /// has gone.
    pub(crate) fn push(&self, item: T) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.items.len() >= self.cap {
            while st.items.len() > self.cap / 2 && !st.consumer_gone {
                st.producer_waiting = true;
                st = self.room.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            st.producer_waiting = false;
        }
        if st.consumer_gone {
            return false;
        }
        st.items.push_back(item);
        let wake = std::mem::take(&mut st.consumer_waiting);
        drop(st);
        if wake {
            self.ready.notify_one();
        }
        true
    }

    /// The next item, waiting for one; `None` once the producer has finished and the queue
    /// is empty.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(item) = st.items.pop_front() {
                let wake = st.producer_waiting && st.items.len() <= self.cap / 2;
                if wake {
                    st.producer_waiting = false;
                }
                drop(st);
                if wake {
                    self.room.notify_one();
                }
                return Some(item);
            }
            if st.producer_done {
                return None;
            }
            st.consumer_waiting = true;
            st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The producer will push no more (also when it unwinds: call from a drop guard).
    pub(crate) fn finish(&self) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .producer_done = true;
        self.ready.notify_all();
    }

    /// The consumer takes no more: a waiting producer returns, later pushes are dropped.
    pub(crate) fn close(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.consumer_gone = true;
        st.items.clear();
        drop(st);
        self.room.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn items_arrive_in_order_then_none() {
        for cap in [1, 2, 5] {
            let q = Arc::new(Queue::new(cap));
            let p = q.clone();
            let h = std::thread::spawn(move || {
                for i in 0..100 {
                    assert!(p.push(i));
                }
                p.finish();
            });
            let got: Vec<i32> = std::iter::from_fn(|| q.pop()).collect();
            h.join().unwrap();
            assert_eq!(got, (0..100).collect::<Vec<_>>(), "capacity {cap}");
        }
    }

    #[test]
    fn closing_releases_a_blocked_producer() {
        let q = Arc::new(Queue::new(2));
        let p = q.clone();
        let h = std::thread::spawn(move || (0..1000).take_while(|&i| p.push(i)).count());
        assert_eq!(q.pop(), Some(0));
        q.close();
        let pushed = h.join().unwrap();
        assert!(pushed < 1000, "the producer stopped early ({pushed})");
    }

    #[test]
    fn a_finished_empty_queue_does_not_block() {
        let q: Queue<u8> = Queue::new(4);
        q.finish();
        assert_eq!(q.pop(), None);
    }
}
