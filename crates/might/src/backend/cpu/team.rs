//! A fork-join team for kernels that take well under a millisecond, e.g. the matrix products
//! of an MNIST MLP (~0.1 ms each).
//!
//! Why not rayon: handing work to a sleeping rayon worker costs a futex wake-up and a
//! reschedule, tens of microseconds on a VM, twice per call when the caller is outside the
//! pool. That ate the whole gain of a second thread on small models. The team works like an
//! OpenMP parallel region: the caller runs share 0 itself, `threads - 1` helper threads run the
//! others, and helpers spin for a short while after a job before they park, so back-to-back
//! kernels (one training step) find them awake.
//!
//! One caller at a time: a second thread that arrives while the team is busy (or a job that
//! calls back into the team) runs its shares serially, which is always correct.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How long an idle helper spins before it parks. Long enough to bridge the gaps between the
/// products of a training step, short enough that an idle program leaves the cores alone.
const SPIN: Duration = Duration::from_micros(1500);

const FREE: u8 = 0;
const BUSY: u8 = 1;
const RETIRING: u8 = 2;
const RETIRED: u8 = 3;

/// A job: `f(i)` for every share `i` in `0..parts`; each thread takes the next block of
/// `grain` shares left (so a thread that got the CPU late simply does fewer).
#[derive(Clone, Copy)]
struct Job {
    /// Lifetime erased; valid until `pending` drops to 0 (the caller waits for that).
    f: *const (dyn Fn(usize) + Sync),
    parts: usize,
    grain: usize,
}

/// Blocks handed out per thread and job. Taking shares one at a time made threads bounce the
/// share counter (and neighbouring outputs) between cores: 512 one-plane shares of a max pool
/// ran slower on two threads than on one. Eight blocks each still lets a thread that lost its
/// core for a while leave most of its work to the others.
const BLOCKS_PER_THREAD: usize = 8;

struct Shared {
    /// Helpers, not counting the caller.
    helpers: usize,
    /// Bumped once per job; a helper runs a job when it sees a new value.
    generation: AtomicUsize,
    job: Mutex<Option<Job>>,
    /// Next share of the current job to hand out.
    next: AtomicUsize,
    /// Helpers that have not finished the current job.
    pending: AtomicUsize,
    /// The first panic of the current job, re-raised by its caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// FREE, BUSY (a caller owns the team), RETIRING (dropped while busy: the caller shuts
    /// the helpers down when it finishes) or RETIRED.
    state: AtomicU8,
    shutdown: AtomicBool,
    sleeping: AtomicUsize,
    park: Mutex<()>,
    wake: Condvar,
}

// SAFETY: the raw job pointer is only dereferenced while the caller that published it is
// blocked waiting for `pending == 0`, so the closure it points to is alive; the closure is Sync.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// Run shares of `job` until none is left.
    fn work(&self, job: Job) {
        loop {
            let start = self.next.fetch_add(job.grain, Relaxed);
            if start >= job.parts {
                return;
            }
            // SAFETY: see `Job::f`: the caller is still waiting on `pending`.
            let f = unsafe { &*job.f };
            for i in start..(start + job.grain).min(job.parts) {
                if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(i))) {
                    lock(&self.panic).get_or_insert(p);
                }
            }
        }
    }

    fn helper_loop(&self) {
        let mut seen = 0;
        loop {
            let start = Instant::now();
            let mut n = 0u32;
            while self.generation.load(Acquire) == seen {
                std::hint::spin_loop();
                n = n.wrapping_add(1);
                if n.is_multiple_of(256) && start.elapsed() > SPIN {
                    let mut g = lock(&self.park);
                    self.sleeping.fetch_add(1, SeqCst);
                    while self.generation.load(SeqCst) == seen {
                        g = self.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                    }
                    self.sleeping.fetch_sub(1, SeqCst);
                }
            }
            seen = self.generation.load(Acquire);
            if self.shutdown.load(Acquire) {
                return;
            }
            let Some(job) = *lock(&self.job) else {
                unreachable!("a new generation always carries a job")
            };
            self.work(job);
            self.pending.fetch_sub(1, Release);
        }
    }

    fn shut_down(&self) {
        self.shutdown.store(true, Release);
        self.publish();
    }

    fn publish(&self) {
        self.generation.fetch_add(1, SeqCst);
        if self.sleeping.load(SeqCst) > 0 {
            let _g = lock(&self.park);
            self.wake.notify_all();
        }
    }
}

/// The caller's hold on a busy team: waits for the helpers and hands the team back, in
/// [`Join::finish`] or, should the caller unwind, on drop.
struct Join<'a> {
    team: &'a Shared,
    done: bool,
}

impl Join<'_> {
    /// Wait until every helper has left the job, hand the team back, and return the job's
    /// first panic (taken before the team is free, so the next caller cannot reset or add
    /// to it).
    fn finish(&mut self) -> Option<Box<dyn Any + Send>> {
        let t = self.team;
        let mut n = 0u32;
        while t.pending.load(Acquire) != 0 {
            std::hint::spin_loop();
            n = n.wrapping_add(1);
            if n.is_multiple_of(4096) {
                std::thread::yield_now();
            }
        }
        *lock(&t.job) = None;
        let panic = lock(&t.panic).take();
        self.done = true;
        if t.state
            .compare_exchange(BUSY, FREE, Release, Relaxed)
            .is_err()
        {
            // the team was replaced while we used it
            t.state.store(RETIRED, Release);
            t.shut_down();
        }
        panic
    }
}

impl Drop for Join<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.finish();
        }
    }
}

/// Lock, ignoring poisoning: every value behind these locks is valid at all times.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Team(Arc<Shared>);

impl Drop for Team {
    fn drop(&mut self) {
        // Never wait here (the caller in flight may be the one replacing the team): a free team
        // retires now, a busy one when its caller finishes. Callers still holding a retired
        // team run serially.
        let st = &self.0.state;
        loop {
            if st.compare_exchange(FREE, RETIRED, Acquire, Relaxed).is_ok() {
                self.0.shut_down();
                return;
            }
            if st.compare_exchange(BUSY, RETIRING, AcqRel, Relaxed).is_ok() {
                return;
            }
        }
    }
}

/// A team of `threads - 1` helpers, or None if the OS refuses a thread (the caller then runs
/// alone).
fn new_team(threads: usize) -> Option<Team> {
    let shared = Arc::new(Shared {
        helpers: threads - 1,
        generation: AtomicUsize::new(0),
        job: Mutex::new(None),
        next: AtomicUsize::new(0),
        pending: AtomicUsize::new(0),
        panic: Mutex::new(None),
        state: AtomicU8::new(FREE),
        shutdown: AtomicBool::new(false),
        sleeping: AtomicUsize::new(0),
        park: Mutex::new(()),
        wake: Condvar::new(),
    });
    for index in 1..threads {
        let s = shared.clone();
        let started = std::thread::Builder::new()
            .name(format!("might-team-{index}"))
            .spawn(move || s.helper_loop());
        if started.is_err() {
            // stop the helpers already started; nobody else has seen this team
            shared.shut_down();
            return None;
        }
    }
    Some(Team(shared))
}

static TEAM: RwLock<Option<Team>> = RwLock::new(None);

fn team(threads: usize) -> Option<Arc<Shared>> {
    if let Some(t) = TEAM.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        if t.0.helpers + 1 == threads {
            return Some(t.0.clone());
        }
    }
    let mut g = TEAM.write().unwrap_or_else(|e| e.into_inner());
    match g.as_ref() {
        Some(t) if t.0.helpers + 1 == threads => {}
        _ => *g = new_team(threads),
    }
    g.as_ref().map(|t| t.0.clone())
}

/// Run `f(i)` for `i in 0..parts` on up to `threads` threads (the caller included) and return
/// when all are done. A panic in any share is re-raised here.
pub fn run(threads: usize, parts: usize, f: &(dyn Fn(usize) + Sync)) {
    if threads <= 1 || parts <= 1 {
        (0..parts).for_each(f);
        return;
    }
    let Some(t) = team(threads) else {
        (0..parts).for_each(f);
        return;
    };
    if t.state
        .compare_exchange(FREE, BUSY, Acquire, Relaxed)
        .is_err()
    {
        (0..parts).for_each(f);
        return;
    }
    // From here on the team is ours; `join` hands it back even if this frame unwinds, and
    // first waits for the helpers, so they never run `f` after this frame is gone.
    let mut join = Join {
        team: &t,
        done: false,
    };
    // SAFETY: only the lifetime is erased; `join` keeps this frame (and so `f`) alive until
    // every helper has decremented `pending`, after which none touches the job.
    let erased: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(f) };
    let grain = parts.div_ceil(threads * BLOCKS_PER_THREAD);
    let job = Job {
        f: erased,
        parts,
        grain,
    };
    *lock(&t.job) = Some(job);
    t.next.store(0, Relaxed);
    t.pending.store(t.helpers, SeqCst);
    t.publish();
    t.work(job);
    if let Some(p) = join.finish() {
        std::panic::resume_unwind(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_share_runs_once() {
        for threads in 1..4 {
            for parts in 0..9 {
                let hits: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
                run(threads, parts, &|i| {
                    hits[i].fetch_add(1, Relaxed);
                });
                assert!(
                    hits.iter().all(|h| h.load(Relaxed) == 1),
                    "{threads} {parts}"
                );
            }
        }
    }

    #[test]
    fn concurrent_callers_and_parked_helpers() {
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for round in 0..200 {
                        run(2, 4, &|i| {
                            total.fetch_add(i + 1, Relaxed);
                        });
                        if round % 50 == 0 {
                            std::thread::sleep(SPIN * 2); // let the helper park
                        }
                    }
                });
            }
        });
        assert_eq!(total.load(Relaxed), 3 * 200 * 10);
    }

    #[test]
    fn replacing_the_team_while_in_use() {
        // callers asking for different sizes replace the team under each other (a busy team
        // retires when its caller finishes; holders of a retired team run serially)
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for threads in [2, 3, 2] {
                let total = &total;
                s.spawn(move || {
                    for _ in 0..300 {
                        run(threads, 5, &|i| {
                            total.fetch_add(i + 1, Relaxed);
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Relaxed), 3 * 300 * 15);
    }

    #[test]
    fn panics_reach_their_own_caller() {
        // one thread's failing jobs must neither be lost nor leak into another's
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..100 {
                    let r = catch_unwind(|| run(2, 4, &|i| assert!(i != 3, "share 3 fails")));
                    assert!(r.is_err());
                }
            });
            s.spawn(|| {
                for _ in 0..100 {
                    let n = AtomicUsize::new(0);
                    run(2, 4, &|_| {
                        n.fetch_add(1, Relaxed);
                    });
                    assert_eq!(n.load(Relaxed), 4);
                }
            });
        });
    }

    #[test]
    fn a_panicking_share_is_reraised() {
        // whichever thread ran share 1, its own panic comes back to the caller
        let r = catch_unwind(|| run(2, 2, &|i| assert!(i == 0, "share {i} failed")));
        let p = r.expect_err("the panic is re-raised");
        let msg = p.downcast_ref::<String>().map(String::as_str).unwrap_or("");
        assert!(msg.contains("share 1 failed"), "payload: {msg:?}");
        // the team is usable afterwards
        let n = AtomicUsize::new(0);
        run(2, 2, &|_| {
            n.fetch_add(1, Relaxed);
        });
        assert_eq!(n.load(Relaxed), 2);
    }
}
