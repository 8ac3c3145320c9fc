//! Fused attention kernels: `y = softmax(scale · q kᵀ) v`, optionally causal, and its
//! backward, one (batch, head) pair at a time on contiguous-row slices.
//!
//! Why: the unfused form ran `q kᵀ` and `p v` as batched GEMM calls (a `64 x 64 x 32` product
//! per head pays the library's packing and dispatch every time), computed the masked half of
//! both products, wrote the scores out and read them back for the softmax, and copied the
//! output to merge the heads. Here the scores go straight into the probability rows, masked
//! keys are never touched, and outputs and gradients are written in `[.., L, H, D]` order so
//! merging or splitting the heads around the kernel is a free reshape. Measured on the
//! char-GPT shape (`[16, 4, 64, 32]`, causal, one thread, AVX-512 EPYC): forward 0.69 ->
//! 0.51 ms, backward 0.95 -> 0.65 ms per layer; training step 72.8 -> 70.5 ms at 1 thread,
//! 43.2 -> 40.9 ms at 2.
//!
//! Every product goes through [`weighted_sums`] on blocks of 4 rows (4 queries, or 4 keys in
//! the backward), reading the operands where they are: a block of causal rows only runs up to
//! its last row's visible keys, and the key-side gradients only over the queries that see
//! them. (Its AVX-512 build uses FMA, like the GEMM: f32 results may differ in the last bits
//! between CPUs.)
//!
//! While a pair computes, the next pair's rows are prefetched a block at a time ([`Ahead`]):
//! in a training step every layer's q/k/v, probabilities and gradients have left the cache,
//! and a head's strided rows defeat the hardware prefetchers (cold data, packed q/k/v: forward
//! 0.83 -> 0.72 ms, backward 1.24 -> 0.98 ms; char-GPT step at 1 thread 67.3 -> 65.8 ms).
// Row kernels index several parallel slices with one index.
#![allow(clippy::needless_range_loop)]

use super::fused::Real;
use super::prefetch::prefetch;
use super::wsum::{transpose_padded, weighted_sums, Strides};
use super::CpuStorage as S;
use super::{simd, threads};
use crate::backend::AttnGeom;
use crate::{Error, Result};
use std::sync::Mutex;

/// Row lengths are padded to multiples of this (one AVX-512 register of f32), so the row
/// passes run whole vectors.
const W: usize = 16;
/// Rows per product block.
const BLOCK: usize = 4;

/// Rows of one operand of one (batch, head) pair: row `r` starts at `data[off + r * rs]`, its
/// elements contiguous.
#[derive(Clone, Copy)]
pub(crate) struct Rows<'a, T> {
    pub data: &'a [T],
    pub off: usize,
    pub rs: usize,
}

impl<'a, T> Rows<'a, T> {
    /// The data from row `r` on (empty past the end: a product over no rows reads nothing).
    #[inline(always)]
    fn from(&self, r: usize) -> &'a [T] {
        self.data.get(self.off + r * self.rs..).unwrap_or(&[])
    }
}

/// The next pair's rows, fetched a block of rows at a time while this pair computes: a head's
/// rows are a few strided lines per page, which the hardware prefetchers never pick up, so on
/// data that left the cache (every layer's, in a training step) each row waited for memory.
struct Ahead<'a, T> {
    /// Operand rows and their lengths.
    inputs: Vec<(Rows<'a, T>, usize)>,
    /// Rows of the pair's output buffers (in the buffers the kernel writes) and their lengths.
    outputs: Vec<(Place, usize)>,
}

impl<'a, T> Ahead<'a, T> {
    /// What pair `pi` (head `h` of its group) fetches: the next pair's inputs, and its outputs
    /// when it is in the same group (another group's chunks may belong to another thread).
    fn after(
        at: &Pairs,
        (pi, h): (usize, usize),
        inputs: impl Fn(usize) -> Vec<(Rows<'a, T>, usize)>,
        outputs: impl Fn(usize) -> Vec<(Place, usize)>,
    ) -> Self {
        let next_in_group = h + 1 < at.per_group;
        Ahead {
            inputs: at.next(pi).map_or(Vec::new(), inputs),
            outputs: if next_in_group {
                outputs(h + 1)
            } else {
                Vec::new()
            },
        }
    }

    /// Prefetch rows `r0..r0 + rb` of every operand and output.
    #[inline(always)]
    fn block(&self, out: &[&mut [T]], r0: usize, rb: usize) {
        for r in r0..r0 + rb {
            for (m, cols) in &self.inputs {
                let row = m.from(r);
                prefetch(&row[..row.len().min(*cols)]);
            }
            for (at, cols) in &self.outputs {
                let buf: &[T] = out.get(at.buf).map_or(&[], |b| b);
                let row = buf.get(at.off + r * at.rs..).unwrap_or(&[]);
                prefetch(&row[..row.len().min(*cols)]);
            }
        }
    }
}

/// Sizes of one attention problem: `l` queries over `s` keys, key dim `d`, value dim `dv`.
/// `offset: Some(o)` is the causal mask (query `i` sees keys `0..=i + o`), `None` no mask.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    pub l: usize,
    pub s: usize,
    pub d: usize,
    pub dv: usize,
    pub offset: Option<usize>,
}

impl Dims {
    /// Keys query `i` sees (always at least one when `s > 0`).
    #[inline(always)]
    fn visible(&self, i: usize) -> usize {
        match self.offset {
            Some(o) => (i + o + 1).min(self.s),
            None => self.s,
        }
    }
    /// First query that sees key `j`.
    fn first_query(&self, j: usize) -> usize {
        self.offset.map_or(0, |o| j.saturating_sub(o)).min(self.l)
    }
    /// Keys rounded up to whole accumulator arrays (the padded transposes' row length).
    fn s_pad(&self) -> usize {
        self.s.next_multiple_of(W)
    }
}

/// `dst[e][j] = m.row(j)[e]` for `j < rows`, `e < cols`, rows of `dst` padded with zeros to
/// `pad` (a multiple of W, so products over them may run whole vectors past the last key).
#[inline(always)]
fn transpose_into<T: Real>(dst: &mut Vec<T>, m: Rows<T>, rows: usize, cols: usize, pad: usize) {
    dst.clear();
    dst.resize(cols * pad, T::f(0.0));
    transpose_padded(dst, pad, m.from(0), m.rs, rows, cols);
}

/// Largest lane of `a`.
#[inline(always)]
fn lanes_max<T: Real>(a: &[T; W]) -> T {
    a.iter()
        .fold(T::neg_infinity(), |m, &v| if v > m { v } else { m })
}

/// Softmax in place over the rows `i0..i0 + rb` of `p` (row stride `sp`) whose first `nr`
/// entries hold raw scores: `p[i][j] = e^{scale·p[i][j] - m_i} / Σ` over the keys row `i` sees,
/// 0 for the rest of the row. Whole `W`-wide chunks (`nr` is a multiple of W, so short causal
/// rows have no scalar tail), and the exponentials of all the block's rows in one loop: one
/// row at a time left each row's chain of dependent steps waiting on the previous one.
/// `bias` (a padding mask: 0, or the lowest value for a masked key) is added to the scaled
/// scores of every row.
#[inline(always)]
fn softmax_rows<T: Real>(
    p: &mut [T],
    sp: usize,
    (i0, rb, nr): (usize, usize, usize),
    dm: &Dims,
    scale: T,
    bias: Option<&[T]>,
) {
    let ninf = T::neg_infinity();
    let mut m = [T::f(0.0); BLOCK];
    for (r, mr) in m.iter_mut().enumerate().take(rb) {
        let n = dm.visible(i0 + r);
        let row = &mut p[(i0 + r) * sp..][..nr];
        let mut mv = [ninf; W];
        for (j, c) in row.chunks_exact_mut(W).enumerate() {
            for l in 0..W {
                let v = if j * W + l < n { c[l] * scale } else { ninf };
                c[l] = v;
                mv[l] = if v > mv[l] { v } else { mv[l] };
            }
        }
        if let Some(b) = bias {
            // masked keys: x + lowest rounds to lowest, so a fully masked row stays finite
            mv = [ninf; W];
            for (c, bc) in row.chunks_exact_mut(W).zip(b.chunks_exact(W)) {
                for l in 0..W {
                    c[l] = c[l] + bc[l];
                    mv[l] = if c[l] > mv[l] { c[l] } else { mv[l] };
                }
            }
        }
        let mx = lanes_max(&mv);
        *mr = if mx.is_finite() { mx } else { T::f(0.0) };
    }
    let mut sum = [[T::f(0.0); W]; BLOCK];
    for (r, sr) in sum.iter_mut().enumerate().take(rb) {
        let row = &mut p[(i0 + r) * sp..][..nr];
        for c in row.chunks_exact_mut(W) {
            for l in 0..W {
                let e = (c[l] - m[r]).exp_();
                c[l] = e;
                sr[l] = sr[l] + e;
            }
        }
    }
    for (r, sr) in sum.iter().enumerate().take(rb) {
        let inv = T::f(1.0) / sr.iter().fold(T::f(0.0), |a, &v| a + v);
        let row = &mut p[(i0 + r) * sp..(i0 + r + 1) * sp];
        for c in row[..nr].chunks_exact_mut(W) {
            for l in 0..W {
                c[l] = c[l] * inv;
            }
        }
        row[nr..].fill(T::f(0.0));
    }
}

/// Forward of one pair: `p` (`[l, s_pad]`) gets the probabilities (0 at masked keys and the
/// padding) and output row `i` goes to `y[y_off + i * y_rs..][..dv]`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn forward_pair<T: Real>(
    dm: &Dims,
    scale: T,
    (q, k, v): (Rows<T>, Rows<T>, Rows<T>),
    p: &mut [T],
    y: &mut [T],
    (y_off, y_rs): (usize, usize),
    kt: &mut Vec<T>,
    ahead: &Ahead<T>,
    bias: Option<&[T]>,
) {
    let sp = dm.s_pad();
    transpose_into(kt, k, dm.s, dm.d, sp);
    for i0 in (0..dm.l).step_by(BLOCK) {
        let rb = BLOCK.min(dm.l - i0);
        ahead.block(&[&mut *y], i0, rb);
        let nmax = dm.visible(i0 + rb - 1);
        let nr = nmax.next_multiple_of(W);
        // scores of queries i0..i0 + rb over the keys the last of them sees
        let qs = Strides { rs: q.rs, cs: 1 };
        weighted_sums(
            &mut p[i0 * sp..],
            sp,
            q.from(i0),
            qs,
            kt,
            sp,
            (rb, nr, dm.d),
        );
        softmax_rows(p, sp, (i0, rb, nr), dm, scale, bias);
        let ps = Strides { rs: sp, cs: 1 };
        let yo = &mut y[y_off + i0 * y_rs..];
        weighted_sums(
            yo,
            y_rs,
            &p[i0 * sp..],
            ps,
            v.from(0),
            v.rs,
            (rb, dm.dv, nmax),
        );
    }
}

/// Where one gradient of a pair goes: rows at `off + r * rs` of output buffer `buf`.
#[derive(Clone, Copy)]
struct Place {
    buf: usize,
    off: usize,
    rs: usize,
}

/// Scratch buffers of one thread's pairs.
#[derive(Default)]
struct Scratch<T> {
    t: Vec<T>,
    ds: Vec<T>,
}

/// Backward of one pair from the saved probabilities `p` and the output gradient `dy`: writes
/// the rows of `dq` (`[l, d]`), `dk` (`[s, d]`) and `dv` (`[s, dv]`) at the given
/// (offset, row stride) places of their buffers.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn backward_pair<T: Real>(
    dm: &Dims,
    scale: T,
    (q, k, v): (Rows<T>, Rows<T>, Rows<T>),
    p: &[T],
    dy: Rows<T>,
    out: &mut [&mut [T]],
    [q_at, k_at, v_at]: [Place; 3],
    sc: &mut Scratch<T>,
    ahead: &Ahead<T>,
) {
    let (sp, s) = (dm.s_pad(), dm.s);
    transpose_into(&mut sc.t, v, s, dm.dv, sp);
    sc.ds.resize(dm.l * sp, T::f(0.0));
    let ds = &mut sc.ds[..];
    let rows = |rs: usize| Strides { rs, cs: 1 };
    for i0 in (0..dm.l).step_by(BLOCK) {
        let rb = BLOCK.min(dm.l - i0);
        ahead.block(out, i0, rb);
        let nmax = dm.visible(i0 + rb - 1);
        let nr = nmax.next_multiple_of(W);
        // dP[i, j] = dy_i · v_j, into the rows of dS
        let dyr = rows(dy.rs);
        weighted_sums(
            &mut ds[i0 * sp..],
            sp,
            dy.from(i0),
            dyr,
            &sc.t,
            sp,
            (rb, nr, dm.dv),
        );
        // softmax backward: dS = scale · P ∘ (dP - Σ_j P dP) (P is 0 past the visible keys)
        for i in i0..i0 + rb {
            let (dsr, pr) = (&mut ds[i * sp..(i + 1) * sp], &p[i * sp..i * sp + nr]);
            let mut dot = [T::f(0.0); W];
            for (c, pc) in dsr.chunks_exact(W).zip(pr.chunks_exact(W)) {
                for l in 0..W {
                    dot[l] = dot[l] + c[l] * pc[l];
                }
            }
            let delta = dot.iter().fold(T::f(0.0), |a, &v| a + v);
            for (c, pc) in dsr.chunks_exact_mut(W).zip(pr.chunks_exact(W)) {
                for l in 0..W {
                    c[l] = scale * pc[l] * (c[l] - delta);
                }
            }
            dsr[nr..].fill(T::f(0.0));
        }
        // dq_i = Σ_j dS[i, j] k_j
        let gqo = &mut out[q_at.buf][q_at.off + i0 * q_at.rs..];
        weighted_sums(
            gqo,
            q_at.rs,
            &ds[i0 * sp..],
            rows(sp),
            k.from(0),
            k.rs,
            (rb, dm.d, nmax),
        );
    }
    // dk_j = Σ_i dS[i, j] q_i and dv_j = Σ_i P[i, j] dy_i over the queries that see key j
    // (columns of dS and P as weights)
    let cols = Strides { rs: 1, cs: sp };
    for j0 in (0..s).step_by(BLOCK) {
        let jb = BLOCK.min(s - j0);
        let i0 = dm.first_query(j0);
        let nq = dm.l - i0;
        let at = (i0 * sp + j0).min(p.len());
        let gko = &mut out[k_at.buf][k_at.off + j0 * k_at.rs..];
        weighted_sums(
            gko,
            k_at.rs,
            &ds[at..],
            cols,
            q.from(i0),
            q.rs,
            (jb, dm.d, nq),
        );
        let gvo = &mut out[v_at.buf][v_at.off + j0 * v_at.rs..];
        weighted_sums(
            gvo,
            v_at.rs,
            &p[at..],
            cols,
            dy.from(i0),
            dy.rs,
            (jb, dm.dv, nq),
        );
    }
}

/// Where the pairs are: `groups` groups of `per_group` pairs; group `g`'s outputs are one
/// contiguous chunk of each output buffer, laid out `[rows, per_group, cols]`.
#[derive(Clone, Copy)]
pub(crate) struct Pairs<'a> {
    pub groups: usize,
    pub per_group: usize,
    /// Element offsets of each pair's `[rows, cols]` matrix in q, k, v (and dy).
    pub q: &'a [usize],
    pub k: &'a [usize],
    pub v: &'a [usize],
    /// Row strides of q, k, v.
    pub rs: (usize, usize, usize),
}

impl<'a> Pairs<'a> {
    pub fn new(
        groups: usize,
        per_group: usize,
        offs: &'a [Vec<usize>; 3],
        rs: (usize, usize, usize),
    ) -> Self {
        let [q, k, v] = offs;
        Pairs {
            groups,
            per_group,
            q,
            k,
            v,
            rs,
        }
    }

    /// The pair after `pi`, if any.
    fn next(&self, pi: usize) -> Option<usize> {
        (pi + 1 < self.groups * self.per_group).then_some(pi + 1)
    }

    /// Pair `pi`'s q, k, v rows inside the operands' data.
    #[inline(always)]
    fn operands<'d, T>(
        &self,
        pi: usize,
        (q, k, v): (&'d [T], &'d [T], &'d [T]),
    ) -> (Rows<'d, T>, Rows<'d, T>, Rows<'d, T>) {
        let rows = |data, off, rs| Rows { data, off, rs };
        (
            rows(q, self.q[pi], self.rs.0),
            rows(k, self.k[pi], self.rs.1),
            rows(v, self.v[pi], self.rs.2),
        )
    }
}

/// Run `f(group, chunks)` for each group, where `chunks[b]` is the group's `len[b]`-long part of
/// `bufs[b]`; in parallel when `work` (about the flops) is worth it.
fn for_groups<T: Send>(
    bufs: Vec<&mut [T]>,
    len: &[usize],
    groups: usize,
    work: usize,
    f: impl Fn(usize, &mut [&mut [T]]) + Sync,
) {
    let mut parts: Vec<Vec<&mut [T]>> = (0..groups).map(|_| Vec::new()).collect();
    for (buf, &n) in bufs.into_iter().zip(len) {
        for (g, c) in buf.chunks_mut(n.max(1)).enumerate().take(groups) {
            parts[g].push(c);
        }
    }
    if threads::parallel(work / 8) {
        let parts: Vec<Mutex<Vec<&mut [T]>>> = parts.into_iter().map(Mutex::new).collect();
        threads::run(groups, |g| {
            let mut c = parts[g].lock().unwrap_or_else(|e| e.into_inner());
            f(g, &mut c)
        });
    } else {
        for (g, mut c) in parts.into_iter().enumerate() {
            f(g, &mut c);
        }
    }
}

/// Forward over all pairs: returns `(y, p)`, `y` laid out `[groups, l, per_group, dv]`, `p`
/// `[pairs, l, s_pad]` (the probabilities, rows padded with zeros to whole accumulators).
pub(crate) fn forward<T: Real>(
    dm: Dims,
    scale: T,
    (q, k, v): (&[T], &[T], &[T]),
    at: Pairs,
    keep: Option<&[bool]>,
) -> (Vec<T>, Vec<T>) {
    let (pg, sp) = (at.per_group, dm.s_pad());
    // per group, a padded row of key biases (0 past the last key: those are never visible)
    let bias: Option<Vec<T>> = keep.map(|keep| {
        let mut b = vec![T::f(0.0); at.groups * sp];
        for (g, kg) in keep.chunks_exact(dm.s).enumerate().take(at.groups) {
            for (j, &kept) in kg.iter().enumerate() {
                b[g * sp + j] = if kept { T::f(0.0) } else { T::min_value() };
            }
        }
        b
    });
    let pairs = at.groups * pg;
    let mut y = super::pool::output::<T>(pairs * dm.l * dm.dv);
    let mut p = super::pool::output::<T>(pairs * dm.l * dm.s_pad());
    let work = pairs * dm.l * dm.s * (dm.d + dm.dv);
    let lens = [pg * dm.l * dm.dv, pg * dm.l * dm.s_pad()];
    let operand_rows = |pi| {
        let (q, k, v) = at.operands(pi, (q, k, v));
        vec![(q, dm.d), (k, dm.d), (v, dm.dv)]
    };
    // where head h's output rows go in its group's chunk of y
    let y_at = |h: usize| Place {
        buf: 0,
        off: h * dm.dv,
        rs: pg * dm.dv,
    };
    for_groups(vec![&mut y, &mut p], &lens, at.groups, work, |g, c| {
        let kt = &mut Vec::new();
        let (yc, pc) = match c {
            [a, b] => (a, b),
            _ => unreachable!("two buffers"),
        };
        simd::run(
            #[inline(always)]
            || {
                for h in 0..pg {
                    let pi = g * pg + h;
                    let ops = at.operands(pi, (q, k, v));
                    let ahead =
                        Ahead::after(&at, (pi, h), operand_rows, |h| vec![(y_at(h), dm.dv)]);
                    let pr = &mut pc[h * dm.l * sp..(h + 1) * dm.l * sp];
                    let yat = y_at(h);
                    let bias = bias.as_ref().map(|b| &b[g * sp..(g + 1) * sp]);
                    let y_at = (yat.off, yat.rs);
                    forward_pair(&dm, scale, ops, pr, yc, y_at, kt, &ahead, bias);
                }
            },
        )
    });
    (y, p)
}

/// Backward over all pairs. `dy` holds each pair's output gradient at `dy_off[pair]` with
/// row stride `dy_rs`. Returns `[dq, dk, dv]`, each laid out `[groups, rows, per_group,
/// cols]`; or, when `packed` (self-attention with `d == dv`), one buffer `[groups, l, 3,
/// per_group, d]`: the gradient of a packed `[.., L, 3·H·D]` q/k/v projection output.
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward<T: Real>(
    dm: Dims,
    scale: T,
    (q, k, v): (&[T], &[T], &[T]),
    at: Pairs,
    p: &[T],
    (dy, dy_off, dy_rs): (&[T], &[usize], usize),
    packed: bool,
) -> Vec<Vec<T>> {
    let (pg, sp) = (at.per_group, dm.s_pad());
    let pairs = at.groups * pg;
    let out = super::pool::output::<T>;
    let (mut bufs, lens) = if packed {
        assert!(
            dm.l == dm.s && dm.d == dm.dv,
            "packed attention gradient: self-attention"
        );
        (
            vec![out(pairs * dm.l * 3 * dm.d)],
            vec![pg * dm.l * 3 * dm.d],
        )
    } else {
        let (a, b, c) = (pg * dm.l * dm.d, pg * dm.s * dm.d, pg * dm.s * dm.dv);
        let g = at.groups;
        (vec![out(g * a), out(g * b), out(g * c)], vec![a, b, c])
    };
    let work = 2 * pairs * dm.l * dm.s * (dm.d + dm.dv);
    // where head h's gradients go in its group's chunks
    let places_of = |h: usize| {
        let place = |buf, off, rs| Place { buf, off, rs };
        if packed {
            let rs = 3 * pg * dm.d;
            [0, 1, 2].map(|t| place(0, (t * pg + h) * dm.d, rs))
        } else {
            [
                place(0, h * dm.d, pg * dm.d),
                place(1, h * dm.d, pg * dm.d),
                place(2, h * dm.dv, pg * dm.dv),
            ]
        }
    };
    let dy_rows = |pi: usize| Rows {
        data: dy,
        off: dy_off[pi],
        rs: dy_rs,
    };
    // a pair's operand rows, output gradient rows and probability rows
    let operand_rows = |pi| {
        let (q, k, v) = at.operands(pi, (q, k, v));
        let p_rows = Rows {
            data: p,
            off: pi * dm.l * sp,
            rs: sp,
        };
        let (d, dv) = (dm.d, dm.dv);
        vec![(q, d), (k, d), (v, dv), (dy_rows(pi), dv), (p_rows, sp)]
    };
    let refs: Vec<&mut [T]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
    for_groups(refs, &lens, at.groups, work, |g, c| {
        let mut sc = Scratch::default();
        simd::run(
            #[inline(always)]
            || {
                for h in 0..pg {
                    let pi = g * pg + h;
                    let ops = at.operands(pi, (q, k, v));
                    let pp = &p[pi * dm.l * sp..(pi + 1) * dm.l * sp];
                    let ahead = Ahead::after(&at, (pi, h), operand_rows, |h| {
                        let [a, b, c] = places_of(h);
                        vec![(a, dm.d), (b, dm.d), (c, dm.dv)]
                    });
                    let (dyr, places) = (dy_rows(pi), places_of(h));
                    backward_pair(&dm, scale, ops, pp, dyr, c, places, &mut sc, &ahead);
                }
            },
        )
    });
    bufs
}

/// The kernel's view of a geometry: sizes and where the pairs are.
fn plan(g: &AttnGeom) -> (Dims, Pairs<'_>) {
    let dm = Dims {
        l: g.l,
        s: g.s,
        d: g.d,
        dv: g.dv,
        offset: g.causal,
    };
    let [a, b, c] = g.row_strides;
    let at = Pairs::new(g.groups, g.per_group, &g.offsets, (a, b, c));
    (dm, at)
}

/// [`forward`] on CPU buffers: `(y, probabilities)`; `None` for dtypes other than f32/f64
/// (the op composes primitives instead).
pub(crate) fn forward_storage(q: &S, k: &S, v: &S, g: &AttnGeom) -> Option<(S, S)> {
    let (dm, at) = plan(g);
    Some(match (q, k, v) {
        (S::F32(q), S::F32(k), S::F32(v)) => {
            let (y, p) = forward(dm, f32::f(g.scale), (q, k, v), at, g.key_keep.as_deref());
            (S::F32(y), S::F32(p))
        }
        (S::F64(q), S::F64(k), S::F64(v)) => {
            let (y, p) = forward(dm, f64::f(g.scale), (q, k, v), at, g.key_keep.as_deref());
            (S::F64(y), S::F64(p))
        }
        _ => return None,
    })
}

/// [`backward`] on CPU buffers (the dtypes [`forward_storage`] accepted).
pub(crate) fn backward_storage(
    (q, k, v): (&S, &S, &S),
    p: &S,
    (dy, dy_off, dy_rs): (&S, &[usize], usize),
    g: &AttnGeom,
) -> Result<Vec<S>> {
    let (dm, at) = plan(g);
    Ok(match (q, k, v, p, dy) {
        (S::F32(q), S::F32(k), S::F32(v), S::F32(p), S::F32(dy)) => {
            let sc = f32::f(g.scale);
            backward(dm, sc, (q, k, v), at, p, (dy, dy_off, dy_rs), g.packed)
                .into_iter()
                .map(S::F32)
                .collect()
        }
        (S::F64(q), S::F64(k), S::F64(v), S::F64(p), S::F64(dy)) => {
            let sc = f64::f(g.scale);
            backward(dm, sc, (q, k, v), at, p, (dy, dy_off, dy_rs), g.packed)
                .into_iter()
                .map(S::F64)
                .collect()
        }
        _ => {
            return Err(Error::dtype(
                "attention_backward",
                format!(
                    "operands of dtype {} and gradient of {}",
                    q.dtype(),
                    dy.dtype()
                ),
            ))
        }
    })
}
