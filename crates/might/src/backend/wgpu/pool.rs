//! 2-D pooling on the GPU over `[planes, H, W]` inputs (a layout gives the start). Forward
//! passes give each output a thread; backward passes give each input element a thread that
//! sums the gradients of the windows covering it, so nothing is added concurrently and the
//! result does not depend on scheduling.

use super::{wgsl, Meta, WgpuStorage as S, FIRST_SLOT};
use crate::backend::PoolGeom;
use crate::{DType, Error, Layout, Result};

#[track_caller]
fn f32_only(op: &str, s: &S) -> Result<()> {
    if s.dtype != DType::F32 {
        return Err(Error::dtype(
            op,
            format!("not supported for dtype {} on the GPU", s.dtype),
        ));
    }
    Ok(())
}

fn meta(threads: usize, g: &PoolGeom, offs: [usize; 2]) -> Meta {
    let mut p = Meta::new(threads, 14);
    let v = [
        g.h,
        g.w,
        g.kernel[0],
        g.kernel[1],
        g.stride[0],
        g.stride[1],
        g.padding[0],
        g.padding[1],
        g.oh,
        g.ow,
        offs[0],
        offs[1],
    ];
    for (i, &x) in v.iter().enumerate() {
        p.set(FIRST_SLOT + i, x);
    }
    p
}

const GEOM: &str = "
    let H = slot(2u); let W = slot(3u); let KH = i32(slot(4u)); let KW = i32(slot(5u));
    let SY = i32(slot(6u)); let SX = i32(slot(7u)); let PY = i32(slot(8u)); let PX = i32(slot(9u));
    let OH = slot(10u); let OW = slot(11u); let XOFF = slot(12u); let IOFF = slot(13u);
";

/// Launch pooling kernel `key` whose body follows the geometry prelude.
fn launch(
    op: &str,
    key: &str,
    body: &str,
    bind: &[(&S, bool)],
    threads: usize,
    g: &PoolGeom,
    offs: [usize; 2],
) -> Result<()> {
    let p = meta(threads, g, offs);
    let src = || {
        let mut k = String::from(wgsl::PRELUDE);
        k += wgsl::MATH;
        for (i, (s, write)) in bind.iter().enumerate() {
            k += &format!(
                "@group(0) @binding({}) var<storage, {}> b{i}: array<{}>;\n",
                i + 1,
                if *write { "read_write" } else { "read" },
                wgsl::ty(s.dtype)
            );
        }
        k + super::ENTRY + GEOM + body + "}\n"
    };
    let bufs: Vec<&wgpu::Buffer> = bind.iter().map(|(s, _)| s.raw()).collect();
    bind[0]
        .0
        .ctx()
        .launch(op, key, src, p.words(), &bufs, super::groups(threads))
}

/// Max pooling: the maxima and the flat index `iy * W + ix` of each (first maximum in
/// row-major order, NaN wins).
pub(super) fn max_pool2d(s: &S, l: &Layout, g: &PoolGeom) -> Result<(S, S)> {
    f32_only("max_pool2d", s)?;
    let n = g.planes * g.oh * g.ow;
    let vals = s.new_like("max_pool2d", DType::F32, n)?;
    let idx = s.new_like("max_pool2d", DType::I64, n)?;
    let body = "
    let p = i / (OH * OW);
    let y0 = i32((i / OW) % OH) * SY - PY;
    let x0 = i32(i % OW) * SX - PX;
    var best = f32_bits_(0xff800000u);
    var at = -1;
    for (var y = max(y0, 0); y < min(y0 + KH, i32(H)); y = y + 1) {
        for (var x = max(x0, 0); x < min(x0 + KW, i32(W)); x = x + 1) {
            let v = b0[XOFF + p * H * W + u32(y) * W + u32(x)];
            if (at < 0 || (!is_nan_(best) && (v > best || is_nan_(v)))) {
                best = v;
                at = y * i32(W) + x;
            }
        }
    }
    if (at < 0) { at = max(y0, 0) * i32(W) + max(x0, 0); }
    b1[i] = best;
    b2[i] = at;
";
    launch(
        "max_pool2d",
        "max_pool2d",
        body,
        &[(s, false), (&vals, true), (&idx, true)],
        n,
        g,
        [l.offset(), 0],
    )?;
    Ok((vals, idx))
}

/// WGSL defining the plane `p` of input element `i` and the output ranges `oy0..oy1`,
/// `ox0..ox1` whose windows cover it.
const COVER: &str = "
    let py = i32((i / W) % H) + PY;
    let px = i32(i % W) + PX;
    let oy0 = max((py - KH + SY) / SY, 0);
    let oy1 = min(py / SY + 1, i32(OH));
    let ox0 = max((px - KW + SX) / SX, 0);
    let ox1 = min(px / SX + 1, i32(OW));
    let p = i / (H * W);
";

/// Each output gradient goes to the input element its maximum came from.
pub(super) fn max_pool2d_backward(
    gy: &S,
    l: &Layout,
    idx: &S,
    il: &Layout,
    g: &PoolGeom,
) -> Result<S> {
    f32_only("max_pool2d_backward", gy)?;
    if idx.dtype != DType::I64 {
        return Err(Error::dtype("max_pool2d_backward", "indices must be int64"));
    }
    let n = g.planes * g.h * g.w;
    let gx = gy.new_like("max_pool2d_backward", DType::F32, n)?;
    let body = format!(
        "{COVER}
    let me = i32(i % (H * W));
    var acc = 0.0;
    for (var oy = oy0; oy < oy1; oy = oy + 1) {{
        for (var ox = ox0; ox < ox1; ox = ox + 1) {{
            let o = (p * OH + u32(oy)) * OW + u32(ox);
            if (b1[IOFF + o] == me) {{ acc = acc + b0[XOFF + o]; }}
        }}
    }}
    b2[i] = acc;
"
    );
    launch(
        "max_pool2d_backward",
        "max_pool2d_backward",
        &body,
        &[(gy, false), (idx, false), (&gx, true)],
        n,
        g,
        [l.offset(), il.offset()],
    )?;
    Ok(gx)
}

/// Average pooling (`count_include_pad = true`), or its backward (`back`: `s` is the output
/// gradient, spread evenly over each window).
pub(super) fn avg_pool2d(s: &S, l: &Layout, g: &PoolGeom, back: bool) -> Result<S> {
    let op = if back {
        "avg_pool2d_backward"
    } else {
        "avg_pool2d"
    };
    f32_only(op, s)?;
    let n = if back {
        g.planes * g.h * g.w
    } else {
        g.planes * g.oh * g.ow
    };
    let out = s.new_like(op, DType::F32, n)?;
    // the divisor: the window clipped to the padded input
    let div = "f32((min(ys + KH, i32(H) + PY) - ys) * (min(xs + KW, i32(W) + PX) - xs))";
    let body = if back {
        format!(
            "{COVER}
    var acc = 0.0;
    for (var oy = oy0; oy < oy1; oy = oy + 1) {{
        for (var ox = ox0; ox < ox1; ox = ox + 1) {{
            let ys = oy * SY - PY;
            let xs = ox * SX - PX;
            acc = acc + b0[XOFF + (p * OH + u32(oy)) * OW + u32(ox)] / {div};
        }}
    }}
    b1[i] = acc;
"
        )
    } else {
        format!(
            "
    let p = i / (OH * OW);
    let ys = i32((i / OW) % OH) * SY - PY;
    let xs = i32(i % OW) * SX - PX;
    var acc = 0.0;
    for (var y = max(ys, 0); y < min(ys + KH, i32(H)); y = y + 1) {{
        for (var x = max(xs, 0); x < min(xs + KW, i32(W)); x = x + 1) {{
            acc = acc + b0[XOFF + p * H * W + u32(y) * W + u32(x)];
        }}
    }}
    b1[i] = acc / {div};
"
        )
    };
    launch(
        op,
        op,
        &body,
        &[(s, false), (&out, true)],
        n,
        g,
        [l.offset(), 0],
    )?;
    Ok(out)
}

/// Adaptive average pooling of `planes` planes of `[h, w]` to `[oh, ow]` with PyTorch's
/// windows `[floor(o·len/out), ceil((o+1)·len/out))`, or its backward (`back`).
pub(super) fn adaptive_avg_pool2d(
    s: &S,
    l: &Layout,
    planes: usize,
    [h, w]: [usize; 2],
    [oh, ow]: [usize; 2],
    back: bool,
) -> Result<S> {
    let op = if back {
        "adaptive_avg_pool2d_backward"
    } else {
        "adaptive_avg_pool2d"
    };
    f32_only(op, s)?;
    let n = if back {
        planes * h * w
    } else {
        planes * oh * ow
    };
    let out = s.new_like(op, DType::F32, n)?;
    let g = PoolGeom {
        planes,
        h,
        w,
        kernel: [1, 1],
        stride: [1, 1],
        padding: [0, 0],
        oh,
        ow,
    };
    let win = "
fn lo(o: u32, out: u32, len: u32) -> u32 { return o * len / out; }
fn hi(o: u32, out: u32, len: u32) -> u32 { return ((o + 1u) * len + out - 1u) / out; }
";
    let body = if back {
        "
    let p = i / (H * W);
    let iy = (i / W) % H;
    let ix = i % W;
    var acc = 0.0;
    for (var oy = 0u; oy < OH; oy = oy + 1u) {
        let y0 = lo(oy, OH, H); let y1 = hi(oy, OH, H);
        if (iy < y0 || iy >= y1) { continue; }
        for (var ox = 0u; ox < OW; ox = ox + 1u) {
            let x0 = lo(ox, OW, W); let x1 = hi(ox, OW, W);
            if (ix < x0 || ix >= x1) { continue; }
            acc = acc + b0[XOFF + (p * OH + oy) * OW + ox] / f32((y1 - y0) * (x1 - x0));
        }
    }
    b1[i] = acc;
"
    } else {
        "
    let p = i / (OH * OW);
    let oy = (i / OW) % OH;
    let ox = i % OW;
    let y0 = lo(oy, OH, H); let y1 = hi(oy, OH, H);
    let x0 = lo(ox, OW, W); let x1 = hi(ox, OW, W);
    var acc = 0.0;
    for (var y = y0; y < y1; y = y + 1u) {
        for (var x = x0; x < x1; x = x + 1u) {
            acc = acc + b0[XOFF + (p * H + y) * W + x];
        }
    }
    b1[i] = acc / f32((y1 - y0) * (x1 - x0));
"
    };
    // the window helpers go before the entry point
    let p = meta(n, &g, [l.offset(), 0]);
    let src = || {
        let mut k = String::from(wgsl::PRELUDE);
        k += win;
        k += "@group(0) @binding(1) var<storage, read> b0: array<f32>;
@group(0) @binding(2) var<storage, read_write> b1: array<f32>;
";
        k + super::ENTRY + GEOM + body + "}\n"
    };
    s.ctx().launch(
        op,
        op,
        src,
        p.words(),
        &[s.raw(), out.raw()],
        super::groups(n),
    )?;
    Ok(out)
}
