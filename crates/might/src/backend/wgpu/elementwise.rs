//! Elementwise kernels: one generated WGSL kernel per (operand dtypes, expression), one thread
//! per output element, operands read through their layouts (broadcasts are zero strides).

use super::wgsl::{self, ty};
use super::{groups, Meta, WgpuStorage as S, ENTRY, FIRST_SLOT};
use crate::backend::{BinaryOp, CmpOp, UnaryOp};
use crate::{DType, Error, Layout, Result};

/// `out[i] = expr` over the elements of `ins` (named `names`), `out` a new contiguous buffer
/// of `out_dt`; `scalars` go in slots 0 and 1.
pub(super) fn map(
    op: &str,
    ins: &[(&S, &Layout)],
    names: &[&str],
    out_dt: DType,
    expr: &str,
    scalars: [f64; 2],
) -> Result<S> {
    let n = ins[0].1.numel();
    let out = ins[0].0.new_like(op, out_dt, n)?;
    run(op, ins, names, (&out, None), expr, scalars, None)?;
    Ok(out)
}

/// `dst[dl] = expr`, where `expr` may read the current value as `d`. An input that is the
/// destination's own buffer is copied first (a buffer cannot be bound for reading and
/// writing in one kernel).
pub(super) fn map_inplace(
    op: &str,
    dst: &S,
    dl: &Layout,
    ins: &[(&S, &Layout)],
    names: &[&str],
    expr: &str,
    scalars: [f64; 2],
) -> Result<()> {
    let copies: Vec<Option<S>> = ins
        .iter()
        .map(|(x, l)| (x.raw() == dst.raw()).then(|| copy(x, l)).transpose())
        .collect::<Result<_>>()?;
    let shapes: Vec<Layout> = ins
        .iter()
        .map(|(_, l)| Layout::contiguous(l.shape().clone()))
        .collect();
    let ins: Vec<(&S, &Layout)> = ins
        .iter()
        .zip(&copies)
        .zip(&shapes)
        .map(|((x, c), cl)| c.as_ref().map_or(*x, |c| (c, cl)))
        .collect();
    run(op, &ins, names, (dst, Some(dl)), expr, scalars, None)
}

fn run(
    op: &str,
    ins: &[(&S, &Layout)],
    names: &[&str],
    (out, ol): (&S, Option<&Layout>),
    expr: &str,
    scalars: [f64; 2],
    ints: Option<[i64; 2]>,
) -> Result<()> {
    let n = ol.map_or(ins.first().map_or(0, |x| x.1.numel()), |l| l.numel());
    let mut m = Meta::new(n, FIRST_SLOT + ins.len() + 1);
    match ints {
        Some([a, b]) => m.i(0, a).i(1, b),
        None => m.f(0, scalars[0]).f(1, scalars[1]),
    };
    for (k, (_, l)) in ins.iter().enumerate() {
        m.layout(FIRST_SLOT + k, l);
    }
    if let Some(l) = ol {
        m.layout(FIRST_SLOT + ins.len(), l);
    }
    let key = format!(
        "map|{}|{}|{}|{}|{}",
        ins.iter()
            .map(|x| ty(x.0.dtype))
            .collect::<Vec<_>>()
            .join(","),
        names.join(","),
        ty(out.dtype),
        ol.is_some(),
        expr
    );
    let src = || {
        let mut s = String::from(wgsl::PRELUDE);
        s += wgsl::MATH;
        s += wgsl::IPOW;
        s += "fn islot(k: u32) -> i32 { return bitcast<i32>(prm[1u + k]); }\n";
        for (k, (x, _)) in ins.iter().enumerate() {
            s += &format!(
                "@group(0) @binding({}) var<storage, read> in{k}: array<{}>;\n",
                k + 1,
                ty(x.dtype)
            );
        }
        s += &format!(
            "@group(0) @binding({}) var<storage, read_write> out: array<{}>;\n",
            ins.len() + 1,
            ty(out.dtype)
        );
        s += ENTRY;
        for (k, name) in names.iter().enumerate() {
            s += &format!(
                "    let {name} = in{k}[loc(slot({}u), i)];\n",
                FIRST_SLOT + k
            );
        }
        if ol.is_some() {
            s += &format!(
                "    let o = loc(slot({}u), i);\n    let d = out[o];\n",
                FIRST_SLOT + ins.len()
            );
            s += &format!("    out[o] = {expr};\n}}\n");
        } else {
            s += &format!("    out[i] = {expr};\n}}\n");
        }
        s
    };
    let mut bufs: Vec<&wgpu::Buffer> = ins.iter().map(|x| x.0.raw()).collect();
    bufs.push(out.raw());
    out.ctx().launch(op, &key, src, m.words(), &bufs, groups(n))
}

/// A buffer of `n` zeros (f32) on `like`'s GPU.
pub(super) fn zeros_like(like: &S, n: usize) -> Result<S> {
    let out = like.new_like("zeros", DType::F32, n)?;
    map_inplace(
        "zeros",
        &out,
        &Layout::contiguous(vec![n]),
        &[],
        &[],
        "0.0",
        [0.0; 2],
    )?;
    Ok(out)
}

/// The elements of `s[l]` in a new contiguous buffer.
pub(super) fn copy(s: &S, l: &Layout) -> Result<S> {
    map("contiguous", &[(s, l)], &["x"], s.dtype, "x", [0.0; 2])
}

/// `s[l]` converted to `to` as the CPU converts (through i64 into u8, so it wraps).
pub(super) fn to_dtype(s: &S, l: &Layout, to: DType) -> Result<S> {
    super::check_dtype("to_dtype", to)?;
    let from = s.dtype;
    let expr = match (ty(from), ty(to)) {
        (a, b) if a == b && from != DType::Bool && to != DType::Bool && to != DType::U8 => "x",
        (_, _) if from == to => "x",
        ("f32", _) if to == DType::Bool => "select(0u, 1u, x != 0.0)",
        ("f32", "i32") => "select(i32(x), 0, is_nan_(x))",
        ("f32", "u32") => "u32(select(i32(x), 0, is_nan_(x))) & 255u",
        ("i32", "f32") | ("u32", "f32") => "f32(x)",
        ("u32", "i32") => "i32(x)",
        ("i32", "u32") if to == DType::Bool => "select(0u, 1u, x != 0)",
        ("i32", "u32") => "u32(x) & 255u",
        ("u32", "u32") if to == DType::Bool => "select(0u, 1u, x != 0u)",
        _ => "x",
    };
    map("to_dtype", &[(s, l)], &["x"], to, expr, [0.0; 2])
}

#[track_caller]
fn not_float(op: &str, dt: DType) -> Error {
    Error::dtype(op, format!("expected a floating-point tensor, got {dt}"))
}

#[track_caller]
fn mismatch(op: &str, a: DType, b: DType) -> Error {
    Error::dtype(op, format!("dtypes differ: {a} vs {b}"))
}

pub(super) fn unary(s: &S, l: &Layout, op: UnaryOp) -> Result<S> {
    let dt = s.dtype;
    if let UnaryOp::Affine(mul, add) = op {
        if dt == DType::I64 || dt == DType::U8 {
            // integers: exact when the factors are whole, else through f32
            let whole =
                mul.fract() == 0.0 && add.fract() == 0.0 && mul.abs() < 2e9 && add.abs() < 2e9;
            let expr = match (dt, whole) {
                (DType::I64, true) => "x * islot(0u) + islot(1u)",
                (DType::I64, false) => "i32(f32(x) * fslot(0u) + fslot(1u))",
                (_, true) => "u32(clamp(i32(x) * islot(0u) + islot(1u), 0, 255))",
                (_, false) => "u32(clamp(f32(x) * fslot(0u) + fslot(1u), 0.0, 255.0))",
            };
            let out = s.new_like("affine", dt, l.numel())?;
            let m_ints = whole.then_some([mul as i64, add as i64]);
            run_unary_int(s, l, &out, expr, [mul, add], m_ints)?;
            return Ok(out);
        }
    }
    if dt != DType::F32 {
        return Err(not_float(op.name(), dt));
    }
    let sc = match op {
        UnaryOp::Powf(p) => [p, 0.0],
        UnaryOp::Clamp(lo, hi) => [lo, hi],
        UnaryOp::Affine(m, a) => [m, a],
        _ => [0.0; 2],
    };
    map(op.name(), &[(s, l)], &["x"], dt, wgsl::unary_f(op), sc)
}

fn run_unary_int(
    s: &S,
    l: &Layout,
    out: &S,
    expr: &str,
    sc: [f64; 2],
    ints: Option<[i64; 2]>,
) -> Result<()> {
    run("affine", &[(s, l)], &["x"], (out, None), expr, sc, ints)
}

pub(super) fn unary_backward(g: &S, gl: &Layout, s: &S, sl: &Layout, op: UnaryOp) -> Result<S> {
    if g.dtype != DType::F32 || s.dtype != DType::F32 {
        return Err(not_float(
            op.name(),
            if g.dtype != DType::F32 {
                g.dtype
            } else {
                s.dtype
            },
        ));
    }
    let sc = match op {
        UnaryOp::Powf(p) => [p, 0.0],
        UnaryOp::Clamp(lo, hi) => [lo, hi],
        UnaryOp::Affine(m, a) => [m, a],
        _ => [0.0; 2],
    };
    map(
        op.name(),
        &[(g, gl), (s, sl)],
        &["g", "s"],
        DType::F32,
        wgsl::unary_backward_f(op),
        sc,
    )
}

/// The expression of `op` on two elements `a`, `b` of dtype `dt` (f32 or int64; u8 goes
/// through int64, see [`binary_u8`]).
fn binary_expr(op: BinaryOp, dt: DType) -> Result<&'static str> {
    let float_only = matches!(
        op,
        BinaryOp::BceWithLogits | BinaryOp::MaximumGradWeight | BinaryOp::MinimumGradWeight
    );
    match dt {
        DType::F32 => Ok(wgsl::binary_f(op)),
        _ if float_only => Err(not_float(op.name(), dt)),
        DType::I64 => Ok(wgsl::binary_i(op)),
        _ => Err(Error::dtype(
            op.name(),
            format!("arithmetic is not defined for {dt} tensors"),
        )),
    }
}

pub(super) fn binary(a: &S, al: &Layout, b: &S, bl: &Layout, op: BinaryOp) -> Result<S> {
    let dt = a.dtype;
    if dt != b.dtype {
        let float_only = matches!(
            op,
            BinaryOp::BceWithLogits | BinaryOp::MaximumGradWeight | BinaryOp::MinimumGradWeight
        );
        return Err(if float_only {
            not_float(op.name(), dt)
        } else {
            mismatch(op.name(), dt, b.dtype)
        });
    }
    if dt == DType::U8 {
        return binary_u8(a, al, b, bl, op);
    }
    let e = binary_expr(op, dt)?;
    map(op.name(), &[(a, al), (b, bl)], &["a", "b"], dt, e, [0.0; 2])
}

/// u8 arithmetic: in i32, keeping the low byte (u8's wrapping result).
fn binary_u8(a: &S, al: &Layout, b: &S, bl: &Layout, op: BinaryOp) -> Result<S> {
    let ai = to_dtype(a, al, DType::I64)?;
    let bi = to_dtype(b, bl, DType::I64)?;
    let c = Layout::contiguous(al.shape().clone());
    let r = binary(&ai, &c, &bi, &c, op)?;
    to_dtype(&r, &c, DType::U8)
}

pub(super) fn binary_inplace(a: &S, al: &Layout, b: &S, bl: &Layout, op: BinaryOp) -> Result<()> {
    if matches!(
        op,
        BinaryOp::BceWithLogits | BinaryOp::MaximumGradWeight | BinaryOp::MinimumGradWeight
    ) {
        return Err(Error::invalid(op.name(), "has no in-place form"));
    }
    if a.dtype != b.dtype {
        return Err(mismatch(op.name(), a.dtype, b.dtype));
    }
    if a.dtype == DType::U8 {
        let r = binary_u8(a, al, b, bl, op)?;
        return assign(a, al, &r, &Layout::contiguous(al.shape().clone()));
    }
    // `a` is the destination's current value `d`
    let e = wrap_a(binary_expr(op, a.dtype)?);
    map_inplace(op.name(), a, al, &[(b, bl)], &["b"], &e, [0.0; 2])
}

/// `a += alpha · b` (f32).
pub(super) fn add_scaled_inplace(
    a: &S,
    al: &Layout,
    b: &S,
    bl: &Layout,
    alpha: f64,
) -> Result<bool> {
    if a.dtype != DType::F32 || b.dtype != DType::F32 {
        return Ok(false);
    }
    map_inplace(
        "add_",
        a,
        al,
        &[(b, bl)],
        &["b"],
        "d + b * fslot(0u)",
        [alpha, 0.0],
    )?;
    Ok(true)
}

/// `a = a · mul + add` (f32).
pub(super) fn affine_inplace(a: &S, al: &Layout, mul: f64, add: f64) -> Result<bool> {
    if a.dtype != DType::F32 {
        return Ok(false);
    }
    map_inplace(
        "affine_",
        a,
        al,
        &[],
        &[],
        "d * fslot(0u) + fslot(1u)",
        [mul, add],
    )?;
    Ok(true)
}

/// `expr` with `a` standing for the destination's value `d`.
fn wrap_a(expr: &str) -> String {
    // expressions name their operands `a` and `b` as whole identifiers
    let mut out = String::new();
    let chars: Vec<char> = expr.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let next = chars.get(i + 1);
        let ident = |ch: Option<&char>| ch.is_some_and(|c| c.is_alphanumeric() || *c == '_');
        if c == 'a' && !ident(prev.as_ref()) && !ident(next) {
            out.push('d');
        } else {
            out.push(c);
        }
    }
    out
}

/// `dst[dl] = src[sl]`.
pub(super) fn assign(dst: &S, dl: &Layout, src: &S, sl: &Layout) -> Result<()> {
    if dst.dtype != src.dtype {
        return Err(mismatch("copy_", dst.dtype, src.dtype));
    }
    map_inplace("copy_", dst, dl, &[(src, sl)], &["x"], "x", [0.0; 2])
}

pub(super) fn cmp(a: &S, al: &Layout, b: &S, bl: &Layout, op: CmpOp) -> Result<S> {
    if a.dtype != b.dtype {
        return Err(mismatch("compare", a.dtype, b.dtype));
    }
    let t = match op {
        CmpOp::Eq => "a == b",
        CmpOp::Ne => "a != b",
        CmpOp::Lt => "a < b",
        CmpOp::Le => "a <= b",
        CmpOp::Gt => "a > b",
        CmpOp::Ge => "a >= b",
    };
    // NaN compares false to everything (`ne`: true), checked on the bits
    let e = match (a.dtype, op) {
        (DType::F32, CmpOp::Ne) => format!("select(0u, 1u, is_nan_(a) || is_nan_(b) || {t})"),
        (DType::F32, _) => format!("select(0u, 1u, !is_nan_(a) && !is_nan_(b) && {t})"),
        _ => format!("select(0u, 1u, {t})"),
    };
    map(
        "compare",
        &[(a, al), (b, bl)],
        &["a", "b"],
        DType::Bool,
        &e,
        [0.0; 2],
    )
}

pub(super) fn where_cond(c: &S, cl: &Layout, a: &S, al: &Layout, b: &S, bl: &Layout) -> Result<S> {
    if c.dtype != DType::Bool {
        return Err(Error::dtype("where", "condition must be bool"));
    }
    if a.dtype != b.dtype {
        return Err(mismatch("where", a.dtype, b.dtype));
    }
    map(
        "where",
        &[(c, cl), (a, al), (b, bl)],
        &["c", "a", "b"],
        a.dtype,
        "select(b, a, c != 0u)",
        [0.0; 2],
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn wrap_a_renames_whole_identifiers() {
        assert_eq!(
            super::wrap_a("select(b, a, is_nan_(a) || a > b)"),
            "select(b, d, is_nan_(d) || d > b)"
        );
        assert_eq!(super::wrap_a("max(a, b)"), "max(d, b)");
    }
}
