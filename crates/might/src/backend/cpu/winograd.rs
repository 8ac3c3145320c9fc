//! Winograd F(4x4, 3x3): the forward pass of 3x3, stride-1 f32 convolutions with many
//! channels (ResNet's residual blocks) in a quarter of the multiplications.
//!
//! The output is cut into 4x4 tiles; tile `t` reads a 6x6 input patch `d` (patches overlap by
//! two). With the fixed matrices `B` (6x6), `G` (6x3) and `A` (6x4) below, each patch becomes
//! `V = Bᵀ d B`, each filter `g` becomes `U = G g Gᵀ`, and the tile is `Aᵀ (U ⊙ V) A`. Summed
//! over input channels, the 36 elementwise products are 36 independent matrix products
//! `M_ξ[o, t] = Σ_c U_ξ[o, c] V_ξ[c, t]`: 36 multiply-adds per (output channel, input
//! channel, tile) where the direct convolution spends 16 × 9 = 144. The products run on the
//! direct convolution's register-tiled kernel ([`shifted_products`]), whose offsets make it
//! a plain matrix product here; the transforms are additions and small constant multiples,
//! vectorised along the tiles.
//!
//! Measured on ResNet-18's layers at batch 1, one thread (Xeon, AVX-512), with the filters
//! kept transformed ([`banks`]): 64 channels at 56x56 1.22 ms against 2.15 direct, 128 at
//! 28x28 1.01 against 2.04, 256 at 14x14 1.76 against 2.05 alone (but not inside the
//! network: see [`suits`]); all its convs 26.1 ms against 33.7. The result differs from the direct sum by rounding only, a little more of it (the
//! transforms scale values by up to 8 and back): errors up to ~2e-6 of the sum of the terms'
//! magnitudes in f32, against ~1e-7. f64 and other shapes keep the direct and im2col kernels.

use super::conv::{ConvFloat, ConvGeom};
use super::conv_direct::{map_row, relu_of, shifted_products, tiled, Packed, RF};
use super::threads;

/// Output tile side, and input patch side (`4 + 3 - 1`).
const M: usize = 4;
const P: usize = 6;
/// Transformed elements per tile.
const XI: usize = P * P;

/// Whether the widest vectors are AVX2's (8 lanes).
#[cfg(target_arch = "x86_64")]
fn avx2_only() -> bool {
    super::simd::level() == 1
}
#[cfg(not(target_arch = "x86_64"))]
fn avx2_only() -> bool {
    false
}

/// Whether this convolution runs here: f32, 3x3, stride 1, undilated, ungrouped, enough
/// channels for the products to dominate the transforms, and enough tiles per filter bank for
/// transforming the weights on every call (four times their size) to pay. At batch 1 on
/// ResNet-18 (one thread; direct or im2col + GEMM against Winograd): 64 channels at 56x56 and
/// 128 at 28x28 gain; 512 at 7x7 (four tiles, 38 MB of transformed weights) loses; 256 at
/// 14x14 (16 tiles) gains alone but loses inside the network, where its 9.4 MB of banks no
/// longer sit in cache and its products wait on memory (2.5-3.0 ms a layer there, against
/// 1.4-1.8 alone and 2.05 direct alone). Samples run one by one, their tiles padded to whole register tiles of 32: with a
/// batch, small maps lose to the direct kernel (the MNIST CNN's 32 -> 64 channels at 14x14,
/// batch 64, new weights each call as in training: 8.0 against 3.8 ms; at 28x28 15.6 against
/// 16.4; 64 channels at 56x56, batch 4: 4.6 against 8.0). Hence 32 tiles a sample.
pub(super) fn suits<T: 'static>(g: &ConvGeom) -> bool {
    let per_sample = g.oh.div_ceil(M) * g.ow.div_ceil(M);
    // On AVX2 without AVX-512 the products run 8 lanes wide, so the 14x14 layers' banks
    // coming from L3 cost relatively less: ResNet-18's 256-channel 14x14 layers at batch 1
    // took 2.6-3.0 ms here against 3.3-3.5 on the blocked kernel, inside the network (Zen 3).
    let enough = per_sample >= 32 || (avx2_only() && g.n == 1 && g.c >= 128 && per_sample >= 16);
    std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
        && g.kh == 3
        && g.kw == 3
        && g.stride == [1, 1]
        && g.dilation == [1, 1]
        && g.groups == 1
        && g.c >= 16
        && g.o >= 16
        && enough
        && g.oh >= M
        && g.ow >= M
}

/// `out[n, o, y, x]` (dense `[N, O, OH, OW]`) of the convolution of `x` (`[N, C, H, W]`) with
/// `w` (`[O, C, 3, 3]`), plus `bias` and `residual` (the output's shape), through a ReLU
/// when `relu`. [`suits`] must hold.
pub(super) fn forward<T: ConvFloat>(
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    g: &ConvGeom,
    (relu, residual): (bool, Option<&[T]>),
    out: &mut [T],
) {
    let (c, o, hw, ohw) = (g.c, g.o, g.hw(), g.p());
    assert!(
        x.len() == g.n * c * hw
            && w.len() == o * c * 9
            && out.len() == g.n * o * ohw
            && residual.is_none_or(|r| r.len() == out.len()),
        "conv2d winograd: buffer sizes"
    );
    let opad = o.div_ceil(RF) * RF;
    let nt = g.oh.div_ceil(M) * g.ow.div_ceil(M);
    let ld = tiled(nt);
    let entry = banks(w, c, o);
    let banks = &entry.packed;
    let (v_len, m_len) = (XI * c * ld, XI * opad * ld);
    // each thread takes a run of channels in the transforms, with one scratch buffer
    let parts = threads::get_num_threads().min(c).max(1);
    let (cpp, opp) = (c.div_ceil(parts), o.div_ceil(parts));
    T::with_scratch(v_len + m_len, |buf| {
        let (v, m) = buf.split_at_mut(v_len);
        // V_ξ is `[c][ld]` at `ξ * c * ld`: the product's rows, `ld` apart
        let off: Vec<usize> = (0..c).map(|ci| ci * ld).collect();
        for (s, (xs, os)) in x
            .chunks_exact(c * hw)
            .zip(out.chunks_exact_mut(o * ohw))
            .enumerate()
        {
            let vp = SharedRows(v.as_mut_ptr());
            threads::run(parts, |part| {
                let mut d = vec![T::zero(); input_scratch(g, ld)];
                for ci in part * cpp..((part + 1) * cpp).min(c) {
                    // SAFETY: channel `ci` writes only rows `ξ * c + ci` of `v` (`ld`
                    // elements each, inside its `XI * c * ld`), which no other channel, so
                    // no other thread, touches; `v` outlives `threads::run`, which returns
                    // when every call is done.
                    let rows: [&mut [T]; XI] = std::array::from_fn(|xi| unsafe {
                        std::slice::from_raw_parts_mut(vp.at((xi * c + ci) * ld), ld)
                    });
                    transform_input(&xs[ci * hw..(ci + 1) * hw], g, ld, &mut d, rows)
                }
            });
            threads::for_each_chunk(m, opad * ld, |xi, mx| {
                shifted_products(&v[xi * c * ld..], &off, &banks[xi], mx, ld, nt);
            });
            threads::for_each_chunk(os, opp * ohw, |part, oc| {
                let mut scratch = vec![T::zero(); output_scratch(g)];
                for (k, y) in oc.chunks_exact_mut(ohw).enumerate() {
                    let oi = part * opp + k;
                    let b = bias.map_or(T::zero(), |b| b[oi]);
                    let r = residual.map(|r| &r[(s * o + oi) * ohw..][..ohw]);
                    transform_output(m, oi, opad * ld, ld, g, (b, r, relu), &mut scratch, y)
                }
            });
        }
    })
}

/// The transformed filters of `w` (`[o, c, 3, 3]`), kept between calls
/// ([`super::packed_cache`]) so that a network run again and again (inference) transforms
/// each layer's weights once, as onnxruntime pre-packs them when it loads a model: the
/// transform writes four times the weights' size (36 taps for 9), which at 256 channels
/// (9.4 MB of banks) took longer than the layer's products.
fn banks<T: ConvFloat>(
    w: &[T],
    c: usize,
    o: usize,
) -> std::sync::Arc<super::packed_cache::Entry<T, Vec<Packed<T>>>> {
    super::packed_cache::get(w, 1, || {
        let opad = o.div_ceil(RF) * RF;
        let mut banks: Vec<Packed<T>> = (0..XI).map(|_| Packed::zeroed(opad, c)).collect();
        T::with_scratch(27 * opad * c, |tmp| {
            transform_weights(w, c, o, opad, &mut banks, tmp)
        });
        (banks, XI * opad * c * std::mem::size_of::<T>())
    })
}

/// A buffer's base pointer, handed to the threads that each write their own rows of it.
#[derive(Clone, Copy)]
struct SharedRows<T>(*mut T);
// SAFETY: the threads sharing it write disjoint rows (see `forward`).
unsafe impl<T> Send for SharedRows<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SharedRows<T> {}

impl<T> SharedRows<T> {
    /// The element `i` places past the base.
    ///
    /// # Safety
    /// `i` lies inside the buffer.
    unsafe fn at(self, i: usize) -> *mut T {
        // SAFETY: the caller keeps `i` inside the buffer.
        unsafe { self.0.add(i) }
    }
}

/// `T` from a small constant.
#[inline(always)]
fn k<T: ConvFloat>(v: f64) -> T {
    T::from(v).expect("a small constant")
}

/// `e = Bᵀ d` along six rows: `e[i][t] = Σ_j Bᵀ[i][j] d[j][t]`, with
/// `Bᵀ = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
///        [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]`.
#[inline(always)]
fn bt<T: ConvFloat>(d: [&[T]; P], e: [&mut [T]; P]) {
    let n = e[0].len();
    let d = d.map(|r| &r[..n]);
    let [e0, e1, e2, e3, e4, e5] = e;
    let (e1, e2, e3, e4, e5) = (
        &mut e1[..n],
        &mut e2[..n],
        &mut e3[..n],
        &mut e4[..n],
        &mut e5[..n],
    );
    let (four, five, two) = (k::<T>(4.0), k::<T>(5.0), k::<T>(2.0));
    for t in 0..n {
        let (d0, d1, d2, d3, d4, d5) = (d[0][t], d[1][t], d[2][t], d[3][t], d[4][t], d[5][t]);
        // shared terms: (d4 - 4 d2) and (d3 - 4 d1) make rows 1 and 2, (d4 - d2) and
        // 2 (d3 - d1) rows 3 and 4
        let (a, b) = (d4 - four * d2, d3 - four * d1);
        let (p, q) = (d4 - d2, two * (d3 - d1));
        e0[t] = four * d0 - five * d2 + d4;
        e1[t] = a + b;
        e2[t] = a - b;
        e3[t] = p + q;
        e4[t] = p - q;
        e5[t] = four * d1 - five * d3 + d5;
    }
}

/// `y = Aᵀ m` along six rows into four: `Aᵀ = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0],
/// [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]`.
#[inline(always)]
fn at<T: ConvFloat>(m: [&[T]; P], y: [&mut [T]; M]) {
    let n = y[0].len();
    let m = m.map(|r| &r[..n]);
    let [y0, y1, y2, y3] = y;
    let (y1, y2, y3) = (&mut y1[..n], &mut y2[..n], &mut y3[..n]);
    let (two, four, eight) = (k::<T>(2.0), k::<T>(4.0), k::<T>(8.0));
    for t in 0..n {
        let (s12, d12) = (m[1][t] + m[2][t], m[1][t] - m[2][t]);
        let (s34, d34) = (m[3][t] + m[4][t], m[3][t] - m[4][t]);
        y0[t] = m[0][t] + s12 + s34;
        y1[t] = d12 + two * d34;
        y2[t] = s12 + four * s34;
        y3[t] = d12 + eight * d34 + m[5][t];
    }
}

/// `t = G g` along three rows into six: `G = [[1/4, 0, 0], [-1/6, -1/6, -1/6],
/// [-1/6, 1/6, -1/6], [1/24, 1/12, 1/6], [1/24, -1/12, 1/6], [0, 0, 1]]`.
#[inline(always)]
fn gm<T: ConvFloat>(g: [&[T]; 3], t: [&mut [T]; P]) {
    let n = t[0].len();
    let g = g.map(|r| &r[..n]);
    let [t0, t1, t2, t3, t4, t5] = t;
    let (t1, t2, t3, t4, t5) = (
        &mut t1[..n],
        &mut t2[..n],
        &mut t3[..n],
        &mut t4[..n],
        &mut t5[..n],
    );
    let (q, s, tw) = (k::<T>(0.25), k::<T>(1.0 / 6.0), k::<T>(1.0 / 24.0));
    let tw2 = k::<T>(1.0 / 12.0);
    for i in 0..n {
        let (g0, g1, g2) = (g[0][i], g[1][i], g[2][i]);
        let (a, b) = (g0 + g2, tw * g0 + s * g2);
        t0[i] = q * g0;
        t1[i] = -s * (a + g1);
        t2[i] = -s * (a - g1);
        t3[i] = b + tw2 * g1;
        t4[i] = b - tw2 * g1;
        t5[i] = g2;
    }
}

/// Six rows `stride` apart of `buf`, from row `first`, each `n` long.
fn rows<T>(buf: &mut [T], first: usize, stride: usize, ld: usize, n: usize) -> [&mut [T]; P] {
    let mut it = buf.chunks_exact_mut(ld).skip(first).step_by(stride);
    std::array::from_fn(|_| &mut it.next().expect("six rows")[..n])
}

/// The 36 transformed filter banks `U_ξ = (G g Gᵀ)[ξ]`, each in the direct kernel's packed
/// layout (`opad` output rows in blocks of [`RF`], each block `[c][RF]`; rows past `o` zero),
/// one after another in `u`; `tmp` holds `27 * opad * c` elements of scratch.
fn transform_weights<T: ConvFloat>(
    w: &[T],
    c: usize,
    o: usize,
    opad: usize,
    u: &mut [Packed<T>],
    tmp: &mut [T],
) {
    let pn = opad * c;
    // the nine taps of every filter, each as one row in packed order (the padding rows zero),
    // then the six rows of `G g` per kernel column
    let (taps, gg) = tmp.split_at_mut(9 * pn);
    if opad > o {
        taps.fill(T::zero());
    }
    for oi in 0..o {
        for ci in 0..c {
            let at = (oi / RF) * c * RF + ci * RF + oi % RF;
            for (tap, &wv) in w[(oi * c + ci) * 9..][..9].iter().enumerate() {
                taps[tap * pn + at] = wv;
            }
        }
    }
    super::simd::run(|| {
        for col in 0..3 {
            // kernel column `col`: taps (row r, col) for r = 0, 1, 2 -> rows (i, col) of G g
            let g3: [&[T]; 3] = std::array::from_fn(|r| &taps[(r * 3 + col) * pn..][..pn]);
            gm(g3, rows(gg, col, 3, pn, pn));
        }
        for i in 0..P {
            // row i of G g times Gᵀ: U[i][j]
            let g3: [&[T]; 3] = std::array::from_fn(|col| &gg[(i * 3 + col) * pn..][..pn]);
            let mut banks = u[i * P..(i + 1) * P].iter_mut();
            let u6 =
                std::array::from_fn(|_| &mut banks.next().expect("six banks").data_mut()[..pn]);
            gm(g3, u6);
        }
    });
}

/// Scratch elements [`transform_input`] needs.
fn input_scratch(g: &ConvGeom, ld: usize) -> usize {
    2 * XI * ld + M * g.ow.div_ceil(M) + 2 * M
}

/// `d[b][t] = row[4 t + b]` for the four rows of `d` (one pass over `row`, which the
/// compiler vectorises as an interleaved load).
#[inline(always)]
fn deal<T: Copy>(row: &[T], d: [&mut [T]; M]) {
    let [d0, d1, d2, d3] = d;
    let n = d0.len();
    let (d1, d2, d3, row) = (&mut d1[..n], &mut d2[..n], &mut d3[..n], &row[..M * n]);
    for t in 0..n {
        d0[t] = row[M * t];
        d1[t] = row[M * t + 1];
        d2[t] = row[M * t + 2];
        d3[t] = row[M * t + 3];
    }
}

/// Channel plane `x` (`[H, W]`) into its transformed patches: element ξ of tile `t` at
/// `v[ξ][t]`. `d` is scratch of [`input_scratch`] elements.
fn transform_input<T: ConvFloat>(
    x: &[T],
    g: &ConvGeom,
    ld: usize,
    d: &mut [T],
    mut v: [&mut [T]; XI],
) {
    let (th, tw) = (g.oh.div_ceil(M), g.ow.div_ceil(M));
    let nt = th * tw;
    let [ph, pw] = g.padding;
    // the 6x6 patches, element (a, b) of tile t at `(a * 6 + b) * ld + t`, dealt out of a
    // zero-padded copy of each input row (long enough for a whole last tile and four more)
    let wp = M * tw + 2 * M;
    let (dd, rest) = d.split_at_mut(XI * ld);
    let (e, row) = rest.split_at_mut(XI * ld);
    let row = &mut row[..wp];
    super::simd::run(|| {
        for ty in 0..th {
            for a in 0..P {
                let iy = (M * ty + a) as isize - ph as isize;
                row.fill(T::zero());
                if iy >= 0 && (iy as usize) < g.h {
                    let iy = iy as usize;
                    let lo = pw.min(wp);
                    let n = g.w.min(wp - lo);
                    row[lo..lo + n].copy_from_slice(&x[iy * g.w..iy * g.w + n]);
                }
                let mut it = dd[a * P * ld..(a + 1) * P * ld].chunks_exact_mut(ld);
                let d6: [&mut [T]; P] = std::array::from_fn(|_| {
                    &mut it.next().expect("six rows")[ty * tw..(ty + 1) * tw]
                });
                let [d0, d1, d2, d3, d4, d5] = d6;
                deal(row, [d0, d1, d2, d3]);
                // columns 4 and 5 of tile t are columns 0 and 1 of the tile after it
                for t in 0..tw {
                    d4[t] = row[M * t + 4];
                    d5[t] = row[M * t + 5];
                }
            }
        }
        for a in 0..P {
            // row a of d times B: e[a][j] = Σ_b d[a][b] B[b][j] = (Bᵀ d[a]ᵀ)[j]
            let d6: [&[T]; P] = std::array::from_fn(|b| &dd[(a * P + b) * ld..][..nt]);
            bt(d6, rows(e, a * P, 1, ld, nt));
        }
        for j in 0..P {
            // column j: v[i][j] = Σ_a Bᵀ[i][a] e[a][j]
            let e6: [&[T]; P] = std::array::from_fn(|a| &e[(a * P + j) * ld..][..nt]);
            let mut it = v.iter_mut().skip(j).step_by(P);
            bt(
                e6,
                std::array::from_fn(|_| &mut it.next().expect("six rows")[..nt]),
            );
        }
    });
}

/// Scratch elements [`transform_output`] needs.
fn output_scratch(g: &ConvGeom) -> usize {
    let tw = g.ow.div_ceil(M);
    (P * M + M * M) * g.oh.div_ceil(M) * tw + M * tw
}

/// Output channel `oi`'s plane `y` (`[OH, OW]`) from the products `m` (`M_ξ` at `ξ * mstride`,
/// channel `oi`'s row of each at `oi * ld`): `Aᵀ M A` per tile, plus `bias` and the plane
/// `residual`, through a ReLU. `scratch` holds [`output_scratch`] elements.
#[allow(clippy::too_many_arguments)]
fn transform_output<T: ConvFloat>(
    m: &[T],
    oi: usize,
    mstride: usize,
    ld: usize,
    g: &ConvGeom,
    (bias, residual, relu): (T, Option<&[T]>, bool),
    scratch: &mut [T],
    y: &mut [T],
) {
    let (th, tw) = (g.oh.div_ceil(M), g.ow.div_ceil(M));
    let nt = th * tw;
    let (s, rest) = scratch.split_at_mut(P * M * nt);
    let (t, row) = rest.split_at_mut(M * M * nt);
    let row = &mut row[..M * tw];
    super::simd::run(|| {
        for a in 0..P {
            // row a: s[a][j] = Σ_b M[a][b] A[b][j]
            let m6: [&[T]; P] =
                std::array::from_fn(|b| &m[(a * P + b) * mstride + oi * ld..][..nt]);
            let mut it = s[a * M * nt..(a + 1) * M * nt].chunks_exact_mut(nt);
            at(m6, std::array::from_fn(|_| it.next().expect("four rows")));
        }
        for j in 0..M {
            // column j: t[i][j] = Σ_a Aᵀ[i][a] s[a][j]
            let s6: [&[T]; P] = std::array::from_fn(|a| &s[(a * M + j) * nt..][..nt]);
            let mut it = t.chunks_exact_mut(nt).skip(j).step_by(M);
            at(s6, std::array::from_fn(|_| it.next().expect("four rows")));
        }
        // output row 4 ty + i interleaves the four columns of tile row ty's rows i; the bias,
        // the residual and the ReLU on the way out
        for ty in 0..th {
            for i in 0..M.min(g.oh - M * ty) {
                let c4: [&[T]; M] = std::array::from_fn(|j| &t[(i * M + j) * nt + ty * tw..][..tw]);
                for tx in 0..tw {
                    row[M * tx] = c4[0][tx];
                    row[M * tx + 1] = c4[1][tx];
                    row[M * tx + 2] = c4[2][tx];
                    row[M * tx + 3] = c4[3][tx];
                }
                let at = (M * ty + i) * g.ow;
                let (yr, row) = (&mut y[at..at + g.ow], &row[..g.ow]);
                match (residual, relu) {
                    (Some(r), true) => {
                        map_row(yr, row, &r[at..at + g.ow], |v, r| relu_of(v + bias + r))
                    }
                    (Some(r), false) => map_row(yr, row, &r[at..at + g.ow], |v, r| v + bias + r),
                    (None, true) => map_row(yr, row, row, |v, _| relu_of(v + bias)),
                    (None, false) => map_row(yr, row, row, |v, _| v + bias),
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::super::conv_testing::{naive, values};
    use super::*;

    fn geom(n: usize, c: usize, o: usize, h: usize, w: usize, pad: usize) -> ConvGeom {
        ConvGeom {
            n,
            c,
            h,
            w,
            o,
            kh: 3,
            kw: 3,
            stride: [1, 1],
            padding: [pad, pad],
            dilation: [1, 1],
            groups: 1,
            oh: h + 2 * pad - 2,
            ow: w + 2 * pad - 2,
        }
    }

    /// Largest error relative to the sum of the terms' magnitudes (the scale rounding works
    /// at), over every output.
    fn check(g: &ConvGeom, x: &[f32], w: &[f32], b: &[f32], relu: bool) {
        assert!(suits::<f32>(g), "{g:?} should run as Winograd");
        let want = naive(x, w, b, g, relu);
        let xa: Vec<f32> = x.iter().map(|v| v.abs()).collect();
        let wa: Vec<f32> = w.iter().map(|v| v.abs()).collect();
        let scale = naive(&xa, &wa, &vec![1.0; g.o], g, false);
        let mut got = vec![f32::NAN; want.len()];
        forward(x, w, Some(b), g, (relu, None), &mut got);
        for (i, ((&gv, &wv), &s)) in got.iter().zip(&want).zip(&scale).enumerate() {
            let err = (gv as f64 - wv).abs() / s;
            assert!(
                err < 1e-5,
                "{g:?} relu {relu}: output {i}: {gv} vs {wv} (error {err:e})"
            );
        }
    }

    #[test]
    fn matches_the_definition() {
        // same padding, valid, padding 2; sizes not a multiple of 4; channels not a multiple
        // of the kernel's row block; a batch
        for (i, g) in [
            geom(1, 16, 16, 24, 24, 1),
            geom(2, 17, 21, 23, 21, 1),
            geom(2, 32, 24, 26, 25, 0),
            geom(1, 16, 19, 21, 22, 2),
            geom(3, 20, 16, 24, 24, 1),
        ]
        .iter()
        .enumerate()
        {
            let x = values(g.n * g.c * g.hw(), 1 + i as u64);
            let w = values(g.o * g.c * 9, 100 + i as u64);
            let b = values(g.o, 200 + i as u64);
            check(g, &x, &w, &b, false);
            check(g, &x, &w, &b, true);
        }
    }

    #[test]
    fn kept_banks_follow_the_weights() {
        // the second call keeps the banks, the third uses them; weights changed in place (an
        // optimizer step) must not use them again
        let g = geom(1, 16, 16, 24, 24, 1);
        let x = values(g.n * g.c * g.hw(), 7);
        let mut w = values(g.o * g.c * 9, 8);
        let b = values(g.o, 9);
        for _ in 0..3 {
            check(&g, &x, &w, &b, false);
        }
        w[5] += 0.5;
        w[2000] = -w[2000];
        for _ in 0..3 {
            check(&g, &x, &w, &b, false);
        }
        super::super::packed_cache::clear();
        check(&g, &x, &w, &b, true);
    }

    #[test]
    fn where_it_runs() {
        assert!(suits::<f32>(&geom(1, 64, 64, 56, 56, 1)));
        assert!(!suits::<f64>(&geom(1, 64, 64, 56, 56, 1)));
        // ResNet's 512 channels at 7x7: four tiles
        assert!(!suits::<f32>(&geom(1, 512, 512, 7, 7, 1)));
        assert!(!suits::<f32>(&geom(1, 3, 64, 56, 56, 1)));
        // 16 tiles a sample: no in a batch; alone only on AVX2 without AVX-512
        assert_eq!(suits::<f32>(&geom(1, 256, 256, 14, 14, 1)), avx2_only());
        assert!(!suits::<f32>(&geom(64, 32, 64, 14, 14, 1)));
        assert!(suits::<f32>(&geom(64, 32, 64, 28, 28, 1)));
        let mut strided = geom(1, 64, 64, 56, 56, 1);
        strided.stride = [2, 2];
        assert!(!suits::<f32>(&strided));
    }
}
