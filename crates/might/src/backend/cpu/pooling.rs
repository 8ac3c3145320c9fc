//! Pooling kernels (max, average, adaptive average) over dense `[planes, H, W]` buffers, one
//! plane per (sample, channel), split across threads by plane.

use super::conv::ConvFloat;
use super::threads;
use std::sync::Mutex;

pub use crate::backend::geom::PoolGeom;

impl PoolGeom {
    /// Window along one axis for output index `o`: `[start, end)` clipped to the input, plus
    /// the unclipped length (inside the padded input) used by `count_include_pad`.
    #[inline]
    pub(super) fn window(
        o: usize,
        k: usize,
        s: usize,
        pad: usize,
        len: usize,
    ) -> (usize, usize, usize) {
        let start = (o * s) as isize - pad as isize;
        let end = (start + k as isize).min((len + pad) as isize);
        let full = (end - start) as usize;
        (start.max(0) as usize, (end.max(0) as usize).min(len), full)
    }
}

/// Run `f(plane_index, in_plane, out_plane)` over all planes, in parallel when large.
fn for_planes<T: Send + Sync, U: Send>(
    input: &[T],
    in_len: usize,
    out: &mut [U],
    out_len: usize,
    work: usize,
    f: impl Fn(&[T], &mut [U]) + Sync + Send,
) {
    if in_len == 0 || out_len == 0 {
        return;
    }
    if threads::parallel(work) {
        threads::for_each_chunk(out, out_len, |j, o| {
            f(&input[j * in_len..(j + 1) * in_len], o)
        });
    } else {
        out.chunks_mut(out_len)
            .zip(input.chunks(in_len))
            .for_each(|(o, i)| f(i, o));
    }
}

/// Max pooling. Returns the maxima and, for each, the flat index (`iy * W + ix`) of the input
/// element it came from (PyTorch's `return_indices`). NaN wins, as in PyTorch.
pub fn max_pool2d_forward<T: ConvFloat>(x: &[T], g: &PoolGeom) -> (Vec<T>, Vec<i64>) {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    assert_eq!(x.len(), g.planes * hw, "max_pool2d: buffer size");
    // every output is written (each window holds at least one element)
    let mut vals = super::pool::output::<T>(g.planes * ohw);
    let mut idx = super::pool::output::<i64>(g.planes * ohw);
    if hw == 0 || ohw == 0 {
        return (vals, idx);
    }
    let pair = g.pair();
    let plane = |((vp, ip), xp): ((&mut [T], &mut [i64]), &[T])| {
        if pair {
            return max_pool_2x2(xp, vp, ip, g);
        }
        max_pool_rows(xp, vp, ip, g)
    };
    if threads::parallel(vals.len() * g.kernel[0] * g.kernel[1]) {
        let planes: Vec<Mutex<_>> = vals
            .chunks_mut(ohw)
            .zip(idx.chunks_mut(ohw))
            .map(Mutex::new)
            .collect();
        threads::run(planes.len(), |j| {
            let (vp, ip) = &mut *planes[j].lock().unwrap();
            plane(((vp, ip), &x[j * hw..(j + 1) * hw]))
        });
    } else {
        vals.chunks_mut(ohw)
            .zip(idx.chunks_mut(ohw))
            .zip(x.chunks(hw))
            .for_each(plane);
    }
    (vals, idx)
}

/// Max pooling's values alone, for inference (no gradient to route, so no indices). NaN
/// wins, as in PyTorch.
pub fn max_pool2d_values<T: ConvFloat>(x: &[T], g: &PoolGeom) -> Vec<T> {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    assert_eq!(x.len(), g.planes * hw, "max_pool2d: buffer size");
    // every output is written (each window holds at least one element)
    let mut vals = super::pool::output::<T>(g.planes * ohw);
    let work = vals.len() * g.kernel[0] * g.kernel[1];
    for_planes(x, hw, &mut vals, ohw, work, |xp, vp| {
        super::simd::run(
            #[inline(always)]
            || max_plane(xp, vp, g),
        )
    });
    vals
}

/// `a`, unless `b` is greater or NaN (a NaN, once taken, stays). A function, not a closure:
/// a closure is not always inlined into the vector build, and one call per element is slow.
#[inline(always)]
fn greater<T: ConvFloat>(a: T, b: T) -> T {
    if b > a || b.is_nan() {
        b
    } else {
        a
    }
}

/// One plane of [`max_pool2d_values`], separably: each input row's maxima over every
/// window's columns (the row padded with `-inf` and dealt into its stride phases, as in
/// [`max_pool_rows`]), then each output row's maximum over its window's rows of those.
#[inline(always)]
fn max_plane<T: ConvFloat>(xp: &[T], vp: &mut [T], g: &PoolGeom) {
    if let (Some(x), Some(v)) = (T::as_f32(xp), T::as_f32_mut(vp)) {
        if super::max_pool_simd::plane_k3s2_f32(x, g, v) {
            return;
        }
    }
    let ([kh, kw], [sh, sw], [ph, pw]) = (g.kernel, g.stride, g.padding);
    let (w, ow) = (g.w, g.ow);
    let plen = ow + kw.div_ceil(sw);
    let mut phases = vec![T::neg_infinity(); sw * plen];
    let mut padded = vec![T::neg_infinity(); sw * plen];
    // `across[iy]`: row `iy`'s maximum over each output column's window
    let mut across = vec![T::neg_infinity(); g.h * ow];
    for (row, acc) in xp.chunks_exact(w).zip(across.chunks_exact_mut(ow)) {
        pad_and_deal(row, pw, sw, &mut padded, &mut phases);
        let cand = |dx: usize| &phases[(dx % sw) * plen + dx / sw..][..ow];
        max_of(acc, kw, cand);
    }
    for (oy, out) in vp.chunks_exact_mut(ow).enumerate() {
        let (y0, y1, _) = PoolGeom::window(oy, kh, sh, ph, g.h);
        max_of(out, y1 - y0, |i| &across[(y0 + i) * ow..][..ow]);
    }
}

/// `out[j] = max over i < n of rows(i)[j]` (`-inf` when `n == 0`), NaN winning: blocks of 16
/// outputs, then 8, then one at a time.
#[inline(always)]
fn max_of<'a, T: ConvFloat + 'a>(out: &mut [T], n: usize, rows: impl Fn(usize) -> &'a [T]) {
    let j = max_blocks::<T, 16>(out, 0, n, &rows);
    let j = max_blocks::<T, 8>(out, j, n, &rows);
    max_blocks::<T, 1>(out, j, n, &rows);
}

/// [`max_of`] over the whole blocks of `B` outputs from `j0` on; returns where they end.
/// Each block is kept in a local array (registers) while the rows go by: updating `out` in
/// place instead compiled to masked stores, which the next row's loads wait on (3x slower).
#[inline(always)]
fn max_blocks<'a, T: ConvFloat + 'a, const B: usize>(
    out: &mut [T],
    j0: usize,
    n: usize,
    rows: &impl Fn(usize) -> &'a [T],
) -> usize {
    let end = j0 + (out.len() - j0) / B * B;
    for j in (j0..end).step_by(B) {
        let mut m = [T::neg_infinity(); B];
        for i in 0..n {
            let r: &[T; B] = rows(i)[j..j + B].try_into().expect("a block");
            for (a, &b) in m.iter_mut().zip(r) {
                *a = greater(*a, b);
            }
        }
        out[j..j + B].copy_from_slice(&m);
    }
    end
}

/// Any max pool of one plane, a whole output row at a time so that the loops vectorise (the
/// per-window scalar scan took 2.3 ms on ResNet-18's 3x3 stride-2 stem pool, 64 planes of
/// 112x112, one thread; this 1.0-1.4). Each input row is padded with `-inf` and dealt into its
/// `stride` phases, `phase[r][j] = row[j * stride + r]`, so window column `dx` of every output
/// is the contiguous run `phase[dx % stride][dx / stride..]`; the window's elements are
/// visited in the plain scan's order (row-major; the first maximum wins, the first NaN wins)
/// with selects instead of branches.
fn max_pool_rows<T: ConvFloat>(xp: &[T], vp: &mut [T], ip: &mut [i64], g: &PoolGeom) {
    // Indices as wide as the values while they are compared (a select on 32-bit lanes for
    // f32), widened once per row; i32 holds every candidate's, padding's included (at most
    // a row and a kernel past the plane). The loops inline into the vector build whole (a
    // closure of this size did not, and compiled for baseline SSE2).
    if g.h * g.w + 2 * (g.w + g.kernel[1]) < i32::MAX as usize {
        super::simd::run(
            #[inline(always)]
            || max_pool_rows_as::<T, i32>(xp, vp, ip, g),
        )
    } else {
        super::simd::run(
            #[inline(always)]
            || max_pool_rows_as::<T, i64>(xp, vp, ip, g),
        )
    }
}

/// [`max_pool_rows`] with indices of type `I` while comparing.
#[inline(always)]
fn max_pool_rows_as<T: ConvFloat, I: num_traits::PrimInt + num_traits::Signed + Into<i64>>(
    xp: &[T],
    vp: &mut [T],
    ip: &mut [i64],
    g: &PoolGeom,
) {
    let ([kh, kw], [sh, sw], [ph, pw]) = (g.kernel, g.stride, g.padding);
    let (w, ow) = (g.w, g.ow);
    let idx = |v: usize| I::from(v).expect("a plane index");
    // a phase holds every element a window reads: ow + (kw - 1) / sw of them
    let plen = ow + kw.div_ceil(sw);
    let mut phases = vec![T::neg_infinity(); sw * plen];
    let mut padded = vec![T::neg_infinity(); sw * plen];
    let mut best = vec![T::neg_infinity(); ow];
    let mut at = vec![I::zero(); ow];
    let steps: Vec<I> = (0..ow).map(|ox| idx(ox * sw)).collect();
    for oy in 0..g.oh {
        let (y0, y1, _) = PoolGeom::window(oy, kh, sh, ph, g.h);
        // until a candidate wins, the window's first real element (all -inf, or padding)
        for (ox, a) in at.iter_mut().enumerate() {
            *a = idx(y0 * w + (ox * sw).saturating_sub(pw));
        }
        best.fill(T::neg_infinity());
        for iy in y0..y1 {
            pad_and_deal(&xp[iy * w..(iy + 1) * w], pw, sw, &mut padded, &mut phases);
            for dx in 0..kw {
                let cand = &phases[(dx % sw) * plen + dx / sw..][..ow];
                // flat index of candidate ox: iy * w + dx - pw + ox * sw (padding, whose
                // index would be off the row, never wins: it is -inf)
                let base = idx(iy * w + dx) - idx(pw);
                take_greater(&mut best, &mut at, cand, base, &steps);
            }
        }
        vp[oy * ow..(oy + 1) * ow].copy_from_slice(&best);
        for (o, &a) in ip[oy * ow..(oy + 1) * ow].iter_mut().zip(&at) {
            *o = a.into();
        }
    }
}

/// One input row into `padded` after `pw` elements of `-inf` (already there; the row cut to
/// what the windows reach), then dealt into its `sw` stride phases (`plen` elements each).
#[inline(always)]
fn pad_and_deal<T: Copy>(row: &[T], pw: usize, sw: usize, padded: &mut [T], phases: &mut [T]) {
    let plen = phases.len() / sw;
    let n = row.len().min(padded.len() - pw);
    padded[pw..pw + n].copy_from_slice(&row[..n]);
    match sw {
        1 => phases.copy_from_slice(padded),
        2 => deal::<T, 2>(padded, phases, plen),
        _ => deal_by(padded, phases, plen, sw, 0),
    }
}

/// `phases[r][j] = padded[j * S + r]` (`plen` elements a phase), the stride known to the
/// compiler, which then deals with shuffles instead of gathers.
#[inline(always)]
fn deal<T: Copy, const S: usize>(padded: &[T], phases: &mut [T], plen: usize) {
    const B: usize = 16;
    let padded = &padded[..S * plen];
    let full = plen / B * B;
    for (r, ph_r) in phases.chunks_exact_mut(plen).enumerate() {
        // blocks of B outputs from fixed-size input blocks: a permute per vector, not a
        // gather, in the vector builds
        for (o, i) in ph_r[..full]
            .chunks_exact_mut(B)
            .zip(padded.chunks_exact(S * B))
        {
            for (j, v) in o.iter_mut().enumerate() {
                *v = i[j * S + r];
            }
        }
    }
    deal_by(padded, phases, plen, S, full);
}

/// [`deal`] for any stride, from element `from` of each phase on.
#[inline(always)]
fn deal_by<T: Copy>(padded: &[T], phases: &mut [T], plen: usize, s: usize, from: usize) {
    for (r, ph_r) in phases.chunks_exact_mut(plen).enumerate() {
        for (j, v) in ph_r[from..].iter_mut().enumerate() {
            *v = padded[(from + j) * s + r];
        }
    }
}

/// `best[i], at[i] = cand[i], base + steps[i]` where `cand[i]` beats `best[i]` (is greater, or
/// is the first NaN): branch-free, so that it compiles to vector compares and blends.
#[inline(always)]
fn take_greater<T: ConvFloat, I: num_traits::PrimInt>(
    best: &mut [T],
    at: &mut [I],
    cand: &[T],
    base: I,
    steps: &[I],
) {
    let n = best.len();
    let (at, cand, steps) = (&mut at[..n], &cand[..n], &steps[..n]);
    for i in 0..n {
        let (v, b) = (cand[i], best[i]);
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        let take = !(v <= b) & !b.is_nan();
        best[i] = if take { v } else { b };
        at[i] = if take { base + steps[i] } else { at[i] };
    }
}

impl PoolGeom {
    /// The common 2x2, stride-2, unpadded pool, whose windows tile the input without overlap.
    fn pair(&self) -> bool {
        self.kernel == [2, 2]
            && self.stride == [2, 2]
            && self.padding == [0, 0]
            && 2 * self.oh <= self.h
            && 2 * self.ow <= self.w
    }
}

/// The common 2x2, stride 2 max pool of one plane without window tables: the same scan order
/// (row-major, first maximum wins, NaN wins) as the general loop.
fn max_pool_2x2<T: ConvFloat>(xp: &[T], vp: &mut [T], ip: &mut [i64], g: &PoolGeom) {
    if T::max_pool_2x2_plane(xp, g.w, vp, ip, g.ow) {
        return;
    }
    let w = g.w;
    for oy in 0..g.oh {
        let r0 = &xp[2 * oy * w..2 * oy * w + w];
        let r1 = &xp[(2 * oy + 1) * w..(2 * oy + 2) * w];
        let vrow = &mut vp[oy * g.ow..(oy + 1) * g.ow];
        let irow = &mut ip[oy * g.ow..(oy + 1) * g.ow];
        for ox in 0..g.ow {
            let c = 2 * ox;
            let cand = [
                (r0[c], c),
                (r0[c + 1], c + 1),
                (r1[c], w + c),
                (r1[c + 1], w + c + 1),
            ];
            let (mut best, mut at) = cand[0];
            if !best.is_nan() {
                for &(v, i) in &cand[1..] {
                    if v > best || v.is_nan() {
                        (best, at) = (v, i);
                        if v.is_nan() {
                            break;
                        }
                    }
                }
            }
            vrow[ox] = best;
            irow[ox] = (2 * oy * w + at) as i64;
        }
    }
}

/// Max pooling backward: each output gradient goes to the input element its maximum came from.
pub fn max_pool2d_backward<T: ConvFloat>(gy: &[T], idx: &[i64], g: &PoolGeom) -> Vec<T> {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    assert!(
        gy.len() == g.planes * ohw && idx.len() == gy.len(),
        "max_pool2d_backward"
    );
    // each plane is zeroed by the thread that scatters into it, while it is in that core's
    // cache (one serial memset of the whole gradient first was a tenth of a 2-thread CNN step)
    let mut gx = super::pool::output::<T>(g.planes * hw);
    if hw == 0 || ohw == 0 {
        gx.fill(T::zero());
        return gx;
    }
    let plane = |(xp, (gp, ip)): (&mut [T], (&[T], &[i64]))| {
        xp.fill(T::zero());
        for (&v, &i) in gp.iter().zip(ip) {
            // indices come from our own forward pass; a bad one is a bug, not user input
            xp[i as usize] += v;
        }
    };
    if threads::parallel(gx.len()) {
        threads::for_each_chunk(&mut gx, hw, |j, xp| {
            let r = j * ohw..(j + 1) * ohw;
            plane((xp, (&gy[r.clone()], &idx[r])))
        });
    } else {
        gx.chunks_mut(hw)
            .zip(gy.chunks(ohw).zip(idx.chunks(ohw)))
            .for_each(plane);
    }
    gx
}

/// Average pooling, `count_include_pad = true` (the divisor counts padded positions).
pub fn avg_pool2d_forward<T: ConvFloat>(x: &[T], g: &PoolGeom) -> Vec<T> {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    assert_eq!(x.len(), g.planes * hw, "avg_pool2d: buffer size");
    let mut out = super::pool::zeroed::<T>(g.planes * ohw);
    let work = out.len() * g.kernel[0] * g.kernel[1];
    for_planes(x, hw, &mut out, ohw, work, |xp, op| {
        for oy in 0..g.oh {
            let (y0, y1, fy) = PoolGeom::window(oy, g.kernel[0], g.stride[0], g.padding[0], g.h);
            for ox in 0..g.ow {
                let (x0, x1, fx) =
                    PoolGeom::window(ox, g.kernel[1], g.stride[1], g.padding[1], g.w);
                let mut s = T::zero();
                for iy in y0..y1 {
                    for &v in &xp[iy * g.w + x0..iy * g.w + x1] {
                        s += v;
                    }
                }
                op[oy * g.ow + ox] = s / T::from(fy * fx).unwrap();
            }
        }
    });
    out
}

/// Average pooling backward: each output gradient is spread evenly over its window.
pub fn avg_pool2d_backward<T: ConvFloat>(gy: &[T], g: &PoolGeom) -> Vec<T> {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    assert_eq!(gy.len(), g.planes * ohw, "avg_pool2d_backward: buffer size");
    let mut gx = super::pool::zeroed::<T>(g.planes * hw);
    let work = gy.len() * g.kernel[0] * g.kernel[1];
    for_planes(gy, ohw, &mut gx, hw, work, |gp, xp| {
        for oy in 0..g.oh {
            let (y0, y1, fy) = PoolGeom::window(oy, g.kernel[0], g.stride[0], g.padding[0], g.h);
            for ox in 0..g.ow {
                let (x0, x1, fx) =
                    PoolGeom::window(ox, g.kernel[1], g.stride[1], g.padding[1], g.w);
                let v = gp[oy * g.ow + ox] / T::from(fy * fx).unwrap();
                for iy in y0..y1 {
                    for d in &mut xp[iy * g.w + x0..iy * g.w + x1] {
                        *d += v;
                    }
                }
            }
        }
    });
    gx
}

/// Adaptive window `[floor(o * len / out), ceil((o + 1) * len / out))` (PyTorch's formula).
#[inline]
fn adaptive_window(o: usize, out: usize, len: usize) -> (usize, usize) {
    (o * len / out, ((o + 1) * len).div_ceil(out))
}

/// Adaptive average pooling of `planes` `[h, w]` planes to `[oh, ow]`.
pub fn adaptive_avg_pool2d_forward<T: ConvFloat>(
    x: &[T],
    planes: usize,
    [h, w]: [usize; 2],
    [oh, ow]: [usize; 2],
) -> Vec<T> {
    assert_eq!(x.len(), planes * h * w, "adaptive_avg_pool2d: buffer size");
    let mut out = super::pool::zeroed::<T>(planes * oh * ow);
    let work = planes * h * w;
    for_planes(x, h * w, &mut out, oh * ow, work, |xp, op| {
        for oy in 0..oh {
            let (y0, y1) = adaptive_window(oy, oh, h);
            for ox in 0..ow {
                let (x0, x1) = adaptive_window(ox, ow, w);
                let mut s = T::zero();
                for iy in y0..y1 {
                    for &v in &xp[iy * w + x0..iy * w + x1] {
                        s += v;
                    }
                }
                op[oy * ow + ox] = s / T::from((y1 - y0) * (x1 - x0)).unwrap();
            }
        }
    });
    out
}

/// Adaptive average pooling backward: each output gradient spread evenly over its window.
pub fn adaptive_avg_pool2d_backward<T: ConvFloat>(
    gy: &[T],
    planes: usize,
    [h, w]: [usize; 2],
    [oh, ow]: [usize; 2],
) -> Vec<T> {
    assert_eq!(gy.len(), planes * oh * ow, "adaptive_avg_pool2d_backward");
    let mut gx = super::pool::zeroed::<T>(planes * h * w);
    let work = planes * h * w;
    for_planes(gy, oh * ow, &mut gx, h * w, work, |gp, xp| {
        for oy in 0..oh {
            let (y0, y1) = adaptive_window(oy, oh, h);
            for ox in 0..ow {
                let (x0, x1) = adaptive_window(ox, ow, w);
                let v = gp[oy * ow + ox] / T::from((y1 - y0) * (x1 - x0)).unwrap();
                for iy in y0..y1 {
                    for d in &mut xp[iy * w + x0..iy * w + x1] {
                        *d += v;
                    }
                }
            }
        }
    });
    gx
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general max pool against a plain scan: ties, NaNs, padding, strides, windows that
    /// overlap; on every build this CPU has (the 3x3/2 values-only path: AVX-512, AVX2).
    #[test]
    fn max_pool_interior_path_matches_a_plain_scan() {
        use super::super::max_pool_simd::MAX_LEVEL;
        for level in (0..=super::super::simd::level()).rev() {
            MAX_LEVEL.store(level, std::sync::atomic::Ordering::Relaxed);
            max_pool_interior_cases();
        }
        MAX_LEVEL.store(2, std::sync::atomic::Ordering::Relaxed);
    }

    fn max_pool_interior_cases() {
        let mut rng = crate::Generator::new(3);
        for (h, w, k, s, p) in [
            (23, 37, 3, 2, 1),
            (9, 30, 3, 1, 1),
            (12, 40, 2, 3, 0),
            (5, 9, 3, 2, 0),
            (7, 70, 3, 2, 1),
            (6, 66, 3, 2, 0),
            (16, 19, 3, 3, 1),
            (8, 8, 1, 1, 0),
        ] {
            let x: Vec<f32> = (0..2 * h * w)
                .map(|_| match rng.next_f64() {
                    r if r < 0.05 => f32::NAN,
                    r => (r * 6.0).floor() as f32,
                })
                .collect();
            let (oh, ow) = ((h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1);
            let g = PoolGeom {
                planes: 2,
                h,
                w,
                oh,
                ow,
                kernel: [k, k],
                stride: [s, s],
                padding: [p, p],
            };
            let (v, idx) = max_pool2d_forward(&x, &g);
            // the values-only path (inference) agrees, NaNs included
            let vals = max_pool2d_values(&x, &g);
            assert_eq!(vals.len(), v.len());
            for (i, (a, b)) in vals.iter().zip(&v).enumerate() {
                assert!(
                    a == b || (a.is_nan() && b.is_nan()),
                    "{g:?} value {i}: {a} vs {b}"
                );
            }
            for pl in 0..2 {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let (mut best, mut at) = (f32::NEG_INFINITY, usize::MAX);
                        for iy in (oy * s).saturating_sub(p)..(oy * s + k - p).min(h) {
                            for ix in (ox * s).saturating_sub(p)..(ox * s + k - p).min(w) {
                                let val = x[pl * h * w + iy * w + ix];
                                let first = at == usize::MAX;
                                if first || val > best || (val.is_nan() && !best.is_nan()) {
                                    (best, at) = (val, iy * w + ix);
                                }
                            }
                        }
                        let o = pl * oh * ow + oy * ow + ox;
                        assert_eq!(idx[o], at as i64, "{g:?} index at {oy},{ox}");
                        assert!(v[o] == best || (v[o].is_nan() && best.is_nan()));
                    }
                }
            }
        }
    }

    #[test]
    fn max_pool_2x2_path_matches_general_scan() {
        // every build this CPU has: AVX-512, AVX2, scalar
        use super::super::max_pool_simd::MAX_LEVEL;
        for level in (0..=super::super::simd::level()).rev() {
            MAX_LEVEL.store(level, std::sync::atomic::Ordering::Relaxed);
            max_pool_2x2_cases();
        }
        MAX_LEVEL.store(2, std::sync::atomic::Ordering::Relaxed);
    }

    fn max_pool_2x2_cases() {
        // values with ties and NaNs: the 2x2/stride-2 path must give the sequential
        // scan's answer (first maximum, first NaN), values and indices
        let vals = [
            1.0f32,
            1.0,
            0.5,
            f32::NAN,
            -2.0,
            3.0,
            3.0,
            0.0,
            f32::NAN,
            f32::NAN,
        ];
        let mut g = crate::Generator::new(3);
        // rows of 13 outputs (a vector step and an overlapping last one), 8 (exactly one
        // vector step), 17 with an odd row length; four-lane rows of 4, 5 (odd length, an
        // overlapping step) and 7; 3 (scalar); odd heights leave a row outside every window
        for (h, w) in [
            (4, 26),
            (2, 64),
            (2, 36),
            (4, 2),
            (2, 16),
            (6, 35),
            (6, 8),
            (4, 11),
            (2, 14),
            (4, 7),
            (5, 9),
            (3, 26),
        ] {
            for trial in 0..50 {
                let x: Vec<f32> = (0..2 * h * w)
                    .map(|_| vals[g.below(vals.len() as u64) as usize])
                    .collect();
                let geom = PoolGeom {
                    planes: 2,
                    h,
                    w,
                    oh: h / 2,
                    ow: w / 2,
                    kernel: [2, 2],
                    stride: [2, 2],
                    padding: [0, 0],
                };
                let (fv, fi) = max_pool2d_forward(&x, &geom);
                // backward: each output gradient lands on its index, zeros elsewhere
                let gy: Vec<f32> = (0..fv.len()).map(|i| 1.0 + i as f32).collect();
                let mut want = vec![0f32; x.len()];
                for (o, (&v, &i)) in gy.iter().zip(&fi).enumerate() {
                    want[o / (h / 2 * (w / 2)) * h * w + i as usize] += v;
                }
                assert_eq!(max_pool2d_backward(&gy, &fi, &geom), want, "trial {trial}");
                // reference: sequential scan, first maximum wins, first NaN wins
                for p in 0..2 {
                    for oy in 0..h / 2 {
                        for ox in 0..w / 2 {
                            let mut best = (f32::NEG_INFINITY, 2 * oy * w + 2 * ox);
                            'win: for iy in 2 * oy..2 * oy + 2 {
                                for ix in 2 * ox..2 * ox + 2 {
                                    let v = x[p * h * w + iy * w + ix];
                                    if v > best.0 || v.is_nan() {
                                        best = (v, iy * w + ix);
                                        if v.is_nan() {
                                            break 'win;
                                        }
                                    }
                                }
                            }
                            let o = p * (h / 2) * (w / 2) + oy * (w / 2) + ox;
                            assert_eq!(fi[o], best.1 as i64, "trial {trial} index at {o}");
                            assert!(
                                fv[o] == best.0 || (fv[o].is_nan() && best.0.is_nan()),
                                "trial {trial} value at {o}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn max_pool_2x2_backward_writes_every_element() {
        // the gradient buffer comes from the cache with stale contents: poison one of the
        // right length first, and check nothing of it survives
        let (h, w) = (91, 97); // odd: a row and a column outside every window
        let n = 3 * h * w;
        let mut stale = super::super::pool::output::<f32>(n);
        stale.fill(f32::NAN);
        super::super::pool::recycle(stale);
        let g = PoolGeom {
            planes: 3,
            h,
            w,
            oh: h / 2,
            ow: w / 2,
            kernel: [2, 2],
            stride: [2, 2],
            padding: [0, 0],
        };
        let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1013) as f32).collect();
        let (y, idx) = max_pool2d_forward(&x, &g);
        let gx = max_pool2d_backward(&vec![1f32; y.len()], &idx, &g);
        assert_eq!(gx.len(), n);
        assert!(
            gx.iter().all(|v| *v == 0.0 || *v == 1.0),
            "stale values left"
        );
        assert_eq!(gx.iter().filter(|v| **v == 1.0).count(), y.len());
    }
}
