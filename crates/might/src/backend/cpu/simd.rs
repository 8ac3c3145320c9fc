//! Runtime dispatch to an AVX-512 or AVX2+FMA build of a kernel loop.
//!
//! The crate is compiled for baseline x86-64 (SSE2) so the binary runs on any x86-64 CPU.
//! [`run`] calls a closure from inside a `#[target_feature(enable = "avx512f,avx2,fma")]` (or
//! `"avx2,fma"`) function when the CPU has those features: the closure (and the `#[inline]`
//! helpers it calls, such as [`super::vmath`]) inline into it, so LLVM compiles the whole loop
//! 16 or 8 lanes wide. Elsewhere, and on other architectures, the closure simply runs. (On an
//! AVX-512 Xeon the wider build made exp 27 %, GELU 64 % and softmax 20-35 % faster.)
//!
//! Kernels run this way must not use `mul_add`: FMA contraction would make the paths round
//! differently. With plain mul/add every path gives bit-identical results (tested).

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod imp {
    use std::sync::atomic::{AtomicU8, Ordering};

    /// The probed level plus one; 0 = not probed yet.
    static LEVEL: AtomicU8 = AtomicU8::new(0);

    /// The widest build this CPU runs: 2 = AVX-512F with AVX2+FMA, 1 = AVX2+FMA, 0 = baseline
    /// (probed once, then cached).
    #[inline]
    pub fn level() -> u8 {
        match LEVEL.load(Ordering::Relaxed) {
            0 => {
                let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
                let l = if !avx2 {
                    0
                } else if is_x86_feature_detected!("avx512f") {
                    2
                } else {
                    1
                };
                LEVEL.store(l + 1, Ordering::Relaxed);
                l
            }
            l => l - 1,
        }
    }

    /// Whether the CPU has AVX2 and FMA.
    #[cfg(test)]
    #[inline]
    pub fn has_avx2() -> bool {
        level() >= 1
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn call_avx2<R>(f: impl FnOnce() -> R) -> R {
        f()
    }

    #[cfg(not(fuzzing))]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn call_avx512<R>(f: impl FnOnce() -> R) -> R {
        f()
    }

    #[inline]
    pub fn run<R>(f: impl FnOnce() -> R) -> R {
        match level() {
            // SAFETY: level 2 means `is_x86_feature_detected!` found AVX-512F, AVX2 and FMA,
            // all `call_avx512` requires.
            #[cfg(not(fuzzing))]
            2 => unsafe { call_avx512(f) },
            // SAFETY: level 2 also means AVX2 and FMA were found. (Fuzz builds leave the
            // AVX-512 build out: a nightly LLVM fails to compile one kernel there under
            // coverage instrumentation, and the fuzzers target the parsers.)
            #[cfg(fuzzing)]
            2 => unsafe { call_avx2(f) },
            // SAFETY: level 1 means it found AVX2 and FMA, all `call_avx2` requires.
            1 => unsafe { call_avx2(f) },
            _ => f(),
        }
    }
}

#[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
mod imp {
    /// No x86 SIMD dispatch on this architecture: the baseline build.
    #[inline]
    pub fn level() -> u8 {
        0
    }

    /// No x86 SIMD dispatch on this architecture.
    #[cfg(test)]
    #[inline]
    pub fn has_avx2() -> bool {
        false
    }

    #[inline]
    pub fn run<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}

/// Whether [`run`] takes the AVX2+FMA path on this CPU (printed by the kernel tests).
#[cfg(test)]
pub use imp::has_avx2;

/// The widest build [`run`] takes here: 2 AVX-512F (with AVX2+FMA), 1 AVX2+FMA, 0 baseline.
/// Kernels with their own builds dispatch on it.
pub use imp::level;

/// Run `f`, compiled for AVX2+FMA when the CPU has them (see the module docs).
pub use imp::run;
