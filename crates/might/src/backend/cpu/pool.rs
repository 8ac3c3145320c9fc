//! A cache of freed float (and index) buffers, reused for the next output of the same length.
//!
//! Why: a training step allocates the same activation and gradient sizes every iteration. Large
//! blocks come back from glibc as fresh pages (it serves them with `mmap` or trims them off the
//! heap when freed), so every step pays page faults plus zeroing for memory it just released —
//! about 15 % of a small GPT step. Keeping freed buffers by length and handing them out again
//! removes both, the way PyTorch's caching allocators do.
//!
//! Safe by construction: a cached `Vec` is fully initialised (it held a tensor), so a reused
//! buffer only has stale values. Kernels that take one via [`output`] must write every element;
//! [`zeroed`] clears it first for those that accumulate.
//!
//! Bounded: buffers under [`MIN_BYTES`] are left to malloc (its bins already reuse them fast);
//! a length's bin keeps at most as many buffers as kernels ever asked for at once without
//! finding one (so buffers freed by paths that allocate elsewhere do not pile up); the cache
//! holds at most [`cache_limit`] bytes and drops its buffers when a new one would overflow it
//! (so a change of working set, e.g. train → eval sizes, cannot pin stale memory).
//! [`empty_cache`] frees everything now.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Buffers smaller than this are not cached.
pub const MIN_BYTES: usize = 32 * 1024;

/// Default cap on cached bytes (`MIGHT_BUFFER_CACHE_MB` overrides; 0 disables the cache).
const DEFAULT_LIMIT: usize = 512 << 20;

/// The cache's contents, per element type and length.
#[doc(hidden)]
#[derive(Default)]
pub struct Bins {
    f32: HashMap<usize, Bin<f32>>,
    f64: HashMap<usize, Bin<f64>>,
    i64: HashMap<usize, Bin<i64>>,
    bytes: usize,
}

/// Free buffers of one length, and how many of them are worth keeping: one more each time a
/// kernel asked and found none. So a bin grows to the most buffers of its length a step needs
/// at once, and frees beyond that (buffers some other path allocated) go back to malloc.
#[doc(hidden)]
pub struct Bin<T> {
    free: Vec<Vec<T>>,
    want: usize,
}
impl<T> Default for Bin<T> {
    fn default() -> Self {
        Bin {
            free: Vec::new(),
            want: 0,
        }
    }
}

static BINS: Mutex<Option<Bins>> = Mutex::new(None);
static LIMIT: OnceLock<AtomicUsize> = OnceLock::new();

fn limit() -> &'static AtomicUsize {
    LIMIT.get_or_init(|| {
        let mb = std::env::var("MIGHT_BUFFER_CACHE_MB")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok());
        AtomicUsize::new(mb.map_or(DEFAULT_LIMIT, |m| m << 20))
    })
}

/// The most bytes the buffer cache keeps.
pub fn cache_limit() -> usize {
    limit().load(Ordering::Relaxed)
}

/// Set the cache cap in bytes (0 disables caching); frees what no longer fits.
pub fn set_cache_limit(bytes: usize) {
    limit().store(bytes, Ordering::Relaxed);
    empty_cache();
}

/// Free every cached buffer (like `torch.cuda.empty_cache`, for CPU memory).
pub fn empty_cache() {
    super::packed_cache::clear();
    let old = BINS.lock().map(|mut g| g.take()).unwrap_or(None);
    drop(old); // freed outside the lock
}

/// Bytes currently held by the cache.
pub fn cached_bytes() -> usize {
    BINS.lock()
        .ok()
        .and_then(|g| g.as_ref().map(|b| b.bytes))
        .unwrap_or(0)
}

/// Element types whose buffers are cached: the floats, and i64 for the indices max pooling
/// returns every step.
pub trait Pooled: Copy + Default + Send + 'static {
    #[doc(hidden)]
    fn bins(b: &mut Bins) -> &mut HashMap<usize, Bin<Self>>;
}
impl Pooled for f32 {
    fn bins(b: &mut Bins) -> &mut HashMap<usize, Bin<f32>> {
        &mut b.f32
    }
}
impl Pooled for f64 {
    fn bins(b: &mut Bins) -> &mut HashMap<usize, Bin<f64>> {
        &mut b.f64
    }
}
impl Pooled for i64 {
    fn bins(b: &mut Bins) -> &mut HashMap<usize, Bin<i64>> {
        &mut b.i64
    }
}

/// The free buffers of one bin.
type Freed<T> = Vec<Vec<T>>;
/// Buffers dropped from every bin at once when the cache overflows.
type Evicted = (Vec<Freed<f32>>, Vec<Freed<f64>>, Vec<Freed<i64>>);

fn bytes_of<T>(len: usize) -> usize {
    len * std::mem::size_of::<T>()
}

/// A buffer of `len` elements with unspecified (but initialised) contents: the caller must
/// overwrite all of it. Any element type may ask; only f32, f64 and i64 buffers are cached.
pub fn output<T: Copy + Default + 'static>(len: usize) -> Vec<T> {
    reused(len).unwrap_or_else(|| vec![T::default(); len])
}

/// A zero-filled buffer of `len` elements, or an error where the allocator refuses it (the
/// creation ops' path: their sizes come from users and files).
#[track_caller]
pub fn try_zeroed<T: Copy + Default + 'static>(len: usize) -> crate::Result<Vec<T>> {
    match reused::<T>(len) {
        Some(mut v) => {
            v.fill(T::default());
            Ok(v)
        }
        None => crate::limits::try_filled("zeros", T::default(), len),
    }
}

/// A cached buffer of `len` elements, if the cache holds one.
fn reused<T: Copy + Default + 'static>(len: usize) -> Option<Vec<T>> {
    fn cached<T: Pooled>(len: usize) -> Option<Vec<T>> {
        let mut g = BINS.lock().ok()?;
        let b = g.get_or_insert_with(Bins::default);
        let bin = T::bins(b).entry(len).or_default();
        match bin.free.pop() {
            Some(v) => {
                b.bytes -= bytes_of::<T>(len);
                Some(v)
            }
            None => {
                bin.want += 1; // a miss: keep one more buffer of this length from now on
                None
            }
        }
    }
    fn boxed<U: 'static, T: 'static>(v: Option<Vec<U>>) -> Option<Vec<T>> {
        let any: Box<dyn Any> = Box::new(v?);
        any.downcast::<Vec<T>>().ok().map(|b| *b)
    }
    if bytes_of::<T>(len) < MIN_BYTES || cache_limit() == 0 {
        return None;
    }
    let id = TypeId::of::<T>();
    if id == TypeId::of::<f32>() {
        boxed(cached::<f32>(len))
    } else if id == TypeId::of::<f64>() {
        boxed(cached::<f64>(len))
    } else if id == TypeId::of::<i64>() {
        boxed(cached::<i64>(len))
    } else {
        None
    }
}

/// A copy of `src` in a (possibly reused) buffer: `src.to_vec()` without the fresh pages.
pub fn copied<T: Copy + Default + 'static>(src: &[T]) -> Vec<T> {
    let mut v = output::<T>(src.len());
    v.copy_from_slice(src);
    v
}

/// A zero-filled buffer of `len` elements.
pub fn zeroed<T: Copy + Default + 'static>(len: usize) -> Vec<T> {
    let mut v = output::<T>(len);
    v.fill(T::default());
    v
}

/// Give a buffer back (called when a tensor's storage is dropped). Kept only if kernels have
/// asked for that length more often than the cache could serve, and while under the cap.
pub fn recycle<T: Pooled>(v: Vec<T>) {
    let bytes = bytes_of::<T>(v.len());
    let cap = cache_limit();
    if bytes < MIN_BYTES || bytes > cap / 4 {
        return; // small: malloc is fast; huge: one buffer may not take over the cache
    }
    // buffers dropped when the cache overflows, freed after the lock is released
    let mut evicted: Evicted = Default::default();
    if let Ok(mut g) = BINS.lock() {
        let b = g.get_or_insert_with(Bins::default);
        match T::bins(b).get(&v.len()) {
            Some(bin) if bin.free.len() < bin.want => {}
            _ => return, // not asked for (or enough kept): back to malloc
        }
        if b.bytes + bytes > cap {
            // keep the lengths and their counts, drop the buffers
            evicted.0 = b
                .f32
                .values_mut()
                .map(|x| std::mem::take(&mut x.free))
                .collect();
            evicted.1 = b
                .f64
                .values_mut()
                .map(|x| std::mem::take(&mut x.free))
                .collect();
            evicted.2 = b
                .i64
                .values_mut()
                .map(|x| std::mem::take(&mut x.free))
                .collect();
            b.bytes = 0;
        }
        b.bytes += bytes;
        T::bins(b).entry(v.len()).or_default().free.push(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_and_bounds() {
        // unique lengths so parallel tests using the cache do not interfere
        let n = 123_457;
        let mut v = output::<f32>(n);
        v.iter_mut().for_each(|x| *x = 7.0);
        let p = v.as_ptr();
        recycle(v);
        let w = output::<f32>(n);
        assert_eq!(w.as_ptr(), p, "same-length buffer is reused");
        assert_eq!(w[n - 1], 7.0, "contents are stale, not cleared");
        recycle(w);
        let z = zeroed::<f32>(n);
        assert!(z.iter().all(|&x| x == 0.0));
        // a length a kernel asked for is kept and counted; others are not
        let m = 54_321;
        let w = output::<f64>(m);
        let before = cached_bytes();
        recycle(w);
        assert_eq!(cached_bytes(), before + m * 8);
        let before = cached_bytes();
        recycle(vec![1f64; 54_323]); // never asked for
        recycle(vec![1f64; m]); // asked for once, one already kept
        recycle(vec![1f64; 10]);
        assert_eq!(cached_bytes(), before);
    }
}
