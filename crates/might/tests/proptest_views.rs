//! Property tests: views, broadcasting and reductions against a naive N-d reference that uses
//! explicit index arithmetic (no strides, no sharing).

use might::{DType, Tensor};
use proptest::prelude::*;

/// Row-major reference array.
#[derive(Clone, Debug)]
struct NdRef {
    data: Vec<f64>,
    shape: Vec<usize>,
}

impl NdRef {
    fn new(shape: Vec<usize>) -> Self {
        let n = shape.iter().product();
        NdRef {
            data: (0..n).map(|i| i as f64 * 0.5 - 3.0).collect(),
            shape,
        }
    }
    fn index(&self, idx: &[usize]) -> usize {
        idx.iter()
            .zip(&self.shape)
            .fold(0, |acc, (&i, &d)| acc * d + i)
    }
    fn get(&self, idx: &[usize]) -> f64 {
        self.data[self.index(idx)]
    }
    /// Build a new array of `shape` whose element at `idx` is `f(idx)`.
    fn from_fn(shape: Vec<usize>, f: impl Fn(&[usize]) -> f64) -> Self {
        let n: usize = shape.iter().product();
        let mut data = Vec::with_capacity(n);
        let mut idx = vec![0; shape.len()];
        for _ in 0..n {
            data.push(f(&idx));
            for d in (0..shape.len()).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        NdRef { data, shape }
    }
    fn tensor(&self) -> Tensor {
        Tensor::from_vec(self.data.clone(), self.shape.clone()).unwrap()
    }
}

fn shape_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..5, 1..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn permute_matches_reference(shape in shape_strategy(), seed in any::<u64>()) {
        let r = NdRef::new(shape.clone());
        let mut perm: Vec<usize> = (0..shape.len()).collect();
        let mut g = might::Generator::new(seed);
        for i in (1..perm.len()).rev() { perm.swap(i, g.below(i as u64 + 1) as usize); }
        let new_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let expect = NdRef::from_fn(new_shape.clone(), |idx| {
            let mut src = vec![0; idx.len()];
            for (k, &p) in perm.iter().enumerate() { src[p] = idx[k]; }
            r.get(&src)
        });
        let p: Vec<isize> = perm.iter().map(|&p| p as isize).collect();
        let t = r.tensor().permute(&p).unwrap();
        prop_assert_eq!(t.dims(), new_shape.as_slice());
        prop_assert_eq!(t.to_vec::<f64>().unwrap(), expect.data.clone());
        // reshape of a permuted (non-contiguous) tensor copies correctly
        let flat = t.reshape([t.numel()]).unwrap();
        prop_assert_eq!(flat.to_vec::<f64>().unwrap(), expect.data);
    }

    #[test]
    fn slice_with_step_matches_reference(shape in shape_strategy(), dim_sel in any::<usize>(),
                                         start in 0usize..4, len in 0usize..5, step in 1usize..3) {
        let r = NdRef::new(shape.clone());
        let d = dim_sel % shape.len();
        let s = start.min(shape[d]);
        let e = (s + len).min(shape[d]);
        let t = r.tensor().slice(d as isize, s as isize, e as isize, step).unwrap();
        let mut ns = shape.clone();
        ns[d] = if e > s { (e - s).div_ceil(step) } else { 0 };
        let expect = NdRef::from_fn(ns.clone(), |idx| {
            let mut src = idx.to_vec();
            src[d] = s + idx[d] * step;
            r.get(&src)
        });
        prop_assert_eq!(t.dims(), ns.as_slice());
        prop_assert_eq!(t.to_vec::<f64>().unwrap(), expect.data);
    }

    #[test]
    fn transposed_then_view_or_error(shape in shape_strategy(), a in any::<usize>(), b in any::<usize>()) {
        let r = NdRef::new(shape.clone());
        let (a, b) = (a % shape.len(), b % shape.len());
        let t = r.tensor().transpose(a as isize, b as isize).unwrap();
        // view either succeeds with the right values or is a Layout error (never wrong values)
        match t.view([t.numel()]) {
            Ok(v) => prop_assert_eq!(v.to_vec::<f64>().unwrap(), t.contiguous().unwrap().to_vec::<f64>().unwrap()),
            Err(e) => prop_assert_eq!(e.kind, might::ErrorKind::Layout),
        }
    }

    #[test]
    fn broadcast_add_matches_reference(shape in shape_strategy(), mask in prop::collection::vec(any::<bool>(), 4),
                                       drop_lead in 0usize..3, transpose in any::<bool>()) {
        // rhs shape: some dims set to 1, some leading dims dropped
        let mut rs: Vec<usize> = shape.iter().enumerate().map(|(i, &d)| if mask[i % 4] { 1 } else { d }).collect();
        let k = drop_lead.min(rs.len() - 1);
        rs.drain(..k);
        let l = NdRef::new(shape.clone());
        let rr = NdRef::from_fn(rs.clone(), |idx| idx.iter().fold(1.0, |a, &i| a * 10.0 + i as f64));
        let expect = NdRef::from_fn(shape.clone(), |idx| {
            let off = idx.len() - rs.len();
            let ridx: Vec<usize> = (0..rs.len()).map(|j| if rs[j] == 1 { 0 } else { idx[off + j] }).collect();
            l.get(idx) - rr.get(&ridx)
        });
        let mut lt = l.tensor();
        if transpose && shape.len() >= 2 {
            // same values through a non-contiguous layout
            let n = shape.len() as isize;
            lt = lt.transpose(n - 2, n - 1).unwrap().contiguous().unwrap().transpose(n - 2, n - 1).unwrap();
        }
        let out = lt.sub(&rr.tensor()).unwrap();
        prop_assert_eq!(out.dims(), shape.as_slice());
        prop_assert_eq!(out.to_vec::<f64>().unwrap(), expect.data);
    }

    #[test]
    fn sum_over_dims_matches_reference(shape in shape_strategy(), mask in prop::collection::vec(any::<bool>(), 4),
                                       keepdim in any::<bool>(), permuted in any::<bool>()) {
        let r = NdRef::new(shape.clone());
        let dims: Vec<usize> = (0..shape.len()).filter(|&i| mask[i]).collect();
        prop_assume!(!dims.is_empty());
        let out_shape: Vec<usize> = shape.iter().enumerate().map(|(i, &d)| if dims.contains(&i) { 1 } else { d }).collect();
        let expect = NdRef::from_fn(out_shape.clone(), |oidx| {
            // sum over all idx that agree with oidx on kept dims
            let sub_shape: Vec<usize> = dims.iter().map(|&d| shape[d]).collect();
            let sub = NdRef::from_fn(sub_shape, |sidx| {
                let mut idx = oidx.to_vec();
                for (k, &d) in dims.iter().enumerate() { idx[d] = sidx[k]; }
                r.get(&idx)
            });
            sub.data.iter().sum()
        });
        let mut t = r.tensor();
        if permuted {
            // go through a reversed-permutation view and back: non-contiguous strides
            let n = shape.len();
            let rev: Vec<isize> = (0..n as isize).rev().collect();
            t = t.permute(&rev).unwrap().contiguous().unwrap().permute(&rev).unwrap();
        }
        let d: Vec<isize> = dims.iter().map(|&d| d as isize).collect();
        let out = t.sum_dims(&d, keepdim).unwrap();
        let got = out.to_vec::<f64>().unwrap();
        prop_assert_eq!(got.len(), expect.data.len());
        for (a, b) in got.iter().zip(&expect.data) { prop_assert!((a - b).abs() < 1e-9, "{} vs {}", a, b); }
        if keepdim { prop_assert_eq!(out.dims(), out_shape.as_slice()); }
    }

    #[test]
    fn matmul_strided_matches_naive(m in 1usize..6, k in 1usize..6, n in 1usize..6, b in 1usize..3, ta in any::<bool>(), tb in any::<bool>()) {
        let a = Tensor::randn([b, m, k], DType::F64).unwrap();
        let w = Tensor::randn([k, n], DType::F64).unwrap();
        let a2 = if ta { a.transpose(1, 2).unwrap().contiguous().unwrap().transpose(1, 2).unwrap() } else { a.clone() };
        let w2 = if tb { w.t().unwrap().contiguous().unwrap().t().unwrap() } else { w.clone() };
        let out = a2.matmul(&w2).unwrap().to_vec::<f64>().unwrap();
        let av = a.to_vec::<f64>().unwrap();
        let wv = w.to_vec::<f64>().unwrap();
        for bi in 0..b { for i in 0..m { for j in 0..n {
            let s: f64 = (0..k).map(|p| av[bi * m * k + i * k + p] * wv[p * n + j]).sum();
            prop_assert!((out[bi * m * n + i * n + j] - s).abs() < 1e-9);
        }}}
    }
}
