//! The direct kernel's products for rows of at most 16 positions, f32 on AVX-512, written with
//! intrinsics: one vector of positions by 16 output rows (two packed blocks sharing each input
//! load), so that the 16 accumulators stay in registers.
//!
//! Why by hand: a Winograd layer at 14x14 (ResNet's 256 channels) has 16 tiles, so each of its
//! 36 products is 16 positions wide. The generic tile loop at that width compiled to
//! accumulators kept in memory and moved with gathers and scatters (12.9 ms instead of 1.5 for
//! the layer), and at the two-vector width it computes 16 spare positions, half its work.

use super::conv_direct::RF;

/// Positions per row here: one AVX-512 vector of f32.
pub(super) const WIDTH: usize = 16;

/// `out[o][p] = Σ_k w[o][k] · x[off[k] + p]` for `p < 16` and every packed row `o`: `w` holds
/// blocks of [`RF`] rows, each `[off.len()][RF]`; row `o` of `out` starts at `o * ldo`.
/// Returns false (touching nothing) where the CPU lacks AVX-512F or the buffers do not fit.
pub(super) fn products16(x: &[f32], off: &[usize], w: &[f32], out: &mut [f32], ldo: usize) -> bool {
    let klen = off.len();
    if klen == 0 || !w.len().is_multiple_of(klen * RF) || ldo < WIDTH {
        return false;
    }
    let rows = w.len() / klen;
    let reach = off.iter().max().map_or(0, |&m| m + WIDTH);
    let fits = x.len() >= reach && out.len() >= (rows - 1) * ldo + WIDTH;
    #[cfg(target_arch = "x86_64")]
    if fits && super::simd::level() >= 2 {
        // SAFETY: the CPU has AVX-512F (level 2); every load `x[off[k]..off[k] + 16]` lies in
        // `x` (`reach <= x.len()`), every weight read `w[(b * klen + k) * RF + r]` in `w`
        // (`b < rows / RF`, `k < klen`, `r < RF`), every store `out[o * ldo..o * ldo + 16]`
        // in `out` (`o < rows`): the contract of `imp::all`.
        unsafe { imp::all(x, off, w, out, ldo) };
        return true;
    }
    let _ = fits;
    false
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::{RF, WIDTH};
    use std::arch::x86_64::*;

    /// Every block of `w`, two at a time, then the odd one.
    ///
    /// # Safety
    /// AVX-512F; the bounds [`super::products16`] checks.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn all(x: &[f32], off: &[usize], w: &[f32], out: &mut [f32], ldo: usize) {
        let klen = off.len();
        let blocks = w.len() / (klen * RF);
        let mut b = 0;
        while b + 2 <= blocks {
            // SAFETY: blocks b and b + 1 exist; the rest is the caller's contract.
            unsafe { tile::<2>(x, off, w, out, ldo, b) };
            b += 2;
        }
        if b < blocks {
            // SAFETY: as above, block b.
            unsafe { tile::<1>(x, off, w, out, ldo, b) };
        }
    }

    /// `B` blocks from block `b`: `B * RF` accumulators of 16 positions.
    ///
    /// # Safety
    /// As [`all`], with blocks `b..b + B` inside `w`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn tile<const B: usize>(
        x: &[f32],
        off: &[usize],
        w: &[f32],
        out: &mut [f32],
        ldo: usize,
        b: usize,
    ) {
        let klen = off.len();
        let mut acc = [[_mm512_setzero_ps(); RF]; B];
        // SAFETY (the whole block): pointers stay inside the slices, per the contract
        unsafe {
            let wb = w.as_ptr().add(b * klen * RF);
            for (k, &o) in off.iter().enumerate() {
                let xv = _mm512_loadu_ps(x.as_ptr().add(o));
                for (j, a) in acc.iter_mut().enumerate() {
                    let ws = wb.add((j * klen + k) * RF);
                    for (r, a) in a.iter_mut().enumerate() {
                        *a = _mm512_fmadd_ps(_mm512_set1_ps(*ws.add(r)), xv, *a);
                    }
                }
            }
            for (j, a) in acc.iter().enumerate() {
                for (r, a) in a.iter().enumerate() {
                    let row = (b + j) * RF + r;
                    _mm512_storeu_ps(out.as_mut_ptr().add(row * ldo), *a);
                }
            }
        }
        let _ = WIDTH;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a plain sum, over one, two and three blocks (the paired and the odd path) and
    /// shifted, overlapping reads; the rows' slots past 16 stay untouched.
    #[test]
    fn products16_matches_a_plain_sum() {
        let mut rng = crate::Generator::new(11);
        for blocks in 1..=3 {
            let klen = 7;
            let off: Vec<usize> = (0..klen).map(|k| 3 * k + k % 2).collect();
            let x: Vec<f32> = (0..off[klen - 1] + WIDTH)
                .map(|_| rng.next_f64() as f32 - 0.5)
                .collect();
            let w: Vec<f32> = (0..blocks * klen * RF)
                .map(|_| rng.next_f64() as f32 - 0.5)
                .collect();
            let ldo = WIDTH + 5;
            let mut out = vec![9.0f32; blocks * RF * ldo];
            if !products16(&x, &off, &w, &mut out, ldo) {
                return; // no AVX-512 here: nothing to compare
            }
            for o in 0..blocks * RF {
                let (b, r) = (o / RF, o % RF);
                for p in 0..ldo {
                    let got = out[o * ldo + p];
                    if p >= WIDTH {
                        assert_eq!(got, 9.0, "row {o} slot {p} written");
                        continue;
                    }
                    let want: f64 = (0..klen)
                        .map(|k| w[(b * klen + k) * RF + r] as f64 * x[off[k] + p] as f64)
                        .sum();
                    assert!(
                        (got as f64 - want).abs() < 1e-5,
                        "row {o} pos {p}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn products16_declines_what_does_not_fit() {
        let (x, w) = (vec![0.0f32; 20], vec![0.0f32; RF * 2]);
        let mut out = vec![0.0f32; RF * WIDTH];
        // the second shift reads past x
        assert!(!products16(&x, &[0, 5], &w, &mut out, WIDTH));
        // rows shorter than a vector
        assert!(!products16(&x, &[0, 1], &w, &mut out, 8));
    }
}
