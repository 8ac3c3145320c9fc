//! Weights kept in a kernel's own layout (Winograd's transformed filters, the channel-blocked
//! conv's packed filters) from one call to the next: inference runs the same layers over and
//! over, and rearranging a large layer's weights on every call costs as much as reading them.
//!
//! Keyed by the weights' *contents*, never by where they live: a hit compares every element
//! with the copy kept beside the packed form, so weights changed in place or a freed buffer
//! reused for other weights can never hand out a stale packing. To keep training (new weights
//! every step) from filling memory with packings that are never reused, a layer is kept only
//! when the same buffer comes back with the same sampled values: its first call just leaves a
//! fingerprint. Bounded by [`LIMIT`] bytes, least recently used out first;
//! [`super::pool::empty_cache`] clears it.

use super::conv::ConvFloat;
use std::any::Any;
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
    let print = fingerprint(w, kind);
    let addr = w.as_ptr() as usize;
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
        }
        let used = cache.clock;
        cache.bytes += bytes;
        cache.slots.push(Slot {
            entry: entry.clone(),
            print,
            bytes,
            used,
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
}
