//! The memory budget: the one place that decides whether a buffer may be allocated.
//!
//! Why: sizes reach the library from files (checkpoint metadata, `.npy` headers), flags and
//! user code. Rust aborts the process when an allocation fails, and on Linux an oversized one
//! may "succeed" and get the process killed later when it touches the pages. So every
//! creation op and every loader asks [`check_alloc`] first: a buffer larger than the budget is
//! refused with an error naming the op, the shape, the bytes it needs and the budget, before
//! anything is allocated. The budget is the memory the machine has available now
//! (`MemAvailable` + free swap on Linux), or what [`set_memory_limit`] states.
//! Small buffers (under [`CHECK_FROM`]) skip the check: they cannot exhaust a machine alone,
//! and reading the system's figure on every small tensor would cost more than the tensor.

use crate::{DType, Error, ErrorKind, Result, Shape};
use std::sync::atomic::{AtomicU64, Ordering};

/// Buffers at least this large are checked against the budget.
pub const CHECK_FROM: u64 = 64 << 20;

/// The stated budget in bytes (0: the machine's available memory).
static LIMIT: AtomicU64 = AtomicU64::new(0);

/// State the most bytes one buffer may take (`None`: the machine's available memory).
pub fn set_memory_limit(bytes: Option<u64>) {
    LIMIT.store(bytes.map_or(0, |b| b.max(1)), Ordering::Relaxed);
}

/// The budget now: the stated one, else the available memory (unbounded where the system
/// does not say).
pub fn memory_limit() -> u64 {
    match LIMIT.load(Ordering::Relaxed) {
        0 => available_memory().unwrap_or(u64::MAX),
        n => n,
    }
}

/// `MemAvailable + SwapFree` from `/proc/meminfo`, in bytes.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb.saturating_mul(1024))
    };
    Some(field("MemAvailable:")?.saturating_add(field("SwapFree:").unwrap_or(0)))
}

/// Bytes as a human reads them (`1.5 GiB`).
pub fn human_bytes(b: u128) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let (mut v, mut u) = (b as f64, 0);
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// Refuse a buffer of `elems` elements of `elem_bytes` each for `what` (a shape, a file's
/// tensor...) when it would not fit the budget.
#[track_caller]
pub fn check_bytes(
    op: &str,
    what: &dyn std::fmt::Display,
    elems: u128,
    elem_bytes: u128,
) -> Result<()> {
    let need = elems.saturating_mul(elem_bytes);
    if need < CHECK_FROM as u128 {
        return Ok(());
    }
    let limit = memory_limit();
    if need > limit as u128 || need > isize::MAX as u128 {
        return Err(Error::new(
            ErrorKind::Memory,
            op,
            format!(
                "{what} needs {}, more than the {} memory budget (the memory available now, \
                 or what might::set_memory_limit states)",
                human_bytes(need),
                human_bytes(limit as u128)
            ),
        ));
    }
    Ok(())
}

/// [`check_bytes`] for a tensor of `shape` and `dtype`.
#[track_caller]
pub fn check_alloc(op: &str, shape: &Shape, dtype: DType) -> Result<()> {
    let what = format_args!("{shape} {dtype}");
    // every dim but the empty ones: kernels index with such products, so an empty tensor
    // with one may not pass either
    let span = shape.dims().iter().filter(|&&d| d > 0);
    if span.fold(1u128, |a, &d| a.saturating_mul(d as u128)) > isize::MAX as u128 {
        return Err(Error::shape(op, format!("{what} has too many elements")));
    }
    let elems = shape
        .dims()
        .iter()
        .fold(1u128, |a, &d| a.saturating_mul(d as u128));
    check_bytes(op, &what, elems, dtype.size_in_bytes() as u128)
}

/// A vector of `n` copies of `v`, or an error where the allocator refuses (instead of the
/// abort `vec![v; n]` gives).
#[track_caller]
pub fn try_filled<T: Clone>(op: &str, v: T, n: usize) -> Result<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| {
        Error::new(
            ErrorKind::Memory,
            op,
            format!(
                "could not allocate {} ({n} elements)",
                human_bytes((n as u128).saturating_mul(std::mem::size_of::<T>() as u128))
            ),
        )
    })?;
    out.resize(n, v);
    Ok(out)
}
