//! Matrix products and 2-D convolutions on the GPU.
//!
//! One tiled kernel multiplies: each workgroup computes a 64×64 block of one product in the
//! batch, staging 64×16 slices of both operands in workgroup memory; each of its 256 threads
//! accumulates a 4×4 patch in registers. Every operand (and the output) is described by a
//! batch layout plus a row and a column stride, so transposed operands, broadcast batches and
//! the grouped matrices of a convolution are read in place.
//!
//! Convolutions are im2col + that product: the input patches of a chunk of the batch are
//! unfolded into a `[C·kh·kw, oh·ow]` matrix per image, multiplied by the weights viewed as
//! `[groups, O/groups, C/groups·kh·kw]`; the backward multiplies by the transposes and folds
//! the patch gradients back (col2im, one thread per input element, no atomics).

use super::reduce::WG_ENTRY;
use super::{elementwise as ew, wgsl, Meta, WgpuStorage as S, FIRST_SLOT};
use crate::backend::ConvGeom;
use crate::{DType, Error, Layout, Result};

/// Bytes of unfolded patches processed at once (the batch is split into chunks this size).
const COL_BYTES: usize = 64 << 20;

/// One operand of a batched product: its buffer, the batch layout (batch dims, their strides,
/// the start) and the strides of its rows and columns.
struct Mat<'a> {
    s: &'a S,
    batch: Layout,
    rs: usize,
    cs: usize,
}

/// Strides of a row-major `dims`, each times `scale`.
fn strides(dims: &[usize], scale: usize) -> Vec<usize> {
    let mut st = vec![0; dims.len()];
    let mut acc = scale;
    for (s, &d) in st.iter_mut().zip(dims).rev() {
        *s = acc;
        acc *= d;
    }
    st
}

const GEMM: &str = r#"
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
var<workgroup> ta: array<f32, 1024>;
var<workgroup> tb: array<f32, 1024>;
"#;

const GEMM_BODY: &str = r#"
    let m = slot(2u);
    let n = slot(3u);
    let k = slot(4u);
    let tn = slot(15u);
    let tm = slot(16u);
    let batch = grp / (tm * tn);
    let tile = grp % (tm * tn);
    let row0 = (tile / tn) * 64u;
    let col0 = (tile % tn) * 64u;
    let ab = loc(slot(6u), batch);
    let bb = loc(slot(7u), batch);
    let ob = loc(slot(8u), batch);
    let tr = t / 16u;
    let tc = t % 16u;
    var acc: array<f32, 16>;
    for (var q = 0u; q < 16u; q = q + 1u) { acc[q] = 0.0; }
    for (var k0 = 0u; k0 < k; k0 = k0 + 16u) {
        for (var e = 0u; e < 4u; e = e + 1u) {
            let idx = t + e * 256u;
            let r = row0 + idx / 16u;
            let kk = k0 + idx % 16u;
            var va = 0.0;
            if (r < m && kk < k) { va = a[ab + r * slot(9u) + kk * slot(10u)]; }
            ta[idx] = va;
            let kb = k0 + idx / 64u;
            let cc = col0 + idx % 64u;
            var vb = 0.0;
            if (kb < k && cc < n) { vb = b[bb + kb * slot(11u) + cc * slot(12u)]; }
            tb[idx] = vb;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk = kk + 1u) {
            let b0 = tb[kk * 64u + tc * 4u];
            let b1 = tb[kk * 64u + tc * 4u + 1u];
            let b2 = tb[kk * 64u + tc * 4u + 2u];
            let b3 = tb[kk * 64u + tc * 4u + 3u];
            for (var i = 0u; i < 4u; i = i + 1u) {
                let av = ta[(tr * 4u + i) * 16u + kk];
                acc[i * 4u] = acc[i * 4u] + av * b0;
                acc[i * 4u + 1u] = acc[i * 4u + 1u] + av * b1;
                acc[i * 4u + 2u] = acc[i * 4u + 2u] + av * b2;
                acc[i * 4u + 3u] = acc[i * 4u + 3u] + av * b3;
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) {
            let r = row0 + tr * 4u + i;
            let cc = col0 + tc * 4u + j;
            if (r < m && cc < n) { c[ob + r * slot(13u) + cc * slot(14u)] = acc[i * 4u + j]; }
        }
    }
}
"#;

/// `out[batch] = a[batch] @ b[batch]` for every batch index (`m × k` by `k × n`).
fn gemm(a: &Mat, b: &Mat, out: &Mat, [m, n, k]: [usize; 3]) -> Result<()> {
    let nb = a.batch.numel();
    let (tm, tn) = (m.div_ceil(64), n.div_ceil(64));
    let groups = nb * tm * tn;
    if groups == 0 {
        return Ok(());
    }
    let mut p = Meta::new(groups, 17);
    p.set(FIRST_SLOT, m).set(3, n).set(4, k).set(5, nb);
    p.layout(6, &a.batch)
        .layout(7, &b.batch)
        .layout(8, &out.batch);
    p.set(9, a.rs).set(10, a.cs).set(11, b.rs).set(12, b.cs);
    p.set(13, out.rs).set(14, out.cs).set(15, tn).set(16, tm);
    let src = || format!("{}{GEMM}{WG_ENTRY}{GEMM_BODY}", wgsl::PRELUDE);
    a.s.ctx().launch(
        "matmul",
        "gemm64",
        src,
        p.words(),
        &[a.s.raw(), b.s.raw(), out.s.raw()],
        groups as u64,
    )
}

#[track_caller]
fn f32_only(op: &str, dts: &[DType]) -> Result<()> {
    match dts.iter().find(|&&d| d != DType::F32) {
        Some(d) => Err(Error::dtype(
            op,
            format!("not supported for dtype {d} on the GPU (use f32)"),
        )),
        None => Ok(()),
    }
}

/// Batched `[.., m, k] @ [.., k, n]` (both layouts broadcast to the full batch dims).
pub(super) fn matmul(a: &S, al: &Layout, b: &S, bl: &Layout) -> Result<S> {
    f32_only("matmul", &[a.dtype, b.dtype])?;
    let r = al.dims().len();
    let (m, k, n) = (al.dims()[r - 2], al.dims()[r - 1], bl.dims()[r - 1]);
    let bd = &al.dims()[..r - 2];
    let nb: usize = bd.iter().product();
    let out = a.new_like("matmul", DType::F32, nb * m * n)?;
    let mat = |s, l: &Layout| Mat {
        s,
        batch: Layout::new(
            bd.to_vec().into(),
            l.strides()[..r - 2].to_vec(),
            l.offset(),
        ),
        rs: l.strides()[r - 2],
        cs: l.strides()[r - 1],
    };
    let o = Mat {
        s: &out,
        batch: Layout::new(bd.to_vec().into(), strides(bd, m * n), 0),
        rs: n,
        cs: 1,
    };
    gemm(&mat(a, al), &mat(b, bl), &o, [m, n, k])?;
    Ok(out)
}

/// Images per chunk so that one chunk's unfolded patches fit in [`COL_BYTES`].
fn chunk(g: &ConvGeom) -> usize {
    let per = g.c * g.kh * g.kw * g.oh * g.ow * 4;
    (COL_BYTES / per.max(1)).clamp(1, g.n.max(1))
}

/// Slots shared by im2col and col2im: the geometry.
fn geom_meta(threads: usize, g: &ConvGeom, b0: usize, x_off: usize) -> Meta {
    let mut p = Meta::new(threads, 18);
    let v = [
        g.c,
        g.h,
        g.w,
        g.kh,
        g.kw,
        g.stride[0],
        g.stride[1],
        g.padding[0],
        g.padding[1],
        g.dilation[0],
        g.dilation[1],
        g.oh,
        g.ow,
        b0,
        x_off,
    ];
    for (i, &x) in v.iter().enumerate() {
        p.set(FIRST_SLOT + i, x);
    }
    p
}

const GEOM: &str = "
    let C = slot(2u); let H = slot(3u); let W = slot(4u); let KH = slot(5u); let KW = slot(6u);
    let SY = i32(slot(7u)); let SX = i32(slot(8u)); let PY = i32(slot(9u)); let PX = i32(slot(10u));
    let DY = i32(slot(11u)); let DX = i32(slot(12u)); let OH = slot(13u); let OW = slot(14u);
    let B0 = slot(15u); let XOFF = slot(16u);
    let CK = C * KH * KW;
    let L = OH * OW;
";

/// The patches of images `b0..b0 + nb` of `x` as `[nb, C·kh·kw, oh·ow]`.
fn im2col(x: &S, x_off: usize, g: &ConvGeom, b0: usize, nb: usize) -> Result<S> {
    let (ck, l) = (g.c * g.kh * g.kw, g.oh * g.ow);
    let n = nb * ck * l;
    let col = x.new_like("conv2d", DType::F32, n)?;
    let p = geom_meta(n, g, b0, x_off);
    let src = || {
        format!(
            "{}@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> col: array<f32>;
{}{GEOM}
    let b = B0 + i / (CK * L);
    let r = (i / L) % CK;
    let p = i % L;
    let c = r / (KH * KW);
    let iy = i32(p / OW) * SY + i32((r / KW) % KH) * DY - PY;
    let ix = i32(p % OW) * SX + i32(r % KW) * DX - PX;
    var v = 0.0;
    if (iy >= 0 && iy < i32(H) && ix >= 0 && ix < i32(W)) {{
        v = x[XOFF + ((b * C + c) * H + u32(iy)) * W + u32(ix)];
    }}
    col[i] = v;
}}
",
            wgsl::PRELUDE,
            super::ENTRY
        )
    };
    x.ctx().launch(
        "conv2d",
        "im2col",
        src,
        p.words(),
        &[x.raw(), col.raw()],
        super::groups(n),
    )?;
    Ok(col)
}

/// Fold the patch gradients `[nb, C·kh·kw, oh·ow]` of images `b0..` into `gx` (each input
/// element sums the patch entries it was copied to).
fn col2im(gcol: &S, gx: &S, g: &ConvGeom, b0: usize, nb: usize) -> Result<()> {
    let n = nb * g.c * g.h * g.w;
    let p = geom_meta(n, g, b0, 0);
    let src = || {
        format!(
            "{}@group(0) @binding(1) var<storage, read> col: array<f32>;
@group(0) @binding(2) var<storage, read_write> gx: array<f32>;
{}{GEOM}
    let b = i / (C * H * W);
    let c = (i / (H * W)) % C;
    let iy = i32((i / W) % H);
    let ix = i32(i % W);
    var acc = 0.0;
    for (var ky = 0u; ky < KH; ky = ky + 1u) {{
        let ty = iy + PY - i32(ky) * DY;
        if (ty < 0 || ty % SY != 0 || ty / SY >= i32(OH)) {{ continue; }}
        for (var kx = 0u; kx < KW; kx = kx + 1u) {{
            let tx = ix + PX - i32(kx) * DX;
            if (tx < 0 || tx % SX != 0 || tx / SX >= i32(OW)) {{ continue; }}
            let r = (c * KH + ky) * KW + kx;
            acc = acc + col[(b * CK + r) * L + u32(ty / SY) * OW + u32(tx / SX)];
        }}
    }}
    gx[B0 * C * H * W + i] = acc;
}}
",
            wgsl::PRELUDE,
            super::ENTRY
        )
    };
    gx.ctx().launch(
        "conv2d_backward",
        "col2im",
        src,
        p.words(),
        &[gcol.raw(), gx.raw()],
        super::groups(n),
    )
}

/// `conv2d(x, w) + bias`, through a ReLU when `relu` (contiguous NCHW operands).
pub(super) fn conv2d(
    (x, xl): (&S, &Layout),
    (w, wl): (&S, &Layout),
    bias: Option<(&S, &Layout)>,
    g: &ConvGeom,
    relu: bool,
) -> Result<S> {
    f32_only("conv2d", &[x.dtype, w.dtype])?;
    let (gr, l) = (g.groups, g.oh * g.ow);
    let (cgk, og) = (g.c / gr * g.kh * g.kw, g.o / gr);
    let y = x.new_like("conv2d", DType::F32, g.n * g.o * l)?;
    let step = chunk(g);
    let mut b0 = 0;
    while b0 < g.n {
        let nb = step.min(g.n - b0);
        let col = im2col(x, xl.offset(), g, b0, nb)?;
        let wm = Mat {
            s: w,
            batch: Layout::new(vec![nb, gr].into(), vec![0, og * cgk], wl.offset()),
            rs: cgk,
            cs: 1,
        };
        let cm = Mat {
            s: &col,
            batch: Layout::new(vec![nb, gr].into(), vec![gr * cgk * l, cgk * l], 0),
            rs: l,
            cs: 1,
        };
        let ym = Mat {
            s: &y,
            batch: Layout::new(vec![nb, gr].into(), vec![g.o * l, og * l], b0 * g.o * l),
            rs: l,
            cs: 1,
        };
        gemm(&wm, &cm, &ym, [og, l, cgk])?;
        b0 += nb;
    }
    let yl = Layout::contiguous(vec![g.n, g.o, l]);
    let gate = |e: &str| {
        if relu {
            format!("select(0.0, {e}, {e} > 0.0)")
        } else {
            e.to_string()
        }
    };
    match bias {
        Some((b, bl)) => {
            f32_only("conv2d", &[b.dtype])?;
            let bb = Layout::new(vec![g.n, g.o, l].into(), vec![0, 1, 0], bl.offset());
            ew::map_inplace(
                "conv2d",
                &y,
                &yl,
                &[(b, &bb)],
                &["b"],
                &gate("(d + b)"),
                [0.0; 2],
            )?;
        }
        None if relu => ew::map_inplace("conv2d", &y, &yl, &[], &[], &gate("d"), [0.0; 2])?,
        None => {}
    }
    Ok(y)
}

/// Gradients of input, weight and bias (each when asked) from the output gradient `gy`;
/// `y` is the forward output when it went through a ReLU (the gradient passes where `y > 0`).
#[allow(clippy::too_many_arguments)]
pub(super) fn conv2d_backward(
    (x, xl): (&S, &Layout),
    (w, wl): (&S, &Layout),
    (gy, gyl): (&S, &Layout),
    y: Option<(&S, &Layout)>,
    g: &ConvGeom,
    [need_x, need_w, need_b]: [bool; 3],
) -> Result<[Option<S>; 3]> {
    f32_only("conv2d_backward", &[x.dtype, w.dtype, gy.dtype])?;
    let (gr, l) = (g.groups, g.oh * g.ow);
    let (cgk, og) = (g.c / gr * g.kh * g.kw, g.o / gr);
    let full = Layout::contiguous(vec![g.n, g.o, l]);
    let gated;
    let (gs, g_off) = match y {
        Some((ys, yl)) => {
            let gl3 = Layout::new(full.shape().clone(), full.strides().to_vec(), gyl.offset());
            let yl3 = Layout::new(full.shape().clone(), full.strides().to_vec(), yl.offset());
            gated = ew::map(
                "conv2d_backward",
                &[(gy, &gl3), (ys, &yl3)],
                &["g", "y"],
                DType::F32,
                "select(0.0, g, y > 0.0)",
                [0.0; 2],
            )?;
            (&gated, 0)
        }
        None => (gy, gyl.offset()),
    };
    let gb = if need_b {
        let gl3 = Layout::new(full.shape().clone(), full.strides().to_vec(), g_off);
        Some(super::reduce::reduce(
            gs,
            &gl3,
            &[true, false, true],
            crate::backend::ReduceOp::Sum,
        )?)
    } else {
        None
    };
    let gx = if need_x {
        Some(x.new_like("conv2d_backward", DType::F32, g.n * g.c * g.h * g.w)?)
    } else {
        None
    };
    let mut gw: Option<S> = None;
    let step = chunk(g);
    let mut b0 = 0;
    while b0 < g.n && (need_x || need_w) {
        let nb = step.min(g.n - b0);
        let gm = |rs: usize, cs: usize| Mat {
            s: gs,
            batch: Layout::new(
                vec![nb, gr].into(),
                vec![g.o * l, og * l],
                g_off + b0 * g.o * l,
            ),
            rs,
            cs,
        };
        if need_w {
            // gw[b, grp] = gy[b, grp] (og × L) @ col[b, grp]ᵀ (L × cgk), summed over b
            let col = im2col(x, xl.offset(), g, b0, nb)?;
            let part = x.new_like("conv2d_backward", DType::F32, nb * g.o * cgk)?;
            let cm = Mat {
                s: &col,
                batch: Layout::new(vec![nb, gr].into(), vec![gr * cgk * l, cgk * l], 0),
                rs: 1,
                cs: l,
            };
            let pm = Mat {
                s: &part,
                batch: Layout::new(vec![nb, gr].into(), vec![g.o * cgk, og * cgk], 0),
                rs: cgk,
                cs: 1,
            };
            gemm(&gm(l, 1), &cm, &pm, [og, cgk, l])?;
            let pl = Layout::contiguous(vec![nb, g.o * cgk]);
            let sum =
                super::reduce::reduce(&part, &pl, &[true, false], crate::backend::ReduceOp::Sum)?;
            match &gw {
                None => gw = Some(sum),
                Some(acc) => {
                    let al = Layout::contiguous(vec![g.o * cgk]);
                    ew::binary_inplace(acc, &al, &sum, &al, crate::backend::BinaryOp::Add)?
                }
            }
        }
        if let Some(gx) = &gx {
            // gcol[b, grp] = w[grp]ᵀ (cgk × og) @ gy[b, grp] (og × L)
            let gcol = x.new_like("conv2d_backward", DType::F32, nb * g.c * g.kh * g.kw * l)?;
            let wt = Mat {
                s: w,
                batch: Layout::new(vec![nb, gr].into(), vec![0, og * cgk], wl.offset()),
                rs: 1,
                cs: cgk,
            };
            let cm = Mat {
                s: &gcol,
                batch: Layout::new(vec![nb, gr].into(), vec![gr * cgk * l, cgk * l], 0),
                rs: l,
                cs: 1,
            };
            gemm(&wt, &gm(l, 1), &cm, [cgk, l, og])?;
            col2im(&gcol, gx, g, b0, nb)?;
        }
        b0 += nb;
    }
    if need_w && gw.is_none() {
        gw = Some(ew::zeros_like(x, g.o * cgk)?);
    }
    Ok([gx, gw, gb])
}
