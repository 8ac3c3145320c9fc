//! Weights kept in a kernel's own layout (Winograd's transformed filters, the channel-blocked
//! conv's packed filters) from one call to the next: inference runs the same layers over and
//! over, and rearranging a large layer's weights on every call costs as much as reading them.
//!
//! Keyed by the weights' *contents*: a hit compares every element with the copy kept beside
//! the packed form, so weights changed in place or a freed buffer reused for other weights can
//! never hand out a stale packing. To keep training (new weights every step) from filling
//! memory with packings that are never reused, a layer is kept only when the same buffer comes
//! back with the same sampled values: its first call just leaves a fingerprint. Bounded by
//! [`LIMIT`] bytes, least recently used out first; [`super::pool::empty_cache`] clears it.
//!
//! The comparison reads the weights twice more (ResNet-18's 256-channel layers: 4.7 MB a call),
//! so a packing is also served *without* it, like onnxruntime's packed-at-load weights, when
//! the cache can tell the weights have not changed since it last compared them: the weights
//! are a live tensor buffer the dispatcher vouched for ([`vouched`]: only the conv entry point
//! does, never a kernel's temporary), and since that comparison the buffer has been neither
//! written ([`forget`] from `Tensor::storage_mut`, the one way to write a tensor's buffer)
//! nor freed ([`forget`] from the buffer's drop, the one way its memory goes back). Either
//! clears the slot's `fast` mark, and the next call compares again.
use super::conv::ConvFloat;
use std::any::Any;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Most bytes of packings (and weight copies) kept.
const LIMIT: usize = 256 << 20;
/// Fingerprints of recent first calls remembered.
const SEEN: usize = 256;
/// Elements sampled for a fingerprint.
const SAMPLES: usize = 64;

/// One layer's packed weights and the weights they were made from.
pub(super) struct Entry<T, P> {
    w: Vec<T>,
    pub(super) packed: P,
}

struct Slot {
    entry: Arc<dyn Any + Send + Sync>,
    print: u64,
    bytes: usize,
    used: u64,
    kind: u64,
    /// Served without comparing while set: the vouched buffer at `addr` (`len` bytes) held
    /// these weights when last compared and has not been written or freed since.
    fast: bool,
    addr: usize,
    len: usize,
}

/// Slots marked `fast` (a buffer's drop skips the lock while there are none).
static FAST: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The weights the running conv call vouched for: (address, bytes).
    static VOUCHED: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// Run `f` (a conv kernel) with `w` vouched for: a slice of a live tensor buffer, borrowed for
/// the whole call, whose writes and drop reach [`forget`]. Only the dispatcher may say so.
pub(crate) fn vouched<T, R>(w: &[T], f: impl FnOnce() -> R) -> R {
    let key = (w.as_ptr() as usize, std::mem::size_of_val(w));
    let before = VOUCHED.with(|v| v.replace(key));
    let r = f();
    VOUCHED.with(|v| v.set(before));
    r
}

/// The `bytes` bytes at `addr` are about to be written or freed: no packing made from them is
/// served unchecked any more.
pub(crate) fn forget(addr: usize, bytes: usize) {
    if FAST.load(Ordering::Acquire) == 0 || bytes == 0 {
        return;
    }
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    for slot in cache.slots.iter_mut() {
        if slot.fast && slot.addr < addr + bytes && addr < slot.addr + slot.len {
            slot.fast = false;
            FAST.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

struct Cache {
    slots: Vec<Slot>,
    /// (buffer address, fingerprint) of recent calls not kept yet
    seen: Vec<(usize, u64)>,
    bytes: usize,
    clock: u64,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache {
    slots: Vec::new(),
    seen: Vec::new(),
    bytes: 0,
    clock: 0,
});

/// The weights' length, the packing's `kind` and sampled values, hashed (FNV-1a).
fn fingerprint<T: ConvFloat>(w: &[T], kind: u64) -> u64 {
    let step = (w.len() / SAMPLES).max(1);
    let mut h = (0xcbf2_9ce4_8422_2325u64 ^ w.len() as u64).wrapping_mul(0x100_0000_01b3) ^ kind;
    for v in w.iter().step_by(step) {
        h = (h ^ v.to_f64().unwrap_or(0.0).to_bits()).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// Whether two buffers hold the same bits (libc's `memcmp`, three times the speed of an
/// element loop: 1.5 ms of ResNet-18's run went to these checks). Bits, not `==`: a NaN
/// weight matches itself (its packing was made from those very bits) and `-0.0` misses `0.0`
/// (packed again: safe).
fn same<T: ConvFloat>(a: &[T], b: &[T]) -> bool {
    let bytes = |v: &[T]| {
        // SAFETY: `T` is f32 or f64 (plain bits, no padding), so every byte of the slice is
        // initialised and readable as `u8` for its whole length.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
    };
    a.len() == b.len() && bytes(a) == bytes(b)
}

/// The packing of weights `w` that `make` computes (returning it and its size in bytes),
/// `kind` telling apart different packings of one buffer: a kept one when these weights were
/// packed this way before, else `make`'s.
pub(super) fn get<T: ConvFloat, P: Send + Sync + 'static>(
    w: &[T],
    kind: u64,
    make: impl FnOnce() -> (P, usize),
) -> Arc<Entry<T, P>> {
    let addr = w.as_ptr() as usize;
    let len = std::mem::size_of_val(w);
    let vouched = VOUCHED.with(|v| v.get()) == (addr, len);
    if vouched {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        cache.clock += 1;
        let now = cache.clock;
        for slot in cache.slots.iter_mut() {
            if slot.fast && (slot.addr, slot.len, slot.kind) == (addr, len, kind) {
                if let Ok(e) = slot.entry.clone().downcast::<Entry<T, P>>() {
                    slot.used = now;
                    return e;
                }
            }
        }
    }
    let print = fingerprint(w, kind);
    let keep = {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        cache.clock += 1;
        let now = cache.clock;
        for slot in cache.slots.iter_mut() {
            if slot.print != print {
                continue;
            }
            if let Ok(e) = slot.entry.clone().downcast::<Entry<T, P>>() {
                if same(&e.w, w) {
                    slot.used = now;
                    if vouched {
                        if !slot.fast {
                            FAST.fetch_add(1, Ordering::AcqRel);
                        }
                        (slot.fast, slot.addr, slot.len) = (true, addr, len);
                    }
                    return e;
                }
            }
        }
        // kept from the second call of the same buffer with the same values on
        match cache.seen.iter().position(|&s| s == (addr, print)) {
            Some(i) => {
                cache.seen.remove(i);
                true
            }
            None => {
                if cache.seen.len() >= SEEN {
                    cache.seen.remove(0);
                }
                cache.seen.push((addr, print));
                false
            }
        }
    };
    let (packed, packed_bytes) = make();
    let bytes = packed_bytes + std::mem::size_of_val(w);
    // the weights are copied only for a packing that is kept (the copy is what hits compare)
    let entry = Arc::new(Entry {
        w: if keep { w.to_vec() } else { Vec::new() },
        packed,
    });
    if keep && bytes <= LIMIT {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        while cache.bytes + bytes > LIMIT {
            let Some(lru) = (0..cache.slots.len()).min_by_key(|&i| cache.slots[i].used) else {
                break;
            };
            let gone = cache.slots.swap_remove(lru);
            cache.bytes -= gone.bytes;
            if gone.fast {
                FAST.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let used = cache.clock;
        cache.bytes += bytes;
        if vouched {
            FAST.fetch_add(1, Ordering::AcqRel);
        }
        cache.slots.push(Slot {
            entry: entry.clone(),
            print,
            bytes,
            used,
            kind,
            fast: vouched,
            addr,
            len,
        });
    }
    entry
}

/// Drop every kept packing.
pub(super) fn clear() {
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.slots.clear();
    cache.seen.clear();
    cache.bytes = 0;
    FAST.store(0, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How a vouched buffer's packing is served: made on the first two calls (kept on the
    /// second), compared on the third, then unchecked until the buffer is forgotten.
    #[test]
    fn vouched_packings_are_unchecked_until_forgotten() {
        let mut w: Vec<f32> = (0..4096).map(|i| (i as f32 * 0.37).sin() + 7.25).collect();
        let made = std::cell::Cell::new(0);
        let get_sum = |w: &[f32]| {
            vouched(w, || {
                get(w, 77, || {
                    made.set(made.get() + 1);
                    (w.iter().sum::<f32>(), 4)
                })
                .packed
            })
        };
        let sum = get_sum(&w);
        assert_eq!(get_sum(&w), sum);
        assert_eq!(made.get(), 2, "kept from the second call");
        assert_eq!(get_sum(&w), sum);
        assert_eq!(made.get(), 2, "compared and served");
        // served without comparing: a change nobody announced is not seen (what `forget`
        // from `storage_mut` and the buffer's drop exist for)
        w[100] += 1.0;
        assert_eq!(get_sum(&w), sum, "served unchecked");
        assert_eq!(made.get(), 2);
        forget(w.as_ptr() as usize + 400, 4);
        let new_sum: f32 = w.iter().sum();
        assert_eq!(get_sum(&w), new_sum, "checked again after forget");
        assert_eq!(made.get(), 3);
        // not vouched: always compared
        w[7] -= 2.0;
        let sum = get(&w, 77, || (w.iter().sum::<f32>(), 4)).packed;
        assert_eq!(sum, w.iter().sum::<f32>());
    }
}
