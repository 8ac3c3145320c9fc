//! The thread pool kernels run on. Size from `MIGHT_NUM_THREADS`, `set_num_threads`, or all
//! cores. Small ops stay on the calling thread: waking workers costs more than they save.

use std::sync::{Arc, OnceLock, RwLock};

static POOL: OnceLock<RwLock<Arc<rayon::ThreadPool>>> = OnceLock::new();

/// Elements below which elementwise kernels run single-threaded (measured: waking a worker
/// costs a few microseconds, about what 32 K float ops take).
pub const PAR_THRESHOLD: usize = 1 << 15;

fn build(n: usize) -> Arc<rayon::ThreadPool> {
    Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("might-{i}"))
            .build()
            .expect("failed to start the thread pool"),
    )
}

fn default_threads() -> usize {
    std::env::var("MIGHT_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn pool() -> Arc<rayon::ThreadPool> {
    POOL.get_or_init(|| RwLock::new(build(default_threads())))
        .read()
        .unwrap()
        .clone()
}

/// Number of threads kernels use.
pub fn get_num_threads() -> usize {
    pool().current_num_threads()
}

/// Set the number of threads kernels use (like `torch.set_num_threads`).
pub fn set_num_threads(n: usize) {
    let n = n.max(1);
    let lock = POOL.get_or_init(|| RwLock::new(build(n)));
    let mut g = lock.write().unwrap();
    if g.current_num_threads() != n {
        *g = build(n);
    }
}

/// Run `f` on the kernel pool (all rayon calls inside use it).
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let p = pool();
    if p.current_num_threads() == 1 {
        f()
    } else {
        p.install(f)
    }
}

/// Should an op of `work` elements be split across threads?
pub fn parallel(work: usize) -> bool {
    work >= PAR_THRESHOLD && get_num_threads() > 1
}
