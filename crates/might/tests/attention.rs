//! The fused attention kernel (`scaled_dot_product_attention` without mask or dropout) against
//! the composed ops (`q kᵀ`, softmax or `causal_softmax`, `p v`): outputs and all three input
//! gradients, f32 and f64, causal and not, `L != S`, head dims that are not multiples of the
//! vector width, strided (head-split) inputs, rank 2 to 4; and finite-difference gradients.

use might::autograd::gradcheck::{gradcheck, GradCheck};
use might::nn::causal_softmax;
use might::nn::functional::scaled_dot_product_attention as sdpa;
use might::{DType, Result, Tensor};

fn composed(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool) -> Result<Tensor> {
    let scale = 1.0 / (q.dims()[q.rank() - 1] as f64).sqrt();
    let s = q.matmul(&k.transpose(-2, -1)?)?;
    let p = if causal {
        causal_softmax(&s, scale, 0)?
    } else {
        s.mul_scalar(scale)?.softmax(-1)?
    };
    p.matmul(v)
}

fn max_rel(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.dims(), b.dims());
    let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
    let big = b.iter().fold(1e-30f64, |m, x| m.max(x.abs()));
    a.iter()
        .zip(&b)
        .fold(0.0, |m, (x, y)| m.max((x - y).abs() / big))
}

/// Inputs `[lead.., L, D]`; for rank 4 built as `[B, L, H, D]` then transposed, the layout a
/// transformer's head split gives (rows `H·D` apart).
fn input(lead: &[usize], rows: usize, cols: usize, dt: DType) -> Result<Tensor> {
    let t = if lead.len() == 2 {
        Tensor::randn([lead[0], rows, lead[1], cols], dt)?.transpose(1, 2)?
    } else {
        let mut shape = lead.to_vec();
        shape.extend([rows, cols]);
        Tensor::randn(shape, dt)?
    };
    Ok(t.detach().with_requires_grad())
}

#[test]
fn fused_matches_composed_ops_forward_and_backward() -> Result<()> {
    let cases: &[(&[usize], usize, usize, usize, usize)] = &[
        // lead, L, S, D, Dv
        (&[2, 3], 64, 64, 32, 32),
        (&[2, 2], 7, 7, 8, 8),
        (&[1, 3], 5, 9, 20, 3),
        (&[2, 1], 19, 6, 17, 33),
        (&[3], 33, 33, 16, 16),
        (&[], 4, 70, 5, 6),
    ];
    for dt in [DType::F32, DType::F64] {
        for &(lead, l, s, d, dv) in cases {
            for causal in [false, true] {
                let (q, k, v) = (
                    input(lead, l, d, dt)?,
                    input(lead, s, d, dt)?,
                    input(lead, s, dv, dt)?,
                );
                let what =
                    format!("{dt:?} lead {lead:?} L {l} S {s} D {d} Dv {dv} causal {causal}");
                let y = sdpa(&q, &k, &v, None, 0.0, causal)?;
                assert_eq!(
                    y.grad_fn(),
                    Some("ScaledDotProductAttentionBackward"),
                    "{what}: fused path not taken"
                );
                let yr = composed(&q, &k, &v, causal)?;
                let tol = if dt == DType::F32 { 2e-5 } else { 1e-12 };
                let e = max_rel(&y, &yr);
                assert!(e <= tol, "{what}: output off by {e:e}");
                // backward through both, with the same upstream gradient
                let w = Tensor::randn(y.shape().clone(), dt)?;
                let mut grads = Vec::new();
                for out in [&y, &yr] {
                    for t in [&q, &k, &v] {
                        t.zero_grad();
                    }
                    out.mul(&w)?.sum_all()?.backward()?;
                    grads.push([q.grad(), k.grad(), v.grad()].map(|g| g.expect("a gradient")));
                }
                for (i, name) in ["q", "k", "v"].iter().enumerate() {
                    let e = max_rel(&grads[0][i], &grads[1][i]);
                    assert!(e <= 4.0 * tol, "{what}: grad of {name} off by {e:e}");
                }
            }
        }
    }
    Ok(())
}

#[test]
fn fused_gradients_match_finite_differences() -> Result<()> {
    let gc = GradCheck::default();
    for causal in [false, true] {
        let q = Tensor::randn([2, 4, 3], DType::F64)?;
        let k = Tensor::randn([2, 6, 3], DType::F64)?;
        let v = Tensor::randn([2, 6, 5], DType::F64)?;
        gradcheck(
            |i| sdpa(&i[0], &i[1], &i[2], None, 0.0, causal),
            &[q, k, v],
            gc,
        )?;
    }
    Ok(())
}

#[test]
fn masked_or_dropout_attention_keeps_the_composed_path() -> Result<()> {
    let q = Tensor::randn([2, 3, 4], DType::F32)?.with_requires_grad();
    let m = Tensor::from_vec(vec![true, false, true], [1, 3])?;
    let y = sdpa(&q, &q, &q, Some(&m), 0.0, false)?;
    assert_ne!(y.grad_fn(), Some("ScaledDotProductAttentionBackward"));
    Ok(())
}
