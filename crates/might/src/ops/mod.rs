//! Tensor operations: shape checking, dtype dispatch, autograd recording. Each op's forward,
//! backward (the closure passed to `record`) and kernel call sit together; the loops themselves
//! live in `backend::cpu`.

pub mod binary;
pub mod conv;
pub mod convert;
pub mod index;
pub mod matmul;
pub mod reduce;
pub mod softmax;
pub mod unary;

/// Map every element of a float tensor with a closure written once for all float types
/// (`f16`/`bf16` compute through `f32`). Evaluates to `Result<Tensor>`. The closure captures
/// by value (see `backend::cpu::elementwise` for why).
#[macro_export]
#[doc(hidden)]
macro_rules! map_float {
    ($op:expr, $t:expr, |$x:ident| $body:expr) => {{
        use $crate::backend::cpu::{elementwise::unary_map, CpuStorage as S};
        let t: &$crate::Tensor = $t;
        t.check_float($op)?;
        let s = t.storage();
        let l = t.layout();
        let out = match s.cpu() {
            S::F32(v) => S::F32(unary_map(v, l, move |$x: f32| $body)),
            S::F64(v) => S::F64(unary_map(v, l, move |$x: f64| $body)),
            S::F16(v) => S::F16(unary_map(v, l, move |x: half::f16| {
                let $x = x.to_f32();
                half::f16::from_f32($body)
            })),
            S::BF16(v) => S::BF16(unary_map(v, l, move |x: half::bf16| {
                let $x = x.to_f32();
                half::bf16::from_f32($body)
            })),
            _ => unreachable!(),
        };
        drop(s);
        Ok::<$crate::Tensor, $crate::Error>($crate::Tensor::from_cpu(out, t.shape()))
    }};
}

/// Combine two float tensors of the same dtype (broadcast together) with a closure written once
/// for all float types. Evaluates to `Result<Tensor>`.
#[macro_export]
#[doc(hidden)]
macro_rules! zip_float {
    ($op:expr, $a:expr, $b:expr, |$x:ident, $y:ident| $body:expr) => {{
        use $crate::backend::cpu::{elementwise::binary_map, CpuStorage as S};
        let (a, b): (&$crate::Tensor, &$crate::Tensor) = ($a, $b);
        a.check_float($op)?;
        a.check_same_dtype($op, b)?;
        let shape = $crate::shape::broadcast_shapes($op, a.shape(), b.shape())?;
        let al = a.layout().broadcast_as($op, &shape)?;
        let bl = b.layout().broadcast_as($op, &shape)?;
        let (sa, sb) = (a.storage(), b.storage());
        let out = match (sa.cpu(), sb.cpu()) {
            (S::F32(u), S::F32(v)) => {
                S::F32(binary_map(u, &al, v, &bl, move |$x: f32, $y: f32| $body))
            }
            (S::F64(u), S::F64(v)) => {
                S::F64(binary_map(u, &al, v, &bl, move |$x: f64, $y: f64| $body))
            }
            (S::F16(u), S::F16(v)) => S::F16(binary_map(
                u,
                &al,
                v,
                &bl,
                move |x: half::f16, y: half::f16| {
                    let ($x, $y) = (x.to_f32(), y.to_f32());
                    half::f16::from_f32($body)
                },
            )),
            (S::BF16(u), S::BF16(v)) => S::BF16(binary_map(
                u,
                &al,
                v,
                &bl,
                move |x: half::bf16, y: half::bf16| {
                    let ($x, $y) = (x.to_f32(), y.to_f32());
                    half::bf16::from_f32($body)
                },
            )),
            _ => unreachable!(),
        };
        drop((sa, sb));
        Ok::<$crate::Tensor, $crate::Error>($crate::Tensor::from_cpu(out, shape))
    }};
}
