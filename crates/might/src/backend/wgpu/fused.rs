//! The fused fast paths on the GPU: LayerNorm and its backward, the causal softmax and its
//! backward (a workgroup per row), and the SGD/Adam(W) updates (one kernel per parameter
//! instead of a dozen elementwise ones). Each follows the CPU kernel's arithmetic in f32.
//!
//! Left to their composed defaults: the fused cross-entropy, whose interface reads the
//! per-row losses back to the host (a wait for the GPU every step, where the composed loss
//! stays queued), and the fused attention, which composes from the tiled matmul and the causal
//! softmax here.

use super::reduce::{wg_reduce, WG_ENTRY};
use super::{wgsl, Meta, WgpuStorage as S, FIRST_SLOT};
use crate::backend::OptimUpdate;
use crate::{DType, Layout, Result};

/// Whether every buffer is f32 (the fused paths' only dtype on the GPU).
fn all_f32(bufs: &[&S]) -> bool {
    bufs.iter().all(|b| b.dtype == DType::F32)
}

/// LayerNorm over contiguous rows of `n`: `(y, mean, rstd)`.
pub(super) fn layer_norm(
    x: &S,
    l: &Layout,
    w: Option<(&S, &Layout)>,
    b: Option<(&S, &Layout)>,
    n: usize,
    eps: f64,
) -> Result<Option<[S; 3]>> {
    let mut all = vec![x];
    all.extend(w.map(|p| p.0));
    all.extend(b.map(|p| p.0));
    if !all_f32(&all) || n == 0 {
        return Ok(None);
    }
    let rows = l.numel() / n;
    let y = x.new_like("layer_norm", DType::F32, l.numel())?;
    let mean = x.new_like("layer_norm", DType::F32, rows)?;
    let rstd = x.new_like("layer_norm", DType::F32, rows)?;
    if rows == 0 {
        return Ok(Some([y, mean, rstd]));
    }
    let mut p = Meta::new(rows, FIRST_SLOT + 4);
    p.set(2, n)
        .set(3, l.offset())
        .set(4, w.map_or(0, |w| w.1.offset()))
        .set(5, b.map_or(0, |b| b.1.offset()));
    p.f(0, eps);
    let affine = match (w.is_some(), b.is_some()) {
        (true, true) => "xh * w[slot(4u) + j] + bb[slot(5u) + j]",
        (true, false) => "xh * w[slot(4u) + j]",
        (false, true) => "xh + bb[slot(5u) + j]",
        (false, false) => "xh",
    };
    let src = || {
        format!(
            "{}@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bb: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> mean: array<f32>;
@group(0) @binding(6) var<storage, read_write> rstd: array<f32>;
{}{WG_ENTRY}
    // every binding is used (layouts are derived from the uses)
    _ = arrayLength(&w);
    _ = arrayLength(&bb);
    let n = slot(2u);
    let base = slot(3u) + grp * n;
    var s = 0.0;
    for (var j = t; j < n; j = j + 256u) {{ s = s + x[base + j]; }}
    let m = red(t, s) / f32(n);
    var q = 0.0;
    for (var j = t; j < n; j = j + 256u) {{ let d = x[base + j] - m; q = q + d * d; }}
    let rs = 1.0 / sqrt(red(t, q) / f32(n) + fslot(0u));
    for (var j = t; j < n; j = j + 256u) {{
        let xh = (x[base + j] - m) * rs;
        y[grp * n + j] = {affine};
    }}
    if (t == 0u) {{ mean[grp] = m; rstd[grp] = rs; }}
}}
",
            wgsl::PRELUDE,
            wg_reduce("f32", &[("red", "a + b")])
        )
    };
    let (wb, bb) = (w.map_or(x, |w| w.0), b.map_or(x, |b| b.0));
    x.ctx().launch(
        "layer_norm",
        &format!("layer_norm|{affine}"),
        src,
        p.words(),
        &[x.raw(), wb.raw(), bb.raw(), y.raw(), mean.raw(), rstd.raw()],
        rows as u64,
    )?;
    Ok(Some([y, mean, rstd]))
}

/// The LayerNorm backward from the output gradient `g`: `(dx, dw, db)`.
pub(super) fn layer_norm_backward(
    g: &S,
    gl: &Layout,
    (x, xl): (&S, &Layout),
    w: Option<(&S, &Layout)>,
    mean: &S,
    rstd: &S,
    n: usize,
) -> Result<[S; 3]> {
    let rows = gl.numel() / n.max(1);
    let dx = g.new_like("layer_norm_backward", DType::F32, gl.numel())?;
    if rows == 0 || n == 0 {
        let z = |k| super::elementwise::zeros_like(g, k);
        return Ok([dx, z(n)?, z(n)?]);
    }
    let dw = g.new_like("layer_norm_backward", DType::F32, n)?;
    let db = g.new_like("layer_norm_backward", DType::F32, n)?;
    let mut p = Meta::new(rows, FIRST_SLOT + 5);
    p.set(2, n)
        .set(3, gl.offset())
        .set(4, xl.offset())
        .set(5, w.map_or(0, |w| w.1.offset()))
        .set(6, rows);
    let wv = if w.is_some() {
        "w[slot(5u) + j]"
    } else {
        "1.0"
    };
    let head = "@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> mean: array<f32>;
@group(0) @binding(5) var<storage, read> rstd: array<f32>;
";
    let rows_src = || {
        format!(
            "{}{head}@group(0) @binding(6) var<storage, read_write> dx: array<f32>;
{}{WG_ENTRY}
    _ = arrayLength(&w);
    let n = slot(2u);
    let m = mean[grp];
    let rs = rstd[grp];
    var s1 = 0.0;
    var s2 = 0.0;
    for (var j = t; j < n; j = j + 256u) {{
        let gh = g[slot(3u) + grp * n + j] * {wv};
        s1 = s1 + gh;
        s2 = s2 + gh * (x[slot(4u) + grp * n + j] - m) * rs;
    }}
    let a = red(t, s1) / f32(n);
    let c = red(t, s2) / f32(n);
    for (var j = t; j < n; j = j + 256u) {{
        let gh = g[slot(3u) + grp * n + j] * {wv};
        let xh = (x[slot(4u) + grp * n + j] - m) * rs;
        dx[grp * n + j] = rs * (gh - a - xh * c);
    }}
}}
",
            wgsl::PRELUDE,
            wg_reduce("f32", &[("red", "a + b")])
        )
    };
    let wb = w.map_or(x, |w| w.0);
    let bufs = [g.raw(), x.raw(), wb.raw(), mean.raw(), rstd.raw()];
    let ctx = g.ctx();
    let mut b6 = bufs.to_vec();
    b6.push(dx.raw());
    ctx.launch(
        "layer_norm_backward",
        &format!("layer_norm_bwd|{wv}"),
        rows_src,
        p.words(),
        &b6,
        rows as u64,
    )?;
    // dw, db: a thread per column summing over the rows
    let cols_src = || {
        format!(
            "{}{head}@group(0) @binding(6) var<storage, read_write> dw: array<f32>;
@group(0) @binding(7) var<storage, read_write> db: array<f32>;
{}
    _ = arrayLength(&w);
    let n = slot(2u);
    var sw = 0.0;
    var sb = 0.0;
    for (var r = 0u; r < slot(6u); r = r + 1u) {{
        let gv = g[slot(3u) + r * n + i];
        sw = sw + gv * (x[slot(4u) + r * n + i] - mean[r]) * rstd[r];
        sb = sb + gv;
    }}
    dw[i] = sw;
    db[i] = sb;
}}
",
            wgsl::PRELUDE,
            super::ENTRY
        )
    };
    let mut q = Meta::new(n, FIRST_SLOT + 5);
    q.set(2, n)
        .set(3, gl.offset())
        .set(4, xl.offset())
        .set(5, 0)
        .set(6, rows);
    let mut b7 = bufs.to_vec();
    b7.push(dw.raw());
    b7.push(db.raw());
    ctx.launch(
        "layer_norm_backward",
        "layer_norm_bwd_cols",
        cols_src,
        q.words(),
        &b7,
        super::groups(n),
    )?;
    Ok([dx, dw, db])
}

/// `softmax(scale · x)` over rows of `s` keys, row `r` seeing keys `0..=r % t + offset`;
/// `back`: the backward from the output gradient `x` and the output `y`.
#[allow(clippy::too_many_arguments)]
pub(super) fn causal_softmax(
    x: &S,
    l: &Layout,
    y: Option<(&S, &Layout)>,
    t: usize,
    s: usize,
    scale: f64,
    offset: usize,
) -> Result<Option<S>> {
    if !all_f32(&[x]) || y.is_some_and(|y| y.0.dtype != DType::F32) || s == 0 || t == 0 {
        return Ok(None);
    }
    let rows = l.numel() / s;
    let out = x.new_like("causal_softmax", DType::F32, l.numel())?;
    if rows == 0 {
        return Ok(Some(out));
    }
    let mut p = Meta::new(rows, FIRST_SLOT + 5);
    p.set(2, t)
        .set(3, s)
        .set(4, offset)
        .set(5, l.offset())
        .set(6, y.map_or(0, |y| y.1.offset()));
    p.f(0, scale);
    let body = if y.is_some() {
        // dx = scale · y · (g - Σ g·y) on the visible keys
        "    var acc = 0.0;
    for (var j = t; j < vis; j = j + 256u) { acc = acc + x[slot(5u) + base + j] * y[slot(6u) + base + j]; }
    let sg = red(t, acc);
    for (var j = t; j < s; j = j + 256u) {
        var v = 0.0;
        if (j < vis) {
            let yv = y[slot(6u) + base + j];
            v = fslot(0u) * yv * (x[slot(5u) + base + j] - sg);
        }
        out[base + j] = v;
    }
"
    } else {
        "    var mx = f32_bits_(0xff800000u);
    for (var j = t; j < vis; j = j + 256u) { mx = max(mx, x[slot(5u) + base + j]); }
    var m = red_max(t, mx) * fslot(0u);
    if (!(abs(m) <= 3.4028234e38)) { m = 0.0; }
    var acc = 0.0;
    for (var j = t; j < vis; j = j + 256u) { acc = acc + exp(x[slot(5u) + base + j] * fslot(0u) - m); }
    let inv = 1.0 / red(t, acc);
    for (var j = t; j < s; j = j + 256u) {
        var v = 0.0;
        if (j < vis) { v = exp(x[slot(5u) + base + j] * fslot(0u) - m) * inv; }
        out[base + j] = v;
    }
"
    };
    let back = y.is_some();
    let src = || {
        format!(
            "{}@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
{}
{WG_ENTRY}
    _ = arrayLength(&y);
    let s = slot(3u);
    let base = grp * s;
    let vis = min(grp % slot(2u) + slot(4u) + 1u, s);
{body}}}
",
            wgsl::PRELUDE,
            wg_reduce(
                "f32",
                &[("red", "a + b"), ("red_max", "select(a, b, b > a)")]
            )
        )
    };
    let yb = y.map_or(x, |y| y.0);
    x.ctx().launch(
        "causal_softmax",
        &format!("causal_softmax|{back}"),
        src,
        p.words(),
        &[x.raw(), yb.raw(), out.raw()],
        rows as u64,
    )?;
    Ok(Some(out))
}

/// One SGD or Adam(W) step in place, a thread per element; `false` for RMSprop (composed).
pub(super) fn optimizer_update(
    p: &S,
    l: &Layout,
    (g, gl): (&S, &Layout),
    state: &[&S],
    update: &OptimUpdate,
) -> Result<bool> {
    let mut bufs = vec![p, g];
    bufs.extend(state.iter().copied());
    if !all_f32(&bufs) || !l.is_contiguous() || !gl.is_contiguous() {
        return Ok(false);
    }
    let n = l.numel();
    let mut m = Meta::new(n, FIRST_SLOT + 10);
    m.set(2, l.offset()).set(3, gl.offset());
    let (key, body) = match *update {
        OptimUpdate::Sgd {
            lr,
            weight_decay,
            momentum,
            dampening,
            nesterov,
            first,
        } => {
            m.f(4, lr)
                .f(5, weight_decay)
                .f(6, momentum)
                .f(7, 1.0 - dampening);
            let d = if weight_decay != 0.0 {
                "gv + fslot(5u) * pv"
            } else {
                "gv"
            };
            let body = match state.len() {
                0 => format!("    let d = {d};\n    s0[po] = pv - fslot(4u) * d;\n"),
                _ => format!(
                    "    let d = {d};
    let b = {};
    s1[i] = b;
    s0[po] = pv - fslot(4u) * {};
",
                    if first {
                        "d"
                    } else {
                        "s1[i] * fslot(6u) + fslot(7u) * d"
                    },
                    if nesterov { "(d + fslot(6u) * b)" } else { "b" }
                ),
            };
            (format!("sgd|{body}"), body)
        }
        OptimUpdate::Adam {
            lr,
            beta1,
            beta2,
            eps,
            l2,
            decay,
            step,
        } => {
            let st = step as f64;
            let (bc1, bc2) = (1.0 - beta1.powf(st), 1.0 - beta2.powf(st));
            m.f(4, lr / bc1)
                .f(5, bc2.sqrt())
                .f(6, 1.0 - beta1)
                .f(7, beta2)
                .f(8, 1.0 - beta2)
                .f(9, eps)
                .f(10, l2)
                .f(11, decay);
            let pd = if decay != 1.0 {
                "pv * fslot(11u)"
            } else {
                "pv"
            };
            let d = if l2 != 0.0 {
                "gv + fslot(10u) * p1"
            } else {
                "gv"
            };
            let amsgrad = state.len() == 3;
            let body = format!(
                "    let p1 = {pd};
    let d = {d};
    let w1 = fslot(6u);
    let mo = s1[i];
    var mn = mo + w1 * (d - mo);
    if (w1 >= 0.5) {{ mn = d - (d - mo) * (1.0 - w1); }}
    s1[i] = mn;
    let v = s2[i] * fslot(7u) + fslot(8u) * d * d;
    s2[i] = v;
    {}
    s0[po] = p1 - fslot(4u) * mn / (sqrt(vd) / fslot(5u) + fslot(9u));
",
                if amsgrad {
                    "let vd = max(s3[i], v);\n    s3[i] = vd;"
                } else {
                    "let vd = v;"
                }
            );
            (format!("adam|{pd}|{d}|{amsgrad}"), body)
        }
        OptimUpdate::RmsProp { .. } => return Ok(false),
    };
    if n == 0 {
        return Ok(true);
    }
    let ns = state.len();
    let src = || {
        let mut k = String::from(wgsl::PRELUDE);
        k += "@group(0) @binding(1) var<storage, read_write> s0: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
";
        for j in 0..ns {
            k += &format!(
                "@group(0) @binding({}) var<storage, read_write> s{}: array<f32>;\n",
                j + 3,
                j + 1
            );
        }
        k += super::ENTRY;
        k += "    let po = slot(2u) + i;\n    let pv = s0[po];\n    let gv = g[slot(3u) + i];\n";
        k + &body + "}\n"
    };
    let raws: Vec<&wgpu::Buffer> = bufs.iter().map(|b| b.raw()).collect();
    p.ctx().launch(
        "optimizer step",
        &key,
        src,
        m.words(),
        &raws,
        super::groups(n),
    )?;
    Ok(true)
}
