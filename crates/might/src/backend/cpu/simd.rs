//! Runtime dispatch to an AVX-512 or AVX2+FMA build of a kernel loop (on WebAssembly: a
//! simd128 build).
//!
//! The crate is compiled for baseline x86-64 (SSE2) so the binary runs on any x86-64 CPU.
//! [`run`] calls a closure from inside a `#[target_feature(enable = "avx512f,avx2,fma")]` (or
//! `"avx2,fma"`) function when the CPU has those features: the closure (and the `#[inline]`
//! helpers it calls, such as [`super::vmath`]) inline into it, so LLVM compiles the whole loop
//! 16 or 8 lanes wide. On wasm32 the same point calls it inside a `simd128` function (4 lanes),
//! so one binary holds both builds and tests compare them. Elsewhere the closure simply runs. (On an
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

#[cfg(target_arch = "wasm32")]
mod imp {
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Whether the simd128 build runs: on unless a test (or a caller that must reproduce the
    /// scalar results) turns it off. WebAssembly has no feature probe: a module holding SIMD
    /// instructions does not load at all on an engine without them, and every browser since
    /// 2021 (Chrome 91, Firefox 89, Safari 16.4) and Node 16 has them.
    static SIMD128: AtomicBool = AtomicBool::new(true);

    /// 1 = the simd128 build, 0 = scalar. (The x86 levels' explicit-intrinsics kernels are
    /// not compiled here, so no kernel reads 2.)
    #[inline]
    pub fn level() -> u8 {
        SIMD128.load(Ordering::Relaxed) as u8
    }

    /// Turn the simd128 build on or off, for our kernels and the `gemm` crate's alike (its
    /// own switch: products are the bulk of the work).
    pub fn set_simd128(on: bool) {
        SIMD128.store(on, Ordering::Relaxed);
        gemm::set_wasm_simd128(on);
    }

    /// No AVX2 on WebAssembly.
    #[cfg(test)]
    #[inline]
    pub fn has_avx2() -> bool {
        false
    }

    #[target_feature(enable = "simd128")]
    fn call_simd128<R>(f: impl FnOnce() -> R) -> R {
        f()
    }

    #[inline]
    pub fn run<R>(f: impl FnOnce() -> R) -> R {
        if level() == 1 {
            call_simd128(f)
        } else {
            f()
        }
    }
}

#[cfg(not(any(target_arch = "x86", target_arch = "x86_64", target_arch = "wasm32")))]
mod imp {
    /// No SIMD dispatch on this architecture: the baseline build.
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

/// Turn WebAssembly's simd128 build on or off (on by default).
#[cfg(target_arch = "wasm32")]
pub use imp::set_simd128;
