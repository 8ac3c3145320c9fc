//! Dimensions: the [`Dyn`] marker for a size known only at run time, the run-time check at
//! the boundary with dynamic tensors, and the `const fn` checks behind the compile-time
//! asserts of conv, pooling, reshape and flatten.
//!
//! Why `const fn`s that build their own message: stable Rust cannot format numbers in a
//! const panic (`const_format_args` is unstable), but it can panic with a `&str` built in
//! a byte buffer. So a wrong output size reads "Conv2d: output height OH is 27 but should
//! be (H + 2*P - K) / S + 1 = (28 + 2*1 - 3) / 1 + 1 = 28" instead of a bare "assertion
//! failed". Each check returns its message and the op panics in its own `const` block, so
//! rustc's note points at the user's call, not at a chain of helper frames.

use crate::{DType, Error, Result, Tensor};

/// A dimension whose size is only known at run time (typically the batch): `Tensor2<Dyn, 784>`.
///
/// It is a sentinel value (`usize::MAX`, which no real dimension can have), so it fits
/// where a `const N: usize` goes; rustc prints it as `usize::MAX` in its messages. The size
/// is checked once, when a dynamic [`Tensor`] enters the typed world
/// ([`Typed::from_dyn`](super::Typed::from_dyn)), and read back with `dims()`.
#[allow(non_upper_case_globals)]
pub const Dyn: usize = usize::MAX;

/// `[Dyn, 784]`-style text for a typed shape (for run-time error messages).
pub(crate) fn fmt_dims(dims: &[usize]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|&d| {
            if d == Dyn {
                "Dyn".to_string()
            } else {
                d.to_string()
            }
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The boundary check: does the dynamic tensor `t` have the typed shape `dims` (a [`Dyn`]
/// entry accepts any size) and element type `dtype`? Errors say both shapes.
#[track_caller]
pub(crate) fn check_boundary(op: &str, t: &Tensor, dims: &[usize], dtype: DType) -> Result<()> {
    let fits = t.rank() == dims.len()
        && t.dims()
            .iter()
            .zip(dims)
            .all(|(&got, &want)| want == Dyn || got == want);
    if !fits {
        return Err(Error::shape(
            op,
            format!(
                "tensor of shape {} does not fit typed shape {} (rank {}, every dim but Dyn fixed)",
                t.shape(),
                fmt_dims(dims),
                dims.len()
            ),
        ));
    }
    if t.dtype() != dtype {
        return Err(Error::dtype(
            op,
            format!(
                "tensor has dtype {}, the typed tensor holds {dtype}",
                t.dtype()
            ),
        ));
    }
    Ok(())
}

/// A panic message assembled at compile time: text and numbers in a fixed buffer.
pub(crate) struct Msg {
    buf: [u8; 320],
    len: usize,
}

impl Msg {
    pub(crate) const fn new() -> Msg {
        Msg {
            buf: [0; 320],
            len: 0,
        }
    }

    /// Append text (cut at the buffer's end).
    pub const fn s(mut self, s: &str) -> Msg {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() && self.len < self.buf.len() {
            self.buf[self.len] = b[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    /// Append a number in decimal, or `Dyn` for the marker.
    pub const fn n(self, v: usize) -> Msg {
        if v == Dyn {
            return self.s("Dyn");
        }
        let mut digits = [0u8; 20];
        let (mut k, mut v) = (0, v);
        loop {
            digits[k] = b'0' + (v % 10) as u8;
            k += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        let mut m = self;
        while k > 0 && m.len < m.buf.len() {
            k -= 1;
            m.buf[m.len] = digits[k];
            m.len += 1;
        }
        m
    }

    /// Append `[a, b, c]`.
    pub const fn dims(self, d: &[usize]) -> Msg {
        let mut m = self.s("[");
        let mut i = 0;
        while i < d.len() {
            if i > 0 {
                m = m.s(", ");
            }
            m = m.n(d[i]);
            i += 1;
        }
        m.s("]")
    }

    pub const fn as_str(&self) -> &str {
        let (head, _) = self.buf.split_at(self.len);
        match core::str::from_utf8(head) {
            Ok(s) => s,
            // cut inside a multi-byte character: drop the tail
            Err(e) => match core::str::from_utf8(head.split_at(e.valid_up_to()).0) {
                Ok(s) => s,
                Err(_) => "",
            },
        }
    }
}

impl Default for Msg {
    fn default() -> Self {
        Msg::new()
    }
}

/// Output size of a sliding window (conv or pool) along one axis:
/// `(input + 2·pad - kernel) / stride + 1`, `None` when the window does not fit. A `const fn`,
/// so a program can name the size instead of working it out by hand:
/// `const OH: usize = window_out(28, 3, 2, 1).unwrap(); // 14`.
pub const fn window_out(input: usize, kernel: usize, stride: usize, pad: usize) -> Option<usize> {
    if stride == 0 || input + 2 * pad < kernel {
        None
    } else {
        Some((input + 2 * pad - kernel) / stride + 1)
    }
}

/// Compile-time check of a conv/pool output size the user wrote as a type parameter.
/// `layer` names the layer ("Conv2d"), `axis` the axis ("height"), `input_name` and `name`
/// its input and output parameters ("H", "OH"). A [`Dyn`] input needs a `Dyn` output (the
/// size is then known at run time only). `Some(message)` when the size is wrong.
#[allow(clippy::too_many_arguments)]
pub(crate) const fn check_window(
    layer: &str,
    axis: &str,
    input_name: &str,
    name: &str,
    input: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
    out: usize,
) -> Option<Msg> {
    let head = Msg::new().s(layer).s(": output ").s(axis).s(" ").s(name);
    if input == Dyn {
        if out == Dyn {
            return None;
        }
        return Some(
            head.s(" is ")
                .n(out)
                .s(" but the input ")
                .s(axis)
                .s(" is Dyn: make it Dyn too"),
        );
    }
    match window_out(input, kernel, stride, pad) {
        None => Some(
            Msg::new()
                .s(layer)
                .s(": a window of ")
                .n(kernel)
                .s(" does not fit the input ")
                .s(axis)
                .s(" ")
                .n(input)
                .s(" padded by ")
                .n(pad),
        ),
        Some(want) if want != out => Some(
            head.s(" is ")
                .n(out)
                .s(" but should be (")
                .s(input_name)
                .s(" + 2*P - K) / S + 1 = (")
                .n(input)
                .s(" + 2*")
                .n(pad)
                .s(" - ")
                .n(kernel)
                .s(") / ")
                .n(stride)
                .s(" + 1 = ")
                .n(want),
        ),
        Some(_) => None,
    }
}

/// The first failed check of two.
pub(crate) const fn either(a: Option<Msg>, b: Option<Msg>) -> Option<Msg> {
    match a {
        Some(m) => Some(m),
        None => b,
    }
}

/// Compile-time check that kernel and stride are positive (a zero would divide by zero).
pub(crate) const fn check_positive(layer: &str, kernel: usize, stride: usize) -> Option<Msg> {
    if kernel == 0 || stride == 0 {
        return Some(
            Msg::new()
                .s(layer)
                .s(": kernel K = ")
                .n(kernel)
                .s(" and stride S = ")
                .n(stride)
                .s(" must be positive"),
        );
    }
    None
}

/// How many [`Dyn`] entries, and the product of the others (0 on overflow).
const fn static_numel(dims: &[usize]) -> (usize, usize) {
    let (mut dyns, mut n, mut i) = (0, 1usize, 0);
    while i < dims.len() {
        if dims[i] == Dyn {
            dyns += 1;
        } else {
            n = match n.checked_mul(dims[i]) {
                Some(p) => p,
                None => 0,
            };
        }
        i += 1;
    }
    (dyns, n)
}

/// Compile-time check of a reshape between typed shapes: the same element count; or, when
/// both have one [`Dyn`] dim, static parts of which one divides the other (then the `Dyn`
/// size follows from the run-time element count). Mixing `Dyn` and static is refused.
pub(crate) const fn check_reshape(from: &[usize], to: &[usize]) -> Option<Msg> {
    let (fd, fnum) = static_numel(from);
    let (td, tnum) = static_numel(to);
    let head = Msg::new().s("reshape: ").dims(from).s(" -> ").dims(to);
    if fd > 1 || td > 1 || fd != td {
        return Some(head.s(": both shapes need the same number of Dyn dims (0 or 1)"));
    }
    if fd == 0 && fnum != tnum {
        return Some(
            Msg::new()
                .s("reshape: ")
                .dims(from)
                .s(" has ")
                .n(fnum)
                .s(" elements, but ")
                .dims(to)
                .s(" has ")
                .n(tnum),
        );
    }
    if fd == 1 && (fnum == 0 || tnum == 0 || (fnum % tnum != 0 && tnum % fnum != 0)) {
        return Some(
            head.s(": ")
                .n(fnum)
                .s(" and ")
                .n(tnum)
                .s(" elements per Dyn step: neither divides the other"),
        );
    }
    None
}

/// Compile-time check of `flatten` `[B, C, H, W] -> [B, F]`: `F == C·H·W`.
pub(crate) const fn check_flatten(c: usize, h: usize, w: usize, f: usize) -> Option<Msg> {
    if c == Dyn || h == Dyn || w == Dyn {
        return Some(
            Msg::new()
                .s("flatten: C, H and W must be static, got ")
                .dims(&[c, h, w]),
        );
    }
    if c * h * w != f {
        return Some(
            Msg::new()
                .s("flatten: F is ")
                .n(f)
                .s(" but should be C*H*W = ")
                .n(c)
                .s("*")
                .n(h)
                .s("*")
                .n(w)
                .s(" = ")
                .n(c * h * w),
        );
    }
    None
}

/// Compile-time check that `perm` is a permutation of the dims and that the output dims the
/// caller wrote are the input's dims in that order.
pub(crate) const fn check_permute(dims: &[usize], perm: &[usize], out: &[usize]) -> Option<Msg> {
    let mut seen = [false; 8];
    let mut i = 0;
    while i < perm.len() {
        if perm[i] >= dims.len() || seen[perm[i]] {
            return Some(
                Msg::new()
                    .s("permute: ")
                    .dims(perm)
                    .s(" is not a permutation of 0..")
                    .n(dims.len()),
            );
        }
        seen[perm[i]] = true;
        i += 1;
    }
    let mut i = 0;
    while i < perm.len() {
        if out[i] != dims[perm[i]] {
            return Some(
                Msg::new()
                    .s("permute: output dim ")
                    .n(i)
                    .s(" is ")
                    .n(out[i])
                    .s(" but should be dim ")
                    .n(perm[i])
                    .s(" of ")
                    .dims(dims)
                    .s(" = ")
                    .n(dims[perm[i]]),
            );
        }
        i += 1;
    }
    None
}

/// Compile-time check that a constructor that allocates from the type alone has no [`Dyn`]
/// dim (its size would be unknown).
pub(crate) const fn check_static(op: &str, dims: &[usize]) -> Option<Msg> {
    let mut i = 0;
    while i < dims.len() {
        if dims[i] == Dyn {
            return Some(
                Msg::new()
                    .s(op)
                    .s(": dim ")
                    .n(i)
                    .s(" of ")
                    .dims(dims)
                    .s(" is Dyn; build the tensor with from_dyn instead"),
            );
        }
        i += 1;
    }
    None
}

/// Compile-time check that columns `off..off + len` fit a last dim of `d`.
pub(crate) const fn check_narrow(off: usize, len: usize, d: usize) -> Option<Msg> {
    if off + len > d {
        return Some(
            Msg::new()
                .s("narrow_last: columns ")
                .n(off)
                .s("..")
                .n(off + len)
                .s(" do not fit a last dim of ")
                .n(d),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_window_sizes() {
        assert_eq!(Msg::new().s("a ").n(0).s(" ").n(1234).as_str(), "a 0 1234");
        assert_eq!(Msg::new().dims(&[Dyn, 7]).as_str(), "[Dyn, 7]");
        assert_eq!(window_out(28, 3, 1, 1), Some(28));
        assert_eq!(window_out(28, 2, 2, 0), Some(14));
        assert_eq!(window_out(2, 5, 1, 1), None);
        assert_eq!(fmt_dims(&[Dyn, 3]), "[Dyn, 3]");
    }
}
