//! How many threads kernels use, and how they split work. Size from `MIGHT_NUM_THREADS`,
//! `set_num_threads`, or all cores. Kernels run on the fork-join [`super::team`] (the caller
//! plus `n - 1` helpers); small ops stay on the calling thread, where waking a helper would
//! cost more than it saves.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// Elements below which elementwise kernels run single-threaded (measured: waking a worker
/// costs a few microseconds, about what 32 K float ops take).
pub const PAR_THRESHOLD: usize = 1 << 15;

/// 0 until first read or set.
static THREADS: AtomicUsize = AtomicUsize::new(0);

fn default_threads() -> usize {
    std::env::var("MIGHT_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Number of threads kernels use.
pub fn get_num_threads() -> usize {
    match THREADS.load(Relaxed) {
        0 => {
            let n = default_threads();
            // a concurrent `set_num_threads` wins
            let _ = THREADS.compare_exchange(0, n, Relaxed, Relaxed);
            THREADS.load(Relaxed)
        }
        n => n,
    }
}

/// Set the number of threads kernels use (like `torch.set_num_threads`).
pub fn set_num_threads(n: usize) {
    THREADS.store(n.max(1), Relaxed);
}

/// Should an op of `work` elements be split across threads?
pub fn parallel(work: usize) -> bool {
    work >= PAR_THRESHOLD && get_num_threads() > 1
}

/// `f(i)` for `i in 0..parts` on the kernel threads (the caller takes shares too); returns when
/// all are done. For kernels: small jobs pay no wake-up (see [`super::team`]).
pub fn run(parts: usize, f: impl Fn(usize) + Sync) {
    super::team::run(get_num_threads(), parts, &f)
}

/// `f(i, piece)` for every `chunk`-long piece of `out` (the last may be shorter), on the kernel
/// threads.
pub fn for_each_chunk<U: Send>(out: &mut [U], chunk: usize, f: impl Fn(usize, &mut [U]) + Sync) {
    let pieces: Vec<Line<Mutex<&mut [U]>>> = out
        .chunks_mut(chunk.max(1))
        .map(|c| Line(Mutex::new(c)))
        .collect();
    run(pieces.len(), |i| f(i, &mut pieces[i].0.lock().unwrap()))
}

/// A value alone on its cache line(s). The per-piece locks of [`for_each_chunk`] sat two or
/// three to a line, so the threads taking neighbouring pieces bounced the line between cores on
/// every lock and unlock (an MNIST batch's 64 images: ~3 % of a 2-thread MLP step).
#[repr(align(64))]
struct Line<T>(T);

/// Like [`for_each_chunk`], collecting what `f` returns for each piece, in order.
pub fn map_chunks<U: Send, R: Send>(
    out: &mut [U],
    chunk: usize,
    f: impl Fn(usize, &mut [U]) -> R + Sync,
) -> Vec<R> {
    let pieces: Vec<Line<Mutex<&mut [U]>>> = out
        .chunks_mut(chunk.max(1))
        .map(|c| Line(Mutex::new(c)))
        .collect();
    map(pieces.len(), |i| f(i, &mut pieces[i].0.lock().unwrap()))
}

/// `[f(0), .., f(n - 1)]`, computed on the kernel threads.
pub fn map<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let slots: Vec<Line<Mutex<Option<R>>>> = (0..n).map(|_| Line(Mutex::new(None))).collect();
    run(n, |i| *slots[i].0.lock().unwrap() = Some(f(i)));
    slots
        .into_iter()
        .map(|s| s.0.into_inner().unwrap().expect("every share ran"))
        .collect()
}
