//! Composite tensor ops (sort, topk, cumsum/cumprod, flip/roll, repeat/tile,
//! repeat_interleave, scatter/scatter_reduce, multi-dim logsumexp/prod, multinomial, where on
//! every dtype): hand-computed values, gradchecks, PyTorch fixtures, errors.

use might::autograd::{gradcheck, GradCheck};
use might::{manual_seed, DType, Device, ErrorKind, Result, Tensor};

mod common;

device_tests!(
    sort_is_stable_and_puts_nan_last,
    topk_picks_largest_and_smallest,
    cumsum_cumprod_by_hand,
    flip_and_roll_by_hand,
    repeat_tile_and_interleave_by_hand,
    scatter_by_hand,
    scatter_reduce_by_hand,
    multidim_reductions_by_hand,
    multinomial_frequencies_follow_the_weights,
    multinomial_without_replacement_never_repeats,
    bad_arguments_are_errors_naming_the_op,
    zero_sizes_and_half_floats,
    ; f64:
    where_accepts_every_dtype,
    ints_sort_and_accumulate_in_int64,
    gradcheck_sort_and_topk,
    gradcheck_cumsum_and_cumprod_with_zeros,
    gradcheck_flip_roll_repeat,
    gradcheck_scatter_reduce_every_reduction,
    gradcheck_multidim_reductions,
    matches_pytorch_fixture,
);

fn t(dev: Device, v: &[f32], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap().to_device(dev).unwrap()
}

fn t64(dev: Device, v: &[f64], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap().to_device(dev).unwrap()
}

fn ti(dev: Device, v: &[i64], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap().to_device(dev).unwrap()
}

fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let same_nan = a.is_nan() && b.is_nan();
        assert!(
            same_nan || (a - b).abs() <= tol * (1.0 + b.abs()),
            "{what}[{i}]: got {a}, want {b}"
        );
    }
}

fn tight() -> GradCheck {
    GradCheck::default()
}

// ---------------------------------------------------------------- hand-computed forward values

fn sort_is_stable_and_puts_nan_last(dev: Device) -> Result<()> {
    let x = t(dev, &[3., 1., f32::NAN, 1., 2., 3.], &[6]);
    let (v, i) = x.sort(0, false)?;
    assert_eq!(i.to_vec::<i64>()?, vec![1, 3, 4, 0, 5, 2]);
    let v = v.to_vec::<f32>()?;
    assert_eq!(&v[..5], &[1., 1., 2., 3., 3.]);
    assert!(v[5].is_nan());
    // descending: NaN first, equal values still in their original order
    let (_, i) = x.sort(-1, true)?;
    assert_eq!(i.to_vec::<i64>()?, vec![2, 0, 5, 4, 1, 3]);
    assert_eq!(x.argsort(0, true)?.to_vec::<i64>()?, vec![2, 0, 5, 4, 1, 3]);
    // along dim 0 of a matrix: each column on its own
    let m = t(dev, &[5., 0., 1., 2., 3., 4.], &[3, 2]);
    let (v, i) = m.sort(0, false)?;
    assert_eq!(v.to_vec::<f32>()?, vec![1., 0., 3., 2., 5., 4.]);
    assert_eq!(i.to_vec::<i64>()?, vec![1, 0, 2, 1, 0, 2]);
    // a 0-d tensor sorts to itself
    let (v, i) = Tensor::scalar(7f32).to_device(dev)?.sort(0, false)?;
    assert_eq!((v.dims().len(), v.item()?, i.item()?), (0, 7.0, 0.0));
    Ok(())
}

fn topk_picks_largest_and_smallest(dev: Device) -> Result<()> {
    let x = t(dev, &[1., 9., 3., 7., 5., 2., 8., 4.], &[2, 4]);
    let (v, i) = x.topk(2, 1, true, true)?;
    assert_eq!(v.dims(), &[2, 2]);
    assert_eq!(v.to_vec::<f32>()?, vec![9., 7., 8., 5.]);
    assert_eq!(i.to_vec::<i64>()?, vec![1, 3, 2, 0]);
    let (v, i) = x.topk(1, 0, false, false)?;
    assert_eq!(v.to_vec::<f32>()?, vec![1., 2., 3., 4.]);
    assert_eq!(i.to_vec::<i64>()?, vec![0, 1, 0, 1]);
    // NaN counts as the largest
    let y = t(dev, &[1., f32::NAN, 3.], &[3]);
    assert_eq!(y.topk(2, 0, true, true)?.1.to_vec::<i64>()?, vec![1, 2]);
    assert_eq!(y.topk(2, 0, false, true)?.1.to_vec::<i64>()?, vec![0, 2]);
    assert_eq!(x.topk(0, 1, true, true)?.0.dims(), &[2, 0]);
    Ok(())
}

fn cumsum_cumprod_by_hand(dev: Device) -> Result<()> {
    let x = t(dev, &[1., 2., 3., 4., 5., 6.], &[2, 3]);
    assert_eq!(x.cumsum(1)?.to_vec::<f32>()?, vec![1., 3., 6., 4., 9., 15.]);
    assert_eq!(x.cumsum(0)?.to_vec::<f32>()?, vec![1., 2., 3., 5., 7., 9.]);
    assert_eq!(
        x.cumprod(-1)?.to_vec::<f32>()?,
        vec![1., 2., 6., 4., 20., 120.]
    );
    let z = t(dev, &[2., 0., 3., 4.], &[4]);
    assert_eq!(z.cumprod(0)?.to_vec::<f32>()?, vec![2., 0., 0., 0.]);
    // longer than one scan step, on a non-power-of-two length
    let ones = Tensor::ones([13], DType::F32)?.to_device(dev)?;
    let want: Vec<f32> = (1..=13).map(|v| v as f32).collect();
    assert_eq!(ones.cumsum(0)?.to_vec::<f32>()?, want);
    // int64 stays int64
    let i = ti(dev, &[3, -1, 4], &[3]);
    assert_eq!(i.cumsum(0)?.to_vec::<i64>()?, vec![3, 2, 6]);
    assert_eq!(i.cumprod(0)?.to_vec::<i64>()?, vec![3, -3, -12]);
    Ok(())
}

fn flip_and_roll_by_hand(dev: Device) -> Result<()> {
    let x = t(dev, &[1., 2., 3., 4., 5., 6.], &[2, 3]);
    assert_eq!(x.flip(&[1])?.to_vec::<f32>()?, vec![3., 2., 1., 6., 5., 4.]);
    assert_eq!(
        x.flip(&[0, 1])?.to_vec::<f32>()?,
        vec![6., 5., 4., 3., 2., 1.]
    );
    assert_eq!(x.flip(&[])?.to_vec::<f32>()?, x.to_vec::<f32>()?);
    assert_eq!(
        x.roll(&[1], &[1])?.to_vec::<f32>()?,
        vec![3., 1., 2., 6., 4., 5.]
    );
    assert_eq!(
        x.roll(&[-1], &[1])?.to_vec::<f32>()?,
        vec![2., 3., 1., 5., 6., 4.]
    );
    assert_eq!(
        x.roll(&[1, 4], &[0, 1])?.to_vec::<f32>()?,
        vec![6., 4., 5., 3., 1., 2.]
    );
    // no dims: rolled as if flat
    let r = x.roll(&[2], &[])?;
    assert_eq!(r.dims(), &[2, 3]);
    assert_eq!(r.to_vec::<f32>()?, vec![5., 6., 1., 2., 3., 4.]);
    Ok(())
}

fn repeat_tile_and_interleave_by_hand(dev: Device) -> Result<()> {
    let x = t(dev, &[1., 2., 3.], &[3]);
    let r = x.repeat(&[2, 2])?;
    assert_eq!(r.dims(), &[2, 6]);
    assert_eq!(
        r.to_vec::<f32>()?,
        vec![1., 2., 3., 1., 2., 3., 1., 2., 3., 1., 2., 3.]
    );
    let m = t(dev, &[1., 2., 3., 4.], &[2, 2]);
    assert_eq!(
        m.repeat(&[2, 1])?.to_vec::<f32>()?,
        vec![1., 2., 3., 4., 1., 2., 3., 4.]
    );
    // tile pads reps with leading ones: [2] on a matrix repeats the columns
    let tl = m.tile(&[2])?;
    assert_eq!(tl.dims(), &[2, 4]);
    assert_eq!(tl.to_vec::<f32>()?, vec![1., 2., 1., 2., 3., 4., 3., 4.]);
    let ri = m.repeat_interleave(&[2], Some(0))?;
    assert_eq!(ri.to_vec::<f32>()?, vec![1., 2., 1., 2., 3., 4., 3., 4.]);
    let ri = m.repeat_interleave(&[0, 3], Some(1))?;
    assert_eq!(ri.to_vec::<f32>()?, vec![2., 2., 2., 4., 4., 4.]);
    let ri = m.repeat_interleave(&[2], None)?;
    assert_eq!(ri.to_vec::<f32>()?, vec![1., 1., 2., 2., 3., 3., 4., 4.]);
    Ok(())
}

fn scatter_by_hand(dev: Device) -> Result<()> {
    let x = Tensor::zeros([3, 4], DType::F32)?.to_device(dev)?;
    let src = t(dev, &[1., 2., 3., 4., 5., 6., 7., 8.], &[2, 4]);
    let idx = ti(dev, &[0, 1, 2, 0, 2, 0, 1, 1], &[2, 4]);
    let y = x.scatter(0, &idx, &src)?;
    #[rustfmt::skip]
    assert_eq!(y.to_vec::<f32>()?, vec![
        1., 6., 0., 4.,
        0., 2., 7., 8.,
        5., 0., 3., 0.,
    ]);
    // a smaller index uses only the matching corner of src; the last write wins
    let idx = ti(dev, &[3, 3], &[1, 2]);
    let y = x.scatter(1, &idx, &src)?;
    assert_eq!(y.to_vec::<f32>()?[..4], [0., 0., 0., 2.]);
    Ok(())
}

fn scatter_reduce_by_hand(dev: Device) -> Result<()> {
    let x = t(dev, &[10., 20., 30.], &[3]);
    let src = t(dev, &[1., 2., 3., 4.], &[4]);
    let idx = ti(dev, &[0, 0, 2, 0], &[4]);
    let run = |red: &str, inc: bool| -> Result<Vec<f32>> {
        x.scatter_reduce(0, &idx, &src, red, inc)?.to_vec::<f32>()
    };
    assert_eq!(run("sum", true)?, vec![17., 20., 33.]);
    assert_eq!(run("sum", false)?, vec![7., 20., 3.]);
    assert_eq!(run("prod", true)?, vec![80., 20., 90.]);
    assert_eq!(run("prod", false)?, vec![8., 20., 3.]);
    assert_eq!(run("mean", true)?, vec![17. / 4., 20., 33. / 2.]);
    assert_eq!(run("mean", false)?, vec![7. / 3., 20., 3.]);
    assert_eq!(run("amax", true)?, vec![10., 20., 30.]);
    assert_eq!(run("amax", false)?, vec![4., 20., 3.]);
    assert_eq!(run("amin", true)?, vec![1., 20., 3.]);
    assert_eq!(run("amin", false)?, vec![1., 20., 3.]);
    // integer mean rounds down
    let xi = ti(dev, &[1, 2], &[2]);
    let si = ti(dev, &[2, 2, 5], &[3]);
    let ii = ti(dev, &[0, 0, 1], &[3]);
    let m = xi.scatter_reduce(0, &ii, &si, "mean", true)?;
    assert_eq!(m.to_vec::<i64>()?, vec![1, 3]);
    let m = xi.scatter_reduce(0, &ii, &si, "amax", false)?;
    assert_eq!(m.to_vec::<i64>()?, vec![2, 5]);
    Ok(())
}

fn multidim_reductions_by_hand(dev: Device) -> Result<()> {
    let x = t(dev, &[1., 2., 3., 4., 5., 6.], &[1, 2, 3]);
    let p = x.prod_dims(&[1, 2], false)?;
    assert_eq!(p.dims(), &[1]);
    assert_eq!(p.to_vec::<f32>()?, vec![720.]);
    let p = x.prod_dims(&[0, 1], true)?;
    assert_eq!(p.dims(), &[1, 1, 3]);
    assert_eq!(p.to_vec::<f32>()?, vec![4., 10., 18.]);
    assert_eq!(x.prod_dims(&[], false)?.dims(), &[] as &[usize]);
    let z = t(dev, &[0., 0., 0., 0.], &[2, 2]);
    let l = z.logsumexp_dims(&[0, 1], false)?;
    assert_close(&l.to_f64_vec(), &[4f64.ln()], 1e-6, "logsumexp of zeros");
    let l = x.logsumexp_dims(&[-1, 1], true)?;
    assert_eq!(l.dims(), &[1, 1, 1]);
    let want = (1..=6).map(|v| (v as f64).exp()).sum::<f64>().ln();
    assert_close(&l.to_f64_vec(), &[want], 1e-6, "logsumexp 1..6");
    // all -inf stays -inf (no NaN from inf - inf)
    let ninf = t(dev, &[f32::NEG_INFINITY; 4], &[2, 2]);
    assert_eq!(
        ninf.logsumexp_dims(&[0, 1], false)?.item()?,
        f64::NEG_INFINITY
    );
    Ok(())
}

fn multinomial_frequencies_follow_the_weights(dev: Device) -> Result<()> {
    manual_seed(1234);
    let w = t(dev, &[1., 2., 0., 5.], &[4]);
    let n = 8000;
    let s = w.multinomial(n, true)?;
    assert_eq!((s.dims(), s.dtype()), (&[n][..], DType::I64));
    let mut counts = [0usize; 4];
    for v in s.to_vec::<i64>()? {
        counts[v as usize] += 1;
    }
    assert_eq!(counts[2], 0, "a zero weight is never drawn");
    // each count is binomial: within 5 standard deviations of n * p
    for (k, p) in [(0, 1. / 8.), (1, 2. / 8.), (3, 5. / 8.)] {
        let (mean, sd) = (n as f64 * p, (n as f64 * p * (1. - p)).sqrt());
        let c = counts[k] as f64;
        assert!(
            (c - mean).abs() < 5. * sd,
            "category {k}: {c} draws, expected {mean}"
        );
    }
    // rows are independent; the same seed gives the same draws
    let rows = t(dev, &[1., 0., 0., 0., 0., 1.], &[2, 3]);
    manual_seed(7);
    let a = rows.multinomial(5, true)?;
    assert_eq!(a.to_vec::<i64>()?, vec![0, 0, 0, 0, 0, 2, 2, 2, 2, 2]);
    manual_seed(7);
    let b = w.multinomial(20, true)?.to_vec::<i64>()?;
    manual_seed(7);
    assert_eq!(w.multinomial(20, true)?.to_vec::<i64>()?, b);
    Ok(())
}

fn multinomial_without_replacement_never_repeats(dev: Device) -> Result<()> {
    manual_seed(99);
    let w = t(dev, &[0.1, 3., 1., 0., 2., 0.5, 0.2, 4.], &[2, 4]);
    for _ in 0..200 {
        let s = w.multinomial(3, false)?;
        assert_eq!(s.dims(), &[2, 3]);
        let rows = s.to_vec2::<i64>()?;
        for row in &rows {
            let mut r = row.clone();
            r.sort();
            r.dedup();
            assert_eq!(r.len(), 3, "repeated category in {row:?}");
        }
        assert!(!rows[0].contains(&3), "zero weight drawn: {:?}", rows[0]);
    }
    // exactly as many non-zero weights as samples: a permutation of them
    let w = t(dev, &[0., 1., 1., 0., 1.], &[5]);
    let mut s = w.multinomial(3, false)?.to_vec::<i64>()?;
    s.sort();
    assert_eq!(s, vec![1, 2, 4]);
    Ok(())
}

fn zero_sizes_and_half_floats(dev: Device) -> Result<()> {
    let x = t(dev, &[1., 2., 3., 4.], &[2, 2]);
    assert_eq!(x.repeat(&[0, 2])?.dims(), &[0, 4]);
    assert_eq!(x.tile(&[3, 0])?.dims(), &[6, 0]);
    assert_eq!(x.repeat_interleave(&[0], Some(1))?.dims(), &[2, 0]);
    let e = Tensor::zeros([0, 3], DType::F32)?.to_device(dev)?;
    assert_eq!(e.sort(0, false)?.0.dims(), &[0, 3]);
    assert_eq!(e.sort(1, true)?.1.dims(), &[0, 3]);
    assert_eq!(e.cumsum(0)?.dims(), &[0, 3]);
    assert_eq!(e.cumprod(1)?.dims(), &[0, 3]);
    assert_eq!(e.flip(&[0, 1])?.dims(), &[0, 3]);
    assert_eq!(e.roll(&[2], &[0])?.dims(), &[0, 3]);
    assert_eq!(e.roll(&[2], &[])?.dims(), &[0, 3]);
    let idx = Tensor::zeros([0, 3], DType::I64)?.to_device(dev)?;
    assert_eq!(
        x.narrow(1, 0, 2)?
            .scatter_reduce(0, &idx.narrow(1, 0, 2)?, &e.narrow(1, 0, 2)?, "sum", true)?
            .to_vec::<f32>()?,
        x.to_vec::<f32>()?
    );
    // scalars
    let s = Tensor::scalar(3f32).to_device(dev)?;
    assert_eq!(s.cumsum(0)?.item()?, 3.0);
    assert_eq!(s.flip(&[])?.item()?, 3.0);
    assert_eq!(s.topk(1, 0, true, true)?.0.item()?, 3.0);
    Ok(())
}

// ------------------------------------------------------------------------------------ dtypes

fn where_accepts_every_dtype(dev: Device) -> Result<()> {
    let cond = Tensor::from_vec(vec![true, false, true], [3])?.to_device(dev)?;
    for dt in DType::ALL {
        let a = Tensor::from_vec(vec![1f64, 0., 1.], [3])?
            .to_dtype(dt)?
            .to_device(dev)?;
        let b = Tensor::from_vec(vec![0f64, 1., 0.], [3])?
            .to_dtype(dt)?
            .to_device(dev)?;
        let y = Tensor::where_(&cond, &a, &b)?;
        assert_eq!(y.dtype(), dt);
        assert_eq!(y.to_f64_vec(), vec![1., 1., 1.], "where on {dt}");
        // broadcasting a scalar branch
        let s = Tensor::zeros_on((), dt, dev)?;
        assert_eq!(
            Tensor::where_(&cond, &s, &b)?.to_f64_vec(),
            vec![0., 1., 0.]
        );
    }
    Ok(())
}

fn ints_sort_and_accumulate_in_int64(dev: Device) -> Result<()> {
    // int64 beyond 2^53 still sorts exactly
    let big = (1i64 << 60) + 1;
    let x = ti(dev, &[big, big - 1, -5], &[3]);
    let (v, i) = x.sort(0, false)?;
    assert_eq!(v.to_vec::<i64>()?, vec![-5, big - 1, big]);
    assert_eq!(i.to_vec::<i64>()?, vec![2, 1, 0]);
    // bool and uint8 accumulate in int64, like torch
    let b = Tensor::from_vec(vec![true, false, true, true], [4])?.to_device(dev)?;
    let c = b.cumsum(0)?;
    assert_eq!(
        (c.dtype(), c.to_vec::<i64>()?),
        (DType::I64, vec![1, 1, 2, 3])
    );
    let u = Tensor::from_vec(vec![200u8, 100, 2], [3])?.to_device(dev)?;
    assert_eq!(u.cumsum(0)?.to_vec::<i64>()?, vec![200, 300, 302]);
    for dt in [DType::F16, DType::BF16] {
        let h = Tensor::from_vec(vec![1f64, 2., 3.], [3])?
            .to_dtype(dt)?
            .to_device(dev)?;
        assert_eq!(h.cumsum(0)?.to_f64_vec(), vec![1., 3., 6.], "cumsum {dt}");
        assert_eq!(h.cumprod(0)?.to_f64_vec(), vec![1., 2., 6.], "cumprod {dt}");
    }
    // every dtype sorts, flips, rolls, repeats and scatters
    for dt in DType::ALL {
        let x = Tensor::from_vec(vec![1f64, 0., 1., 0.], [4])?
            .to_dtype(dt)?
            .to_device(dev)?;
        assert_eq!(
            x.sort(0, false)?.0.to_f64_vec(),
            vec![0., 0., 1., 1.],
            "{dt}"
        );
        assert_eq!(
            x.topk(1, 0, true, true)?.1.to_vec::<i64>()?,
            vec![0],
            "{dt}"
        );
        assert_eq!(x.flip(&[0])?.to_f64_vec(), vec![0., 1., 0., 1.], "{dt}");
        assert_eq!(
            x.roll(&[1], &[0])?.to_f64_vec(),
            vec![0., 1., 0., 1.],
            "{dt}"
        );
        assert_eq!(x.repeat(&[2])?.numel(), 8, "{dt}");
        assert_eq!(x.repeat_interleave(&[2], None)?.dtype(), dt);
        let idx = ti(dev, &[3, 2], &[2]);
        let src = x.narrow(0, 0, 2)?;
        let y = x.scatter(0, &idx, &src)?;
        assert_eq!(y.to_f64_vec(), vec![1., 0., 0., 1.], "scatter {dt}");
        for red in ["sum", "prod", "mean", "amax", "amin"] {
            let y = x.scatter_reduce(0, &idx, &src, red, true)?;
            assert_eq!(y.dtype(), dt, "scatter_reduce {red} {dt}");
        }
    }
    Ok(())
}

// ----------------------------------------------------------------------------------- gradcheck

fn randn(dev: Device, shape: &[usize]) -> Result<Tensor> {
    Tensor::randn(shape, DType::F64)?.to_device(dev)
}

fn gradcheck_sort_and_topk(dev: Device) -> Result<()> {
    manual_seed(3);
    let x = randn(dev, &[3, 4, 5])?;
    gradcheck(
        |v| Ok(v[0].sort(1, false)?.0),
        std::slice::from_ref(&x),
        tight(),
    )?;
    gradcheck(
        |v| Ok(v[0].sort(-1, true)?.0),
        std::slice::from_ref(&x),
        tight(),
    )?;
    gradcheck(
        |v| Ok(v[0].topk(2, 2, true, true)?.0),
        std::slice::from_ref(&x),
        tight(),
    )?;
    gradcheck(|v| Ok(v[0].topk(3, 0, false, true)?.0), &[x], tight())
}

fn gradcheck_cumsum_and_cumprod_with_zeros(dev: Device) -> Result<()> {
    manual_seed(4);
    let x = randn(dev, &[3, 7])?;
    gradcheck(|v| v[0].cumsum(1), std::slice::from_ref(&x), tight())?;
    gradcheck(|v| v[0].cumsum(0), std::slice::from_ref(&x), tight())?;
    gradcheck(|v| v[0].cumprod(1), std::slice::from_ref(&x), tight())?;
    // zeros, one of them repeated in a row: the quick `out / x` formula would give NaN or 0
    let z = t64(
        dev,
        &[
            0.5, 0., 1.5, -2., 0.7, 1.1, 0., 0.9, 0., 1.3, 0., 0., 2., 0.3, -1.,
        ],
        &[3, 5],
    );
    gradcheck(|v| v[0].cumprod(1), std::slice::from_ref(&z), tight())?;
    gradcheck(|v| v[0].cumprod(0), &[z], tight())
}

fn gradcheck_flip_roll_repeat(dev: Device) -> Result<()> {
    manual_seed(5);
    let x = randn(dev, &[2, 3, 4])?;
    gradcheck(|v| v[0].flip(&[0, 2]), std::slice::from_ref(&x), tight())?;
    gradcheck(
        |v| v[0].roll(&[2, -1], &[2, 1]),
        std::slice::from_ref(&x),
        tight(),
    )?;
    gradcheck(|v| v[0].roll(&[5], &[]), std::slice::from_ref(&x), tight())?;
    gradcheck(
        |v| v[0].repeat(&[2, 1, 2, 1]),
        std::slice::from_ref(&x),
        tight(),
    )?;
    gradcheck(|v| v[0].tile(&[3, 1]), std::slice::from_ref(&x), tight())?;
    gradcheck(
        |v| v[0].repeat_interleave(&[1, 0, 2], Some(1)),
        &[x],
        tight(),
    )
}

fn gradcheck_scatter_reduce_every_reduction(dev: Device) -> Result<()> {
    manual_seed(6);
    let x = randn(dev, &[3, 4])?;
    let src = randn(dev, &[4, 4])?;
    // a repeated destination in every column, one position left untouched
    let idx = ti(
        dev,
        &[0, 2, 1, 0, 0, 1, 1, 2, 2, 2, 1, 0, 0, 1, 1, 2],
        &[4, 4],
    );
    let i2 = idx.clone();
    gradcheck(
        move |v| v[0].scatter(0, &i2.narrow(0, 0, 1)?, &v[1]),
        &[x.clone(), src.clone()],
        tight(),
    )?;
    for red in ["sum", "prod", "mean", "amax", "amin"] {
        for inc in [true, false] {
            let i = idx.clone();
            gradcheck(
                move |v| v[0].scatter_reduce(0, &i, &v[1], red, inc),
                &[x.clone(), src.clone()],
                tight(),
            )
            .inspect_err(|_| eprintln!("scatter_reduce {red} include_self={inc}"))?;
        }
    }
    // amax with a tie: the gradient is split evenly between the tied elements
    let x = t64(dev, &[1., 5.], &[2]).with_requires_grad();
    let s = t64(dev, &[5., 3., 5.], &[3]).with_requires_grad();
    let i = ti(dev, &[1, 1, 1], &[3]);
    x.scatter_reduce(0, &i, &s, "amax", true)?
        .sum_all()?
        .backward()?;
    assert_close(&x.grad().unwrap().to_f64_vec(), &[1., 1. / 3.], 1e-12, "gx");
    assert_close(
        &s.grad().unwrap().to_f64_vec(),
        &[1. / 3., 0., 1. / 3.],
        1e-12,
        "gsrc",
    );
    Ok(())
}

fn gradcheck_multidim_reductions(dev: Device) -> Result<()> {
    manual_seed(8);
    let x = randn(dev, &[2, 3, 4])?;
    gradcheck(
        |v| v[0].logsumexp_dims(&[0, 2], false),
        std::slice::from_ref(&x),
        tight(),
    )?;
    gradcheck(
        |v| v[0].logsumexp_dims(&[], true),
        std::slice::from_ref(&x),
        tight(),
    )?;
    gradcheck(
        |v| v[0].prod_dims(&[2, 0], false),
        std::slice::from_ref(&x),
        tight(),
    )?;
    let z = t64(dev, &[0.5, 0., 1.5, -2., 0.7, 0., 0.9, 1.2], &[2, 2, 2]);
    gradcheck(|v| v[0].prod_dims(&[1, 2], true), &[z], tight())
}

// ------------------------------------------------------------------------------------ PyTorch

fn field(case: &serde_json::Value, key: &str) -> Vec<f64> {
    case[key]
        .as_array()
        .unwrap_or_else(|| panic!("missing {key}"))
        .iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN))
        .collect()
}

fn dims(case: &serde_json::Value, key: &str) -> Vec<usize> {
    field(case, key).iter().map(|&v| v as usize).collect()
}

fn ints(v: &serde_json::Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// Run one fixture case in `dtype`, comparing outputs, indices and gradients within `tol`.
fn run_case(dev: Device, case: &serde_json::Value, dtype: DType, tol: f64) -> Result<()> {
    let name = case["name"].as_str().unwrap();
    let op = case["op"].as_str().unwrap();
    let a = &case["args"];
    let leaf = |key: &str, shape: &str| -> Result<Tensor> {
        Ok(t64(dev, &field(case, key), &dims(case, shape))
            .to_dtype(dtype)?
            .with_requires_grad())
    };
    let x = leaf("x", "x_shape")?;
    let src = case
        .get("src")
        .map(|_| leaf("src", "src_shape"))
        .transpose()?;
    let index = case
        .get("index")
        .map(|v| ti(dev, &ints(v), &dims(case, "index_shape")));
    let dim = || a["dim"].as_i64().unwrap() as isize;
    let flag = |k: &str| a[k].as_bool().unwrap();
    let list = |k: &str| ints(&a[k]);
    let (y, idx) = match op {
        "sort" => {
            let (v, i) = x.sort(dim(), flag("descending"))?;
            (v, Some(i))
        }
        "argsort" => (x.argsort(dim(), flag("descending"))?, None),
        "topk" => {
            let k = a["k"].as_u64().unwrap() as usize;
            let (v, i) = x.topk(k, dim(), flag("largest"), true)?;
            (v, Some(i))
        }
        "cumsum" => (x.cumsum(dim())?, None),
        "cumprod" => (x.cumprod(dim())?, None),
        "flip" => {
            let d: Vec<isize> = list("dims").iter().map(|&d| d as isize).collect();
            (x.flip(&d)?, None)
        }
        "roll" => {
            let d: Vec<isize> = list("dims").iter().map(|&d| d as isize).collect();
            (x.roll(&list("shifts"), &d)?, None)
        }
        "repeat" | "tile" => {
            let r: Vec<usize> = list("reps").iter().map(|&d| d as usize).collect();
            let y = if op == "repeat" {
                x.repeat(&r)?
            } else {
                x.tile(&r)?
            };
            (y, None)
        }
        "repeat_interleave" => {
            let r: Vec<usize> = list("repeats").iter().map(|&d| d as usize).collect();
            let d = a["dim"].as_i64().map(|d| d as isize);
            (x.repeat_interleave(&r, d)?, None)
        }
        "scatter" => (
            x.scatter(dim(), index.as_ref().unwrap(), src.as_ref().unwrap())?,
            None,
        ),
        "scatter_reduce" => (
            x.scatter_reduce(
                dim(),
                index.as_ref().unwrap(),
                src.as_ref().unwrap(),
                a["reduce"].as_str().unwrap(),
                flag("include_self"),
            )?,
            None,
        ),
        "logsumexp_dims" | "prod_dims" => {
            let d: Vec<isize> = list("dims").iter().map(|&d| d as isize).collect();
            let y = if op == "prod_dims" {
                x.prod_dims(&d, flag("keepdim"))?
            } else {
                x.logsumexp_dims(&d, flag("keepdim"))?
            };
            (y, None)
        }
        other => panic!("unknown op {other}"),
    };
    assert_eq!(y.dims(), dims(case, "y_shape").as_slice(), "{name}: shape");
    if y.dtype() == DType::I64 {
        assert_eq!(y.to_vec::<i64>()?, ints(&case["y"]), "{name}: y");
        return Ok(());
    }
    assert_close(
        &y.to_f64_vec(),
        &field(case, "y"),
        tol,
        &format!("{name} y"),
    );
    if let Some(i) = idx {
        assert_eq!(
            i.to_vec::<i64>()?,
            ints(&case["indices"]),
            "{name}: indices"
        );
    }
    let gy = t64(dev, &field(case, "gy"), y.dims()).to_dtype(dtype)?;
    y.backward_with_grad(&gy)?;
    let g = x.grad().expect("gradient of x");
    assert_close(
        &g.to_f64_vec(),
        &field(case, "gx"),
        tol,
        &format!("{name} gx"),
    );
    if let Some(s) = src {
        let g = s.grad().expect("gradient of src");
        assert_close(
            &g.to_f64_vec(),
            &field(case, "gsrc"),
            tol,
            &format!("{name} gsrc"),
        );
    }
    Ok(())
}

fn matches_pytorch_fixture(dev: Device) -> Result<()> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/composite.json"
    );
    let text = std::fs::read_to_string(path).expect("read composite.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("parse composite.json");
    let cases = json["cases"].as_array().unwrap();
    assert!(cases.len() >= 50);
    for case in cases {
        run_case(dev, case, DType::F64, 1e-7)?;
        run_case(dev, case, DType::F32, 1e-4)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------------- errors

fn expect_err(r: Result<impl std::fmt::Debug>, op: &str, kind: ErrorKind) {
    let e = r.expect_err(op);
    assert_eq!(e.kind, kind, "{op}: {e}");
    assert!(e.to_string().contains(op), "error does not name {op}: {e}");
}

fn bad_arguments_are_errors_naming_the_op(dev: Device) -> Result<()> {
    let x = t(dev, &[1., 2., 3., 4., 5., 6.], &[2, 3]);
    expect_err(x.sort(2, false), "sort", ErrorKind::Index);
    expect_err(x.argsort(-3, false), "argsort", ErrorKind::Index);
    expect_err(x.topk(4, 1, true, true), "topk", ErrorKind::Index);
    expect_err(x.cumsum(2), "cumsum", ErrorKind::Index);
    expect_err(x.cumprod(-3), "cumprod", ErrorKind::Index);
    expect_err(x.flip(&[1, -1]), "flip", ErrorKind::Invalid);
    expect_err(x.flip(&[5]), "flip", ErrorKind::Index);
    expect_err(x.roll(&[1, 2], &[]), "roll", ErrorKind::Invalid);
    expect_err(x.roll(&[1], &[0, 1]), "roll", ErrorKind::Invalid);
    expect_err(x.repeat(&[2]), "repeat", ErrorKind::Invalid);
    expect_err(x.repeat(&[usize::MAX, 2]), "repeat", ErrorKind::Shape);
    expect_err(
        x.repeat_interleave(&[1, 2], Some(1)),
        "repeat_interleave",
        ErrorKind::Shape,
    );
    let idx = ti(dev, &[0, 5], &[1, 2]);
    let src = t(dev, &[1., 2.], &[1, 2]);
    expect_err(x.scatter(0, &idx, &src), "scatter", ErrorKind::Index);
    let idx = ti(dev, &[0, 1], &[1, 2]);
    expect_err(
        x.scatter(0, &idx, &src.to_dtype(DType::I64)?),
        "scatter",
        ErrorKind::DType,
    );
    expect_err(
        x.scatter(0, &idx.to_dtype(DType::F32)?, &src),
        "scatter",
        ErrorKind::DType,
    );
    expect_err(
        x.scatter(0, &ti(dev, &[0, 1, 1], &[1, 3]), &src),
        "scatter",
        ErrorKind::Shape,
    );
    expect_err(
        x.scatter_reduce(0, &idx, &src, "max", true),
        "scatter_reduce",
        ErrorKind::Invalid,
    );
    expect_err(x.prod_dims(&[0, -2], false), "prod", ErrorKind::Index);
    expect_err(x.logsumexp_dims(&[3], false), "logsumexp", ErrorKind::Index);
    expect_err(
        ti(dev, &[1, 2], &[2]).logsumexp_dims(&[0], false),
        "logsumexp",
        ErrorKind::DType,
    );
    let w = t(dev, &[0.5, -0.1, 1.], &[3]);
    expect_err(w.multinomial(1, true), "multinomial", ErrorKind::Invalid);
    let w = t(dev, &[0., 0., 0., 1., 1., 1.], &[2, 3]);
    expect_err(w.multinomial(1, true), "multinomial", ErrorKind::Invalid);
    let w = t(dev, &[1., 0., 1.], &[3]);
    expect_err(w.multinomial(3, false), "multinomial", ErrorKind::Invalid);
    expect_err(w.multinomial(4, false), "multinomial", ErrorKind::Invalid);
    expect_err(w.multinomial(0, true), "multinomial", ErrorKind::Invalid);
    let nan = t(dev, &[1., f32::NAN], &[2]);
    expect_err(nan.multinomial(1, true), "multinomial", ErrorKind::Invalid);
    expect_err(
        t(dev, &[1.; 8], &[2, 2, 2]).multinomial(1, true),
        "multinomial",
        ErrorKind::Shape,
    );
    Ok(())
}
