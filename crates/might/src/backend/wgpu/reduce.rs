//! Reductions (sum, prod, all/any, arg max/min) and row-wise softmax on the GPU.
//!
//! A reduction with long groups gives each output a workgroup: its 256 threads stride over the
//! reduced elements and combine their partial results in workgroup memory (a tree of halvings).
//! Short groups (at most [`SHORT`] elements) give each output one thread instead. Softmax rows
//! take a workgroup each: a max pass, a sum pass, and the write.

use super::wgsl::{self, ty};
use super::{Meta, WgpuStorage as S, FIRST_SLOT};
use crate::backend::walk::split;
use crate::backend::ReduceOp;
use crate::{DType, Error, Layout, Result};

/// Groups of at most this many elements are reduced by one thread each.
const SHORT: usize = 32;

/// The entry of a workgroup-per-item kernel: `grp` is the item, `t` the thread in the group.
/// Excess groups of a 2-D grid redo the last item (same values written), so every thread
/// reaches every barrier.
pub(crate) const WG_ENTRY: &str = "@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let grp = min(wid.x + wid.y * nwg.x, prm[0] - 1u);
    let t = lid.x;
";

/// Workgroup reductions: for each `(name, comb)`, `fn name(t, v) -> acc` combines one value
/// per thread of the workgroup with `comb` (an expression of `a` and `b`, a tree of halvings
/// in workgroup memory); every thread gets the result.
pub(crate) fn wg_reduce(acc: &str, fns: &[(&str, &str)]) -> String {
    let mut k = format!("var<workgroup> sh: array<{acc}, 256>;\n");
    for (name, comb) in fns {
        k += &format!(
            "fn {name}(t: u32, v: {acc}) -> {acc} {{
    sh[t] = v;
    workgroupBarrier();
    var s = 128u;
    loop {{
        if (s == 0u) {{ break; }}
        if (t < s) {{ let a = sh[t]; let b = sh[t + s]; sh[t] = {comb}; }}
        workgroupBarrier();
        s = s >> 1u;
    }}
    let r = sh[0];
    workgroupBarrier();
    return r;
}}
"
        );
    }
    k
}

pub(super) fn reduce(s: &S, l: &Layout, mask: &[bool], op: ReduceOp) -> Result<S> {
    let dt = s.dtype;
    // (output dtype, accumulator type, initial value, combine, element conversion)
    let (out_dt, acc, init, comb) = match (op, dt) {
        (ReduceOp::Sum, DType::F32) => (DType::F32, "f32", "0.0", "a + b"),
        (ReduceOp::Sum, _) => (DType::I64, "i32", "0", "a + b"),
        (ReduceOp::Prod, DType::F32) => (DType::F32, "f32", "1.0", "a * b"),
        (ReduceOp::Prod, DType::I64) => (DType::I64, "i32", "1", "a * b"),
        (ReduceOp::Prod, _) => {
            return Err(Error::dtype(
                "prod",
                format!("not supported for dtype {dt}"),
            ))
        }
        (ReduceOp::All | ReduceOp::Any, DType::Bool) => (
            DType::Bool,
            "u32",
            if op == ReduceOp::All { "1u" } else { "0u" },
            if op == ReduceOp::All {
                "min(a, b)"
            } else {
                "max(a, b)"
            },
        ),
        _ => return Err(Error::dtype("all/any", "expected a bool tensor")),
    };
    let (kept, red) = split(l, mask);
    let (n_out, n_red) = (kept.numel(), red.numel());
    let out = s.new_like("sum", out_dt, n_out)?;
    if n_out == 0 {
        return Ok(out);
    }
    let mut m = Meta::new(n_out, FIRST_SLOT + 3);
    m.layout(FIRST_SLOT, &kept)
        .layout(FIRST_SLOT + 1, &red)
        .set(FIRST_SLOT + 2, n_red);
    let short = n_red <= SHORT;
    let key = format!("reduce|{}|{acc}|{comb}|{short}", ty(dt));
    let src = || {
        let mut k = String::from(wgsl::PRELUDE);
        k += &format!(
            "@group(0) @binding(1) var<storage, read> x: array<{}>;
@group(0) @binding(2) var<storage, read_write> out: array<{acc}>;
",
            ty(dt)
        );
        let body = format!(
            "    let base = loc(slot(2u), grp);
    var acc: {acc} = {init};
    var j = START;
    loop {{
        if (j >= slot(4u)) {{ break; }}
        let a = acc;
        let b = {acc}(x[base + loc(slot(3u), j)]);
        acc = {comb};
        j = j + STEP;
    }}
"
        );
        if short {
            k += super::ENTRY;
            k += "    let grp = i;\n";
            k += &body.replace("START", "0u").replace("STEP", "1u");
            k += "    out[grp] = acc;\n}\n";
        } else {
            k += &wg_reduce(acc, &[("red", comb)]);
            k += WG_ENTRY;
            k += &body.replace("START", "t").replace("STEP", "256u");
            k += "    let r = red(t, acc);\n    if (t == 0u) { out[grp] = r; }\n}\n";
        }
        k
    };
    let groups = if short {
        super::groups(n_out)
    } else {
        n_out as u64
    };
    s.ctx()
        .launch("sum", &key, src, m.words(), &[s.raw(), out.raw()], groups)?;
    Ok(out)
}

/// Values and int64 indices of the first maximum (or minimum) of each group, NaN winning;
/// one thread per output.
pub(super) fn arg_reduce(s: &S, l: &Layout, mask: &[bool], max: bool) -> Result<(S, S)> {
    let dt = s.dtype;
    if dt == DType::Bool {
        return Err(Error::dtype("argmax", "not supported for bool tensors"));
    }
    let (kept, red) = split(l, mask);
    let (n_out, n_red) = (kept.numel(), red.numel());
    let vals = s.new_like("argmax", dt, n_out)?;
    let idx = s.new_like("argmax", DType::I64, n_out)?;
    let mut m = Meta::new(n_out, FIRST_SLOT + 3);
    m.layout(FIRST_SLOT, &kept)
        .layout(FIRST_SLOT + 1, &red)
        .set(FIRST_SLOT + 2, n_red);
    let cmp = if max { ">" } else { "<" };
    let better = if dt == DType::F32 {
        format!("!is_nan_(best) && (is_nan_(v) || v {cmp} best)")
    } else {
        format!("v {cmp} best")
    };
    let t = ty(dt);
    let key = format!("argreduce|{t}|{max}");
    let src = || {
        let mut k = String::from(wgsl::PRELUDE);
        k += wgsl::MATH;
        k += &format!(
            "@group(0) @binding(1) var<storage, read> x: array<{t}>;
@group(0) @binding(2) var<storage, read_write> vals: array<{t}>;
@group(0) @binding(3) var<storage, read_write> idx: array<i32>;
"
        );
        k += super::ENTRY;
        k += &format!(
            "    let base = loc(slot(2u), i);
    var best: {t} = {t}(0);
    var at = 0u;
    for (var j = 0u; j < slot(4u); j = j + 1u) {{
        let v = x[base + loc(slot(3u), j)];
        if (j == 0u || ({better})) {{ best = v; at = j; }}
    }}
    vals[i] = best;
    idx[i] = i32(at);
}}
"
        );
        k
    };
    s.ctx().launch(
        "argmax",
        &key,
        src,
        m.words(),
        &[s.raw(), vals.raw(), idx.raw()],
        super::groups(n_out),
    )?;
    Ok((vals, idx))
}

/// Softmax or log-softmax of each contiguous row of `n` (f32), a workgroup per row.
pub(super) fn softmax_rows(s: &S, l: &Layout, n: usize, log: bool) -> Result<S> {
    if s.dtype != DType::F32 {
        return Err(Error::dtype(
            "softmax",
            format!("not supported for dtype {}", s.dtype),
        ));
    }
    let rows = l.numel() / n.max(1);
    let out = s.new_like("softmax", DType::F32, l.numel())?;
    if rows == 0 {
        return Ok(out);
    }
    let mut m = Meta::new(rows, FIRST_SLOT + 2);
    m.layout(FIRST_SLOT, l).set(FIRST_SLOT + 1, n);
    let key = format!("softmax|{log}");
    let write = if log {
        "x[loc(slot(2u), base + j)] - mx - log(sum)"
    } else {
        "exp(x[loc(slot(2u), base + j)] - mx) / sum"
    };
    let src = || {
        let mut k = String::from(wgsl::PRELUDE);
        k += "@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
";
        k += &wg_reduce(
            "f32",
            &[("red", "select(a, b, b > a)"), ("red_sum", "a + b")],
        );
        k += WG_ENTRY;
        k += &format!(
            "    let n = slot(3u);
    let base = grp * n;
    var mx = f32_bits_(0xff800000u);
    for (var j = t; j < n; j = j + 256u) {{
        let v = x[loc(slot(2u), base + j)];
        if (v > mx) {{ mx = v; }}
    }}
    mx = red(t, mx);
    if (!(abs(mx) <= 3.4028234e38)) {{ mx = 0.0; }}
    var sum = 0.0;
    for (var j = t; j < n; j = j + 256u) {{
        sum = sum + exp(x[loc(slot(2u), base + j)] - mx);
    }}
    sum = red_sum(t, sum);
    for (var j = t; j < n; j = j + 256u) {{
        out[base + j] = {write};
    }}
}}
"
        );
        k
    };
    s.ctx().launch(
        "softmax",
        &key,
        src,
        m.words(),
        &[s.raw(), out.raw()],
        rows as u64,
    )?;
    Ok(out)
}

/// The softmax backward from the output gradient `g` and the output `y` (rows of `n`).
pub(super) fn softmax_backward_rows(
    g: &S,
    gl: &Layout,
    y: &S,
    yl: &Layout,
    n: usize,
    log: bool,
) -> Result<S> {
    if g.dtype != DType::F32 || y.dtype != DType::F32 {
        return Err(Error::dtype(
            "softmax_backward",
            format!("not supported for dtypes {} and {}", g.dtype, y.dtype),
        ));
    }
    let rows = gl.numel() / n.max(1);
    let out = g.new_like("softmax_backward", DType::F32, gl.numel())?;
    if rows == 0 {
        return Ok(out);
    }
    let mut m = Meta::new(rows, FIRST_SLOT + 3);
    m.layout(FIRST_SLOT, gl)
        .layout(FIRST_SLOT + 1, yl)
        .set(FIRST_SLOT + 2, n);
    let key = format!("softmax_backward|{log}");
    let (term, write) = if log {
        ("gv", "gv - exp(yv) * s")
    } else {
        ("gv * yv", "yv * (gv - s)")
    };
    let src = || {
        let mut k = String::from(wgsl::PRELUDE);
        k += "@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
";
        k += &wg_reduce("f32", &[("red", "a + b")]);
        k += WG_ENTRY;
        k += &format!(
            "    let n = slot(4u);
    let base = grp * n;
    var s = 0.0;
    for (var j = t; j < n; j = j + 256u) {{
        let gv = g[loc(slot(2u), base + j)];
        let yv = y[loc(slot(3u), base + j)];
        s = s + {term};
    }}
    s = red(t, s);
    for (var j = t; j < n; j = j + 256u) {{
        let gv = g[loc(slot(2u), base + j)];
        let yv = y[loc(slot(3u), base + j)];
        out[base + j] = {write};
    }}
}}
"
        );
        k
    };
    g.ctx().launch(
        "softmax_backward",
        &key,
        src,
        m.words(),
        &[g.raw(), y.raw(), out.raw()],
        rows as u64,
    )?;
    Ok(out)
}
