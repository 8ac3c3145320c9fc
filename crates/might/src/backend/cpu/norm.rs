//! Norms of whole buffers read back as one f64 (gradient clipping).

use super::{simd, threads, CpuStorage};
use crate::backend::norm_part_of;
use crate::Layout;

/// `Σ|x|^p` (max `|x|` for infinite `p`) of a contiguous f32/f64 buffer; `None` otherwise.
pub(crate) fn norm_part(s: &CpuStorage, l: &Layout, p: f64) -> Option<f64> {
    let (a, b) = l.contiguous_range()?;
    Some(match s {
        CpuStorage::F32(v) if p == 2.0 => sum_squares(&v[a..b]),
        CpuStorage::F64(v) if p == 2.0 => sum_squares(&v[a..b]),
        CpuStorage::F32(v) => norm_part_of(&mut v[a..b].iter().map(|&x| x as f64), p),
        CpuStorage::F64(v) => norm_part_of(&mut v[a..b].iter().copied(), p),
        _ => return None,
    })
}

/// `Σ x²` in f64: 16 interleaved partial sums in the widest SIMD build, blocks on the kernel
/// threads. (One running f64 sum is a chain of dependent adds: clipping a small GPT's 0.8 M
/// gradients took ~0.6 ms of its training step.)
fn sum_squares<T: Copy + Into<f64> + Sync>(v: &[T]) -> f64 {
    const LANES: usize = 16;
    let part = |c: &[T]| -> f64 {
        simd::run(
            #[inline(always)]
            || {
                let mut acc = [0.0f64; LANES];
                let mut it = c.chunks_exact(LANES);
                for ch in &mut it {
                    for (a, &x) in acc.iter_mut().zip(ch) {
                        let x: f64 = x.into();
                        *a += x * x;
                    }
                }
                let tail: f64 = it.remainder().iter().map(|&x| x.into() * x.into()).sum();
                acc.iter().sum::<f64>() + tail
            },
        )
    };
    if threads::parallel(v.len()) {
        let chunk = v.len().div_ceil(threads::get_num_threads() * 4);
        threads::map(v.len().div_ceil(chunk), |i| {
            part(&v[i * chunk..((i + 1) * chunk).min(v.len())])
        })
        .into_iter()
        .sum()
    } else {
        part(v)
    }
}
