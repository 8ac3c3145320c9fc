//! Hand-computed checks of the core: creation, views, broadcasting, reductions, matmul, autograd.

use might::autograd::{gradcheck, GradCheck};
use might::{DType, Device, ErrorKind, Result, Tensor};

mod common;

device_tests!(
    views_share_storage_and_read_in_logical_order,
    broadcasting_add_and_error_names_shapes,
    strict_broadcast_refuses_double_expansion,
    reductions,
    matmul_shapes_and_values,
    in_place_ops_write_through_views,
    chunk_split_squeeze_flatten_expand,
    in_place_ops_with_broadcast_or_strided_sources_reach_every_element,
    comparisons_and_where_match_plain_evaluation,
    transposed_views_copy_to_the_right_places,
    ; f64:
    autograd_mlp_like_graph,
    gradchecks,
    creation_and_rng_are_reproducible,
    dtypes_convert_and_half_matmul_accumulates_in_f32,
    printing_like_pytorch,
    backward_accumulates_and_frees_graph,
    long_row_sums_are_exact_on_integers,
);

fn t(dev: Device, v: &[f32], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap().to_device(dev).unwrap()
}

fn views_share_storage_and_read_in_logical_order(dev: Device) -> Result<()> {
    let a = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?
        .to_device(dev)?
        .reshape([2, 3])?;
    let b = a.t()?;
    assert!(b.same_storage(&a));
    assert!(!b.is_contiguous());
    assert_eq!(b.to_vec::<f32>()?, vec![0., 3., 1., 4., 2., 5.]);
    assert_eq!(a.slice(1, 0, 3, 2)?.to_vec::<f32>()?, vec![0., 2., 3., 5.]);
    assert_eq!(a.select(0, -1)?.to_vec::<f32>()?, vec![3., 4., 5.]);
    let e = b.view([6]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Layout);
    assert!(e.to_string().contains("contiguous()"), "{e}");
    assert_eq!(
        b.reshape([6])?.to_vec::<f32>()?,
        vec![0., 3., 1., 4., 2., 5.]
    );
    Ok(())
}

fn broadcasting_add_and_error_names_shapes(dev: Device) -> Result<()> {
    let a = t(dev, &[1., 2., 3., 4., 5., 6.], &[2, 3]);
    let b = t(dev, &[10., 20., 30.], &[3]);
    assert_eq!(
        a.add(&b)?.to_vec::<f32>()?,
        vec![11., 22., 33., 14., 25., 36.]
    );
    let c = t(dev, &[1., 2.], &[2, 1]);
    assert_eq!(a.mul(&c)?.to_vec::<f32>()?, vec![1., 2., 3., 8., 10., 12.]);
    let bad = t(dev, &[1., 2.], &[2]);
    let e = a.add(&bad).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("[2, 3]") && msg.contains("[2]") && msg.contains("smoke.rs"),
        "{msg}"
    );
    Ok(())
}

fn strict_broadcast_refuses_double_expansion(dev: Device) -> Result<()> {
    let a = t(dev, &[1., 2., 3.], &[3, 1]);
    let b = t(dev, &[1., 2., 3.], &[1, 3]);
    assert_eq!(a.add(&b)?.dims(), &[3, 3]);
    let _g = might::strict_broadcast();
    assert!(a.add(&b).is_err());
    Ok(())
}

fn reductions(dev: Device) -> Result<()> {
    let a = t(dev, &[1., 5., 3., 4., 2., 6.], &[2, 3]);
    assert_eq!(a.sum(0, false)?.to_vec::<f32>()?, vec![5., 7., 9.]);
    assert_eq!(a.sum(1, true)?.dims(), &[2, 1]);
    assert_eq!(a.sum(1, false)?.to_vec::<f32>()?, vec![9., 12.]);
    assert_eq!(a.mean_all()?.item()?, 3.5);
    let (v, i) = a.max(1, false)?;
    assert_eq!(v.to_vec::<f32>()?, vec![5., 6.]);
    assert_eq!(i.to_vec::<i64>()?, vec![1, 2]);
    assert_eq!(a.argmin(0, false)?.to_vec::<i64>()?, vec![0, 1, 0]);
    assert!((a.var(1, 1, false)?.to_vec::<f32>()?[0] - 4.0).abs() < 1e-6);
    assert_eq!(a.t()?.sum(0, false)?.to_vec::<f32>()?, vec![9., 12.]);
    Ok(())
}

fn matmul_shapes_and_values(dev: Device) -> Result<()> {
    let a = t(dev, &[1., 2., 3., 4., 5., 6.], &[2, 3]);
    let b = t(dev, &[1., 0., 0., 1., 1., 1.], &[3, 2]);
    assert_eq!(a.matmul(&b)?.to_vec::<f32>()?, vec![4., 5., 10., 11.]);
    // transposed operand, no copy
    assert_eq!(
        a.matmul(&a.t()?)?.to_vec::<f32>()?,
        vec![14., 32., 32., 77.]
    );
    let v = t(dev, &[1., 1., 1.], &[3]);
    assert_eq!(a.matmul(&v)?.to_vec::<f32>()?, vec![6., 15.]);
    assert_eq!(v.matmul(&v)?.dims(), &[] as &[usize]);
    let e = a.matmul(&a).unwrap_err().to_string();
    assert!(
        e.starts_with("matmul: inner dimensions differ: lhs [2, 3] vs rhs [2, 3]"),
        "{e}"
    );
    Ok(())
}

fn autograd_mlp_like_graph(dev: Device) -> Result<()> {
    let x = Tensor::from_vec(vec![1f64, 2., 3., 4.], [2, 2])?.to_device(dev)?;
    let w = Tensor::from_vec(vec![0.5f64, -1., 2., 1.], [2, 2])?
        .to_device(dev)?
        .with_requires_grad();
    let y = x.matmul(&w)?.relu()?.sum_all()?;
    y.backward()?;
    // relu'(xw) = [[1,1],[1,1]] here: xw = [[4.5, 1], [9.5, 1]]
    assert_eq!(w.grad().unwrap().to_vec::<f64>()?, vec![4., 4., 6., 6.]);
    Ok(())
}

fn gradchecks(dev: Device) -> Result<()> {
    let a = Tensor::randn([2, 3], DType::F64)?.to_device(dev)?;
    let b = Tensor::randn([3], DType::F64)?.to_device(dev)?;
    let o = GradCheck::default();
    gradcheck(
        |x| x[0].mul(&x[1])?.tanh()?.sum(1, false),
        &[a.clone(), b.clone()],
        o,
    )?;
    gradcheck(
        |x| x[0].div(&x[1].exp()?)?.gelu(),
        &[a.clone(), b.clone()],
        o,
    )?;
    gradcheck(|x| x[0].softmax(1), std::slice::from_ref(&a), o)?;
    gradcheck(|x| x[0].log_softmax(0), std::slice::from_ref(&a), o)?;
    gradcheck(|x| x[0].matmul(&x[1]), &[a.clone(), b.clone()], o)?;
    gradcheck(|x| x[0].t()?.matmul(&x[0]), std::slice::from_ref(&a), o)?;
    gradcheck(|x| Ok(x[0].max(1, false)?.0), std::slice::from_ref(&a), o)?;
    gradcheck(|x| x[0].var(1, 1, true), std::slice::from_ref(&a), o)?;
    gradcheck(|x| x[0].logsumexp(1, false), std::slice::from_ref(&a), o)?;
    gradcheck(|x| x[0].prod(1, false), std::slice::from_ref(&a), o)?;
    gradcheck(
        |x| Tensor::cat(&[x[0].clone(), x[0].slice(1, 0, 3, 2)?], 1),
        std::slice::from_ref(&a),
        o,
    )?;
    Ok(())
}

fn creation_and_rng_are_reproducible(dev: Device) -> Result<()> {
    assert_eq!(
        Tensor::arange(0.0, 1.0, 0.25, DType::F64)?
            .to_device(dev)?
            .to_vec::<f64>()?,
        vec![0., 0.25, 0.5, 0.75]
    );
    assert_eq!(
        Tensor::linspace(-1.0, 1.0, 5, DType::F32)?
            .to_device(dev)?
            .to_vec::<f32>()?,
        vec![-1., -0.5, 0., 0.5, 1.]
    );
    assert_eq!(
        Tensor::eye(2, DType::I64)?
            .to_device(dev)?
            .to_vec::<i64>()?,
        vec![1, 0, 0, 1]
    );
    assert_eq!(
        Tensor::full([2], 7.0, DType::U8)?
            .to_device(dev)?
            .to_vec::<u8>()?,
        vec![7, 7]
    );
    might::manual_seed(42);
    let a = Tensor::randn([1000], DType::F64)?.to_device(dev)?;
    might::manual_seed(42);
    let b = Tensor::randn([1000], DType::F64)?.to_device(dev)?;
    assert_eq!(a.to_vec::<f64>()?, b.to_vec::<f64>()?);
    let mean = a.mean_all()?.item()?;
    let std = a.std(0, 1, false)?.item()?;
    assert!(mean.abs() < 0.1 && (std - 1.0).abs() < 0.1, "{mean} {std}");
    let r = Tensor::rand_int(3, 7, [500])?
        .to_device(dev)?
        .to_vec::<i64>()?;
    assert!(r.iter().all(|&v| (3..7).contains(&v)) && r.contains(&3) && r.contains(&6));
    let u = Tensor::rand([500], DType::F32)?
        .to_device(dev)?
        .to_vec::<f32>()?;
    assert!(u.iter().all(|&v| (0.0..1.0).contains(&v)));
    let mut p = Tensor::randperm(10)
        .to_device(dev)
        .unwrap()
        .to_vec::<i64>()?;
    p.sort();
    assert_eq!(p, (0..10).collect::<Vec<i64>>());
    Ok(())
}

fn dtypes_convert_and_half_matmul_accumulates_in_f32(dev: Device) -> Result<()> {
    let a = Tensor::from_vec(vec![1.5f32, -2.25, 3.0, 0.1], [2, 2])?.to_device(dev)?;
    for dt in DType::ALL {
        let back = a.to_dtype(dt)?.to_dtype(DType::F32)?.to_vec::<f32>()?;
        match dt {
            DType::F32 | DType::F64 => assert_eq!(back, a.to_vec::<f32>()?),
            DType::F16 | DType::BF16 => {
                assert!((back[0] - 1.5).abs() < 1e-6 && (back[3] - 0.1).abs() < 1e-3)
            }
            DType::I64 | DType::U8 => assert_eq!(back[0], 1.0),
            DType::Bool => assert_eq!(back, vec![1., 1., 1., 1.]),
        }
    }
    let x = Tensor::randn([16, 64], DType::F32)?.to_device(dev)?;
    let w = Tensor::randn([64, 8], DType::F32)?.to_device(dev)?;
    let exact = x.matmul(&w)?.to_vec::<f32>()?;
    for dt in [DType::F16, DType::BF16] {
        let got = x.to_dtype(dt)?.matmul(&w.to_dtype(dt)?)?;
        assert_eq!(got.dtype(), dt);
        let got = got.to_dtype(DType::F32)?.to_vec::<f32>()?;
        let tol = if dt == DType::F16 { 0.1 } else { 0.5 };
        for (g, e) in got.iter().zip(&exact) {
            assert!((g - e).abs() < tol + 0.02 * e.abs(), "{dt}: {g} vs {e}");
        }
    }
    // elementwise ops work on half types through f32
    let h = Tensor::from_vec(vec![1.0f32, 4.0], [2])?
        .to_device(dev)?
        .to_dtype(DType::BF16)?;
    assert_eq!(
        h.sqrt()?.to_dtype(DType::F32)?.to_vec::<f32>()?,
        vec![1.0, 2.0]
    );
    Ok(())
}

fn in_place_ops_write_through_views(dev: Device) -> Result<()> {
    let a = Tensor::zeros([2, 3], DType::F32)?.to_device(dev)?;
    let col = a.select(1, 1)?;
    col.add_(&Tensor::new(&[5f32, 6.]).to_device(dev).unwrap())?;
    a.slice(1, 2, 3, 1)?.fill_(1.0)?;
    assert_eq!(a.to_vec::<f32>()?, vec![0., 5., 1., 0., 6., 1.]);
    a.mul_(&Tensor::new(&[2f32, 2., 2.]).to_device(dev).unwrap())?;
    a.add_scaled_(&Tensor::ones([2, 3], DType::F32)?.to_device(dev)?, -1.0)?;
    a.affine_(0.5, 0.0)?;
    assert_eq!(a.to_vec::<f32>()?, vec![-0.5, 4.5, 0.5, -0.5, 5.5, 0.5]);
    let i = Tensor::new(&[1i64, 2]).to_device(dev).unwrap();
    i.add_(&Tensor::new(&[10i64, 10]).to_device(dev).unwrap())?;
    assert_eq!(i.to_vec::<i64>()?, vec![11, 12]);
    Ok(())
}

fn chunk_split_squeeze_flatten_expand(dev: Device) -> Result<()> {
    let a = Tensor::arange(0.0, 10.0, 1.0, DType::F32)?.to_device(dev)?;
    let parts = a.chunk(3, 0)?;
    assert_eq!(
        parts.iter().map(|p| p.numel()).collect::<Vec<_>>(),
        vec![4, 4, 2]
    );
    assert_eq!(parts[2].to_vec::<f32>()?, vec![8., 9.]);
    assert_eq!(a.split(5, 0)?.len(), 2);
    let b = a.reshape([2, 1, 5])?;
    assert_eq!(b.squeeze(1)?.dims(), &[2, 5]);
    assert_eq!(b.squeeze(0)?.dims(), &[2, 1, 5]);
    assert_eq!(b.unsqueeze(-1)?.dims(), &[2, 1, 5, 1]);
    assert_eq!(b.flatten(1, 2)?.dims(), &[2, 5]);
    let e = Tensor::new(&[1f32, 2.])
        .to_device(dev)
        .unwrap()
        .reshape([2, 1])?
        .expand([2, 3])?;
    assert_eq!(e.strides(), &[1, 0]);
    assert_eq!(e.to_vec::<f32>()?, vec![1., 1., 1., 2., 2., 2.]);
    Ok(())
}

fn printing_like_pytorch(dev: Device) -> Result<()> {
    let a = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?.to_device(dev)?;
    assert_eq!(
        format!("{a}"),
        "tensor([[1., 2.],\n        [3., 4.]], shape=[2, 2], dtype=float32)"
    );
    let b = Tensor::new(&[0.5f64, -1.25]).to_device(dev).unwrap();
    assert_eq!(
        format!("{b}"),
        "tensor([ 0.5000, -1.2500], shape=[2], dtype=float64)"
    );
    let big = Tensor::zeros([100, 100], DType::F32)?.to_device(dev)?;
    let s = format!("{big}");
    assert!(s.contains("...") && s.len() < 1000, "{s}");
    let m = Tensor::new(&[1i64, 2])
        .to_device(dev)
        .unwrap()
        .eq(&Tensor::new(&[1i64, 3]).to_device(dev).unwrap())?;
    assert_eq!(
        format!("{m}"),
        "tensor([ True, False], shape=[2], dtype=bool)"
    );
    Ok(())
}

fn backward_accumulates_and_frees_graph(dev: Device) -> Result<()> {
    let w = Tensor::from_vec(vec![1f64, 2.], [2])?
        .to_device(dev)?
        .with_requires_grad();
    w.mul(&w)?.sum_all()?.backward()?;
    w.mul(&w)?.sum_all()?.backward()?;
    assert_eq!(w.grad().unwrap().to_vec::<f64>()?, vec![4., 8.]);
    w.zero_grad();
    let y = w.exp()?.sum_all()?;
    y.backward()?;
    // the graph was consumed: a second backward through it finds no grad_fn
    assert!(y.grad_fn().is_none());
    {
        let _g = might::no_grad();
        assert!(!w.mul(&w)?.requires_grad());
    }
    // detach cuts the graph
    assert!(!w.detach().requires_grad());
    Ok(())
}

/// A full sum large enough to split across threads (partial sums merged) agrees with an f64
/// reference, at 1 and 2 threads.
#[test]
fn large_full_sum_splits_across_threads() -> Result<()> {
    let n = 1 << 20;
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.3)
        .collect();
    let want: f64 = v.iter().map(|&x| x as f64).sum();
    let t = Tensor::from_vec(v, [n])?;
    for threads in [1, 2] {
        might::set_num_threads(threads);
        let got = t.sum_all()?.item()?;
        assert!(
            (got - want).abs() < 1e-3 * want.abs().max(1.0),
            "{threads}T: {got} vs {want}"
        );
        let mean = t.reshape([1024, 1024])?.mean_all()?.item()?;
        assert!(
            (mean - want / n as f64).abs() < 1e-6,
            "{threads}T mean: {mean}"
        );
    }
    Ok(())
}

/// Long rows are summed as four streams plus a tail: with small integers every partial sum
/// is exact, so the total must be too, whatever the length (odd, just past the cut, huge).
fn long_row_sums_are_exact_on_integers(dev: Device) -> Result<()> {
    might::set_num_threads(1);
    for n in [(1 << 18) - 1, 1 << 18, (1 << 18) + 77, 1_000_003] {
        let v: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
        let want: f64 = (0..n).map(|i| (i % 7) as f64).sum();
        let got = Tensor::from_vec(v, [n])?
            .to_device(dev)?
            .sum_all()?
            .item()?;
        assert_eq!(got, want, "n = {n}");
        let v64: Vec<f64> = (0..n).map(|i| (i % 5) as f64 - 2.0).collect();
        let want64: f64 = v64.iter().sum();
        let got64 = Tensor::from_vec(v64, [n])?
            .to_device(dev)?
            .sum_all()?
            .item()?;
        assert_eq!(got64, want64, "f64, n = {n}");
    }
    Ok(())
}

/// Products above the threading threshold are cut into per-thread blocks of rows (tall lhs)
/// or columns (wide rhs); every block must land in its place, with strided operands too.
/// Wide products with a column-major rhs also take the transposed route (`W @ x^T`, copied
/// back), small and large, a single row included.
#[test]
fn threaded_matmul_blocks_match_a_naive_product() -> Result<()> {
    fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for p in 0..k {
                for j in 0..n {
                    c[i * n + j] += a[i * k + p] * b[p * n + j];
                }
            }
        }
        c
    }
    // (m, k, n): wide (split by columns, odd sizes), tall (split by rows), the MLP shape
    for (m, k, n) in [
        (33, 70, 301),
        (301, 70, 45),
        (64, 784, 128),
        (1, 50, 7),
        (5, 9, 13),
    ] {
        let av: Vec<f32> = (0..m * k).map(|i| ((i * 31) % 17) as f32 - 8.0).collect();
        let bv: Vec<f32> = (0..k * n).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
        let a64: Vec<f64> = av.iter().map(|&x| x as f64).collect();
        let b64: Vec<f64> = bv.iter().map(|&x| x as f64).collect();
        let want = naive(&a64, &b64, m, k, n);
        let a = Tensor::from_vec(av, [m, k])?;
        // the rhs stored transposed: a column-major operand, as in every linear layer
        let bt = Tensor::from_vec(bv, [k, n])?.t()?.contiguous()?.t()?;
        for threads in [1, 2, 3] {
            might::set_num_threads(threads);
            let got = a.matmul(&bt)?.to_vec::<f32>()?;
            // small integers: every partial sum is exact in f32
            let got: Vec<f64> = got.iter().map(|&x| x as f64).collect();
            assert_eq!(got, want, "{m}x{k}x{n} at {threads} threads");
        }
    }
    might::set_num_threads(2);
    Ok(())
}

/// In-place updates whose source is broadcast or strided against a dense destination run
/// row by row in the SIMD build, a single long row cut into parallel chunks: every element
/// must get its own source value, below and above the threading threshold, on 1 and 2
/// threads; a strided destination keeps the generic loop.
fn in_place_ops_with_broadcast_or_strided_sources_reach_every_element(dev: Device) -> Result<()> {
    for threads in [1, 2] {
        might::set_num_threads(threads);
        for (r, c) in [(3usize, 5usize), (300, 257), (2, 40_001)] {
            let n = r * c;
            let base: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
            let t = |v: Vec<f32>, s: [usize; 2]| Tensor::from_vec(v, s)?.to_device(dev);
            // a scalar broadcast over everything: one long row
            let a = t(base.clone(), [r, c])?;
            a.affine_(0.5, 1.0)?;
            let want: Vec<f32> = base.iter().map(|x| x * 0.5 + 1.0).collect();
            assert_eq!(
                a.to_vec::<f32>()?,
                want,
                "affine_ {r}x{c}, {threads} threads"
            );
            // a row vector broadcast down the rows (source stride 1 along each row)
            let a = t(base.clone(), [r, c])?;
            let row: Vec<f32> = (0..c).map(|j| j as f32).collect();
            a.add_(&Tensor::from_vec(row, [c])?.to_device(dev)?)?;
            let want: Vec<f32> = (0..n).map(|i| base[i] + (i % c) as f32).collect();
            assert_eq!(
                a.to_vec::<f32>()?,
                want,
                "row add_ {r}x{c}, {threads} threads"
            );
            // a column broadcast along each row (source stride 0)
            let a = t(base.clone(), [r, c])?;
            let col: Vec<f32> = (0..r).map(|i| i as f32 + 2.0).collect();
            a.mul_(&Tensor::from_vec(col, [r, 1])?.to_device(dev)?)?;
            let want: Vec<f32> = (0..n).map(|i| base[i] * ((i / c) as f32 + 2.0)).collect();
            assert_eq!(
                a.to_vec::<f32>()?,
                want,
                "col mul_ {r}x{c}, {threads} threads"
            );
            // a transposed source (stride r along each destination row)
            let a = t(base.clone(), [r, c])?;
            let src: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
            a.add_(&t(src.clone(), [c, r])?.t()?)?;
            let want: Vec<f32> = (0..n).map(|i| base[i] + src[(i % c) * r + i / c]).collect();
            assert_eq!(
                a.to_vec::<f32>()?,
                want,
                "strided add_ {r}x{c}, {threads} threads"
            );
            // a strided destination (a transposed view), scalar source
            let a = t(base.clone(), [c, r])?;
            a.t()?.affine_(2.0, -1.0)?;
            let want: Vec<f32> = base.iter().map(|x| x * 2.0 - 1.0).collect();
            assert_eq!(
                a.to_vec::<f32>()?,
                want,
                "view affine_ {c}x{r}, {threads} threads"
            );
        }
    }
    might::set_num_threads(1);
    Ok(())
}

/// Comparisons run one straight loop per operator (IEEE: NaN compares false, so `ne` is
/// true), and `where` / `masked_fill` take straight loops for dense rows and a broadcast
/// scalar, a single long row cut into parallel chunks: every element must match a plain
/// evaluation, NaN included, on 1 and 2 threads, small and past the threading threshold.
fn comparisons_and_where_match_plain_evaluation(dev: Device) -> Result<()> {
    for threads in [1, 2] {
        might::set_num_threads(threads);
        for n in [7usize, 100_003] {
            let xs: Vec<f32> = (0..n)
                .map(|i| {
                    if i % 11 == 3 {
                        f32::NAN
                    } else {
                        (i % 5) as f32 - 2.0
                    }
                })
                .collect();
            let ys: Vec<f32> = (0..n).map(|i| (i % 3) as f32 - 1.0).collect();
            let (x, y) = (
                Tensor::from_vec(xs.clone(), [n])?.to_device(dev)?,
                Tensor::from_vec(ys.clone(), [n])?.to_device(dev)?,
            );
            type Ops = [(
                &'static str,
                fn(&Tensor, &Tensor) -> Result<Tensor>,
                fn(f32, f32) -> bool,
            ); 6];
            let ops: Ops = [
                ("eq", |a, b| a.eq(b), |a, b| a == b),
                ("ne", |a, b| a.ne(b), |a, b| a != b),
                ("lt", |a, b| a.lt(b), |a, b| a < b),
                ("le", |a, b| a.le(b), |a, b| a <= b),
                ("gt", |a, b| a.gt(b), |a, b| a > b),
                ("ge", |a, b| a.ge(b), |a, b| a >= b),
            ];
            for (name, op, plain) in ops {
                let got = op(&x, &y)?.to_vec::<bool>()?;
                let want: Vec<bool> = xs.iter().zip(&ys).map(|(&a, &b)| plain(a, b)).collect();
                assert_eq!(got, want, "{name}, n = {n}, {threads} threads");
                // a broadcast scalar on the right
                let got =
                    op(&x, &Tensor::new(&[0f32]).to_device(dev).unwrap())?.to_vec::<bool>()?;
                let want: Vec<bool> = xs.iter().map(|&a| plain(a, 0.0)).collect();
                assert_eq!(got, want, "{name} scalar, n = {n}, {threads} threads");
            }
            let mask = x.gt_scalar(0.0)?;
            let m: Vec<bool> = xs.iter().map(|&a| a > 0.0).collect();
            // masked_fill: a scalar broadcast between two dense operands
            let got = y.masked_fill(&mask, 9.0)?.to_vec::<f32>()?;
            let want: Vec<f32> = (0..n).map(|i| if m[i] { 9.0 } else { ys[i] }).collect();
            assert_eq!(got, want, "masked_fill, n = {n}, {threads} threads");
            // where with every operand dense, then with a scalar on the false side
            let got = Tensor::where_(&mask, &y, &x)?.to_vec::<f32>()?;
            for i in 0..n {
                let w = if m[i] { ys[i] } else { xs[i] };
                assert!(got[i] == w || (got[i].is_nan() && w.is_nan()), "where[{i}]");
            }
            let got = Tensor::where_(&mask, &y, &Tensor::new(&[-5f32]).to_device(dev).unwrap())?
                .to_vec::<f32>()?;
            let want: Vec<f32> = (0..n).map(|i| if m[i] { ys[i] } else { -5.0 }).collect();
            assert_eq!(got, want, "where scalar, n = {n}, {threads} threads");
            // a strided operand keeps the indexed loop
            let xt = Tensor::from_vec(xs.clone(), [1, n])?
                .to_device(dev)?
                .t()?
                .reshape([n])?;
            let got = Tensor::where_(&mask, &xt, &y)?.to_vec::<f32>()?;
            for i in 0..n {
                let w = if m[i] { xs[i] } else { ys[i] };
                assert!(
                    got[i] == w || (got[i].is_nan() && w.is_nan()),
                    "strided where[{i}]"
                );
            }
        }
    }
    might::set_num_threads(1);
    Ok(())
}

/// Transposed views are copied in tiles: every element must land in its place for shapes
/// that are not multiples of the tile, batches of matrices, views with an offset, other
/// dtypes, on 1 and 2 threads (the large cases cross the threading threshold).
fn transposed_views_copy_to_the_right_places(dev: Device) -> Result<()> {
    for threads in [1, 2] {
        might::set_num_threads(threads);
        for dims in [
            [1usize, 16, 16],
            [1, 17, 33],
            [3, 40, 9],
            [2, 300, 257],
            [5, 64, 130],
        ] {
            let [b, r, c] = dims;
            let n = b * r * c;
            let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let a = Tensor::from_vec(v, [b, r, c])?.to_device(dev)?;
            let t = a.transpose(1, 2)?.contiguous()?; // [b, c, r]
            let got = t.to_vec::<f32>()?;
            for bi in 0..b {
                for j in 0..c {
                    for i in 0..r {
                        let want = (bi * r * c + i * c + j) as f32;
                        assert_eq!(
                            got[(bi * c + j) * r + i],
                            want,
                            "{dims:?} {threads} threads"
                        );
                    }
                }
            }
            // a view with an offset (skip the first row and column), then transposed
            if r > 2 && c > 2 {
                let s = a
                    .narrow(1, 1, r - 1)?
                    .narrow(2, 2, c - 2)?
                    .transpose(1, 2)?;
                let got = s.contiguous()?.to_vec::<f32>()?;
                let (rr, cc) = (r - 1, c - 2);
                for bi in 0..b {
                    for j in 0..cc {
                        for i in 0..rr {
                            let want = (bi * r * c + (i + 1) * c + j + 2) as f32;
                            assert_eq!(got[(bi * cc + j) * rr + i], want, "narrowed {dims:?}");
                        }
                    }
                }
            }
        }
        let m = Tensor::from_vec((0..40 * 70).map(|i| i as i64).collect::<Vec<_>>(), [40, 70])?
            .to_device(dev)?;
        let got = m.t()?.contiguous()?.to_vec::<i64>()?;
        for (k, &g) in got.iter().enumerate() {
            let (j, i) = (k / 40, k % 40);
            assert_eq!(g, (i * 70 + j) as i64, "i64");
        }
    }
    might::set_num_threads(1);
    Ok(())
}
