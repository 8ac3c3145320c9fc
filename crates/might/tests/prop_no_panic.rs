//! Property test: every public op, called with random shapes, dims, dtypes, indices and sizes
//! (zero, negative, huge), returns `Ok` or `Err` — never a panic, never an abort.
//!
//! The cases run in a child process (this test binary again, with `MIGHT_PROP_CHILD` set) under
//! a 2 GiB memory budget, so an abort (a failed allocation, a stack overflow) is caught as a
//! failure of the parent naming the case that was running, instead of killing the test run.
//! Panics are caught per case (`catch_unwind`) and all reported at once.
//! `MIGHT_PROP_CASES` sets the number of cases (default 20000), `MIGHT_PROP_SEED` the seed.

use might::nn::functional as F;
use might::{DType, Generator, Result, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Every element type (the library's own list).
const DTYPES: [DType; 7] = DType::ALL;

/// Random arguments, biased towards small valid values with a share of hostile ones.
struct Ctx {
    g: Generator,
    /// What the case was called with, for the report.
    log: String,
}

impl Ctx {
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.g.below(xs.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.g.below(100) < percent
    }
    fn dtype(&mut self) -> DType {
        if self.chance(60) {
            DType::F32
        } else {
            self.pick(&DTYPES)
        }
    }
    fn dims(&mut self) -> Vec<usize> {
        let rank = self.pick(&[0usize, 1, 1, 2, 2, 2, 3, 3, 4, 5]);
        (0..rank)
            .map(|_| self.pick(&[0usize, 1, 1, 2, 2, 3, 3, 4, 5]))
            .collect()
    }
    /// A small tensor of random dtype and shape, sometimes a non-contiguous view.
    fn tensor(&mut self) -> Tensor {
        let dims = self.dims();
        let dt = self.dtype();
        self.tensor_of(dims, dt)
    }
    fn tensor_of(&mut self, dims: Vec<usize>, dt: DType) -> Tensor {
        let n: usize = dims.iter().product();
        let vals: Vec<f64> = (0..n)
            .map(|_| self.pick(&[0.0, 1.0, -1.0, 2.5, -3.0, 0.5, 7.0, f64::NAN, f64::INFINITY]))
            .collect();
        let t = Tensor::from_vec(vals, dims.clone())
            .and_then(|t| t.to_dtype(dt))
            .expect("building a small tensor");
        let t = if dims.len() >= 2 && self.chance(25) {
            t.transpose(0, 1).expect("transpose of rank >= 2")
        } else {
            t
        };
        self.log += &format!(" t{:?}:{}", t.dims(), t.dtype());
        t
    }
    /// An int64 index tensor with values in range and some out of it.
    fn index(&mut self) -> Tensor {
        let n = self.pick(&[0usize, 1, 2, 3, 5]);
        let vals: Vec<i64> = (0..n)
            .map(|_| self.pick(&[0i64, 1, 2, 3, -1, -7, 4, 100, i64::MAX, i64::MIN]))
            .collect();
        self.log += &format!(" idx{vals:?}");
        let t = Tensor::from_vec(vals, [n]).unwrap();
        if self.chance(15) {
            t.to_dtype(self.pick(&DTYPES)).unwrap()
        } else {
            t
        }
    }
    fn dim(&mut self) -> isize {
        let d = self.pick(&[0isize, 1, 2, -1, -2, 3, 4, 5, -6, isize::MAX, isize::MIN]);
        self.log += &format!(" dim {d}");
        d
    }
    fn dims_list(&mut self) -> Vec<isize> {
        let n = self.pick(&[0usize, 1, 2, 3]);
        (0..n).map(|_| self.dim()).collect()
    }
    fn size(&mut self) -> usize {
        let s = self.pick(&[
            0usize,
            1,
            2,
            3,
            4,
            5,
            7,
            1 << 20,
            1 << 40,
            usize::MAX / 2,
            usize::MAX,
        ]);
        self.log += &format!(" size {s}");
        s
    }
    fn small(&mut self) -> usize {
        let s = self.pick(&[0usize, 1, 1, 2, 2, 3, 4, 5, 1 << 40, usize::MAX]);
        self.log += &format!(" n {s}");
        s
    }
    fn int(&mut self) -> i64 {
        let v = self.pick(&[0i64, 1, -1, 2, -3, 5, i64::MAX, i64::MIN]);
        self.log += &format!(" i {v}");
        v
    }
    fn float(&mut self) -> f64 {
        let v = self.pick(&[
            0.0,
            1.0,
            -1.0,
            0.5,
            2.0,
            -1e300,
            1e300,
            f64::NAN,
            f64::INFINITY,
        ]);
        self.log += &format!(" f {v}");
        v
    }
    fn shape(&mut self) -> Vec<usize> {
        let mut d = self.dims();
        if self.chance(10) && !d.is_empty() {
            let i = self.g.below(d.len() as u64) as usize;
            d[i] = self.pick(&[1 << 40, usize::MAX]);
        }
        self.log += &format!(" shape {d:?}");
        d
    }
}

type Case = fn(&mut Ctx) -> Result<()>;

fn drop_ok<T>(r: Result<T>) -> Result<()> {
    r.map(|_| ())
}

/// Every case: a name and a body drawing its arguments from the context.
fn cases() -> Vec<(&'static str, Case)> {
    vec![
        // creation
        ("zeros", |c| {
            let (s, d) = (c.shape(), c.dtype());
            drop_ok(Tensor::zeros(s, d))
        }),
        ("full", |c| {
            let (s, v, d) = (c.shape(), c.float(), c.dtype());
            drop_ok(Tensor::full(s, v, d))
        }),
        ("arange", |c| {
            let (a, b, s, d) = (c.float(), c.float(), c.float(), c.dtype());
            drop_ok(Tensor::arange(a, b, s, d))
        }),
        ("linspace", |c| {
            let (a, b, n, d) = (c.float(), c.float(), c.small(), c.dtype());
            drop_ok(Tensor::linspace(a, b, n, d))
        }),
        ("eye", |c| {
            let (n, d) = (c.small(), c.dtype());
            drop_ok(Tensor::eye(n, d))
        }),
        ("rand", |c| {
            let (s, d) = (c.shape(), c.dtype());
            drop_ok(Tensor::rand(s, d))
        }),
        ("randn", |c| {
            let (s, d) = (c.shape(), c.dtype());
            drop_ok(Tensor::randn(s, d))
        }),
        ("rand_int", |c| {
            let (a, b, s) = (c.int(), c.int(), c.shape());
            drop_ok(Tensor::rand_int(a, b, s))
        }),
        ("tri_mask", |c| {
            let (n, m, k) = (c.small(), c.small(), c.int());
            drop_ok(Tensor::tri_mask(n, m, k, true))
        }),
        ("from_vec", |c| {
            let s = c.shape();
            drop_ok(Tensor::from_vec(vec![1f32; 6], s))
        }),
        // views
        ("reshape", |c| {
            let (t, s) = (c.tensor(), c.shape());
            drop_ok(t.reshape(s))
        }),
        ("view", |c| {
            let (t, s) = (c.tensor(), c.shape());
            drop_ok(t.view(s))
        }),
        ("permute", |c| {
            let (t, d) = (c.tensor(), c.dims_list());
            drop_ok(t.permute(&d))
        }),
        ("transpose", |c| {
            let (t, a, b) = (c.tensor(), c.dim(), c.dim());
            drop_ok(t.transpose(a, b))
        }),
        ("t", |c| drop_ok(c.tensor().t())),
        ("narrow", |c| {
            let (t, d, s, l) = (c.tensor(), c.dim(), c.size(), c.size());
            drop_ok(t.narrow(d, s, l))
        }),
        ("select", |c| {
            let (t, d, i) = (c.tensor(), c.dim(), c.dim());
            drop_ok(t.select(d, i))
        }),
        ("slice", |c| {
            let (t, d, a, b, s) = (c.tensor(), c.dim(), c.dim(), c.dim(), c.size());
            drop_ok(t.slice(d, a, b, s))
        }),
        ("squeeze", |c| {
            let (t, d) = (c.tensor(), c.dim());
            drop_ok(t.squeeze(d))
        }),
        ("unsqueeze", |c| {
            let (t, d) = (c.tensor(), c.dim());
            drop_ok(t.unsqueeze(d))
        }),
        ("flatten", |c| {
            let (t, a, b) = (c.tensor(), c.dim(), c.dim());
            drop_ok(t.flatten(a, b))
        }),
        ("expand", |c| {
            let (t, s) = (c.tensor(), c.shape());
            drop_ok(t.expand(s).and_then(|x| x.contiguous()))
        }),
        ("broadcast_to", |c| {
            let (t, s) = (c.tensor(), c.shape());
            drop_ok(t.broadcast_to(s))
        }),
        ("chunk", |c| {
            let (t, n, d) = (c.tensor(), c.small(), c.dim());
            drop_ok(t.chunk(n, d))
        }),
        ("split", |c| {
            let (t, n, d) = (c.tensor(), c.small(), c.dim());
            drop_ok(t.split(n, d))
        }),
        ("cat", |c| {
            let (a, b, d) = (c.tensor(), c.tensor(), c.dim());
            drop_ok(Tensor::cat(&[a, b], d))
        }),
        ("stack", |c| {
            let (a, b, d) = (c.tensor(), c.tensor(), c.dim());
            drop_ok(Tensor::stack(&[a, b], d))
        }),
        ("tril", |c| {
            let (t, k) = (c.tensor(), c.int());
            drop_ok(t.tril(k))
        }),
        ("triu", |c| {
            let (t, k) = (c.tensor(), c.int());
            drop_ok(t.triu(k))
        }),
        ("size", |c| {
            let (t, d) = (c.tensor(), c.dim());
            drop_ok(t.size(d))
        }),
        ("to_dtype", |c| {
            let (t, d) = (c.tensor(), c.dtype());
            drop_ok(t.to_dtype(d))
        }),
        ("item", |c| drop_ok(c.tensor().item())),
        ("to_vec2", |c| drop_ok(c.tensor().to_vec2::<f32>())),
        // elementwise
        ("add", |c| {
            let (a, b) = (c.tensor(), c.tensor());
            drop_ok(a.add(&b))
        }),
        ("sub_", |c| {
            let (a, b) = (c.tensor(), c.tensor());
            drop_ok(a.sub_(&b))
        }),
        ("mul", |c| {
            let (a, b) = (c.tensor(), c.tensor());
            drop_ok(a.mul(&b))
        }),
        ("div", |c| {
            let (a, b) = (c.tensor(), c.tensor());
            drop_ok(a.div(&b))
        }),
        ("pow", |c| {
            let (a, b) = (c.tensor(), c.tensor());
            drop_ok(a.pow(&b))
        }),
        ("maximum", |c| {
            let (a, b) = (c.tensor(), c.tensor());
            drop_ok(a.maximum(&b))
        }),
        ("lt", |c| {
            let (a, b) = (c.tensor(), c.tensor());
            drop_ok(a.lt(&b))
        }),
        ("where_", |c| {
            let (m, a, b) = (c.tensor(), c.tensor(), c.tensor());
            drop_ok(Tensor::where_(&m, &a, &b))
        }),
        ("masked_fill", |c| {
            let (a, m, v) = (c.tensor(), c.tensor(), c.float());
            drop_ok(a.masked_fill(&m, v))
        }),
        ("copy_", |c| {
            let (a, b) = (c.tensor(), c.tensor());
            drop_ok(a.copy_(&b))
        }),
        ("add_scalar", |c| {
            let (a, v) = (c.tensor(), c.float());
            drop_ok(a.add_scalar(v))
        }),
        ("powf", |c| {
            let (a, v) = (c.tensor(), c.float());
            drop_ok(a.powf(v))
        }),
        ("clamp", |c| {
            let (a, lo, hi) = (c.tensor(), c.float(), c.float());
            drop_ok(a.clamp(Some(lo), Some(hi)))
        }),
        ("affine_", |c| {
            let (a, m, b) = (c.tensor(), c.float(), c.float());
            drop_ok(a.affine_(m, b))
        }),
        ("unary", |c| {
            let t = c.tensor();
            for r in [
                t.exp(),
                t.log(),
                t.sqrt(),
                t.rsqrt(),
                t.tanh(),
                t.sigmoid(),
                t.relu(),
                t.gelu(),
                t.gelu_tanh(),
                t.silu(),
                t.softplus(),
                t.neg(),
                t.abs(),
                t.sign(),
                t.round(),
                t.floor(),
                t.logical_not(),
                t.square(),
            ] {
                drop_ok(r)?;
            }
            Ok(())
        }),
        // reductions
        ("sum", |c| {
            let (t, d) = (c.tensor(), c.dim());
            drop_ok(t.sum(d, true))
        }),
        ("sum_dims", |c| {
            let (t, d) = (c.tensor(), c.dims_list());
            drop_ok(t.sum_dims(&d, false))
        }),
        ("mean", |c| {
            let (t, d) = (c.tensor(), c.dim());
            drop_ok(t.mean(d, false))
        }),
        ("var", |c| {
            let (t, d, k) = (c.tensor(), c.dim(), c.size());
            drop_ok(t.var(d, k, false))
        }),
        ("std_dims", |c| {
            let (t, d, k) = (c.tensor(), c.dims_list(), c.small());
            drop_ok(t.std_dims(&d, k, true))
        }),
        ("max", |c| {
            let (t, d) = (c.tensor(), c.dim());
            drop_ok(t.max(d, false))
        }),
        ("argmin", |c| {
            let (t, d) = (c.tensor(), c.dim());
            drop_ok(t.argmin(d, true))
        }),
        ("prod", |c| {
            let (t, d) = (c.tensor(), c.dim());
            drop_ok(t.prod(d, false))
        }),
        ("logsumexp", |c| {
            let (t, d) = (c.tensor(), c.dim());
            drop_ok(t.logsumexp(d, false))
        }),
        ("all_any", |c| {
            let (t, d) = (c.tensor(), c.dims_list());
            drop_ok(t.any_dims(&d, false))?;
            drop_ok(t.all())
        }),
        ("max_all", |c| drop_ok(c.tensor().max_all())),
        ("mean_all", |c| drop_ok(c.tensor().mean_all())),
        ("softmax", |c| {
            let (t, d) = (c.tensor(), c.dim());
            drop_ok(t.softmax(d))
        }),
        ("log_softmax", |c| {
            let (t, d) = (c.tensor(), c.dim());
            drop_ok(t.log_softmax(d))
        }),
        ("sum_to", |c| {
            let (t, s) = (c.tensor(), c.shape());
            drop_ok(t.sum_to(&s.into()))
        }),
        // indexing
        ("index_select", |c| {
            let (t, d, i) = (c.tensor(), c.dim(), c.index());
            drop_ok(t.index_select(d, &i))
        }),
        ("gather", |c| {
            let (t, d, i) = (c.tensor(), c.dim(), c.tensor());
            drop_ok(t.gather(d, &i))
        }),
        ("index_add", |c| {
            let (t, d, i, s) = (c.tensor(), c.dim(), c.index(), c.tensor());
            drop_ok(t.index_add(d, &i, &s))
        }),
        ("scatter_add", |c| {
            let (t, d, i, s) = (c.tensor(), c.dim(), c.tensor(), c.tensor());
            drop_ok(t.scatter_add(d, &i, &s))
        }),
        ("one_hot", |c| {
            let (i, n) = (c.index(), c.size());
            drop_ok(i.one_hot(n))
        }),
        ("embedding", |c| {
            let (i, w) = (c.tensor(), c.tensor());
            drop_ok(Tensor::embedding(&i, &w))
        }),
        // products, convolutions, pools
        ("matmul", |c| {
            let (a, b) = (c.tensor(), c.tensor());
            drop_ok(a.matmul(&b))
        }),
        ("conv2d", |c| {
            let (x, w) = (c.tensor(), c.tensor());
            let (s, p, d, g) = (
                [c.small(), c.small()],
                [c.small(), c.small()],
                [c.small(), c.small()],
                c.small(),
            );
            drop_ok(x.conv2d(&w, None, s, p, d, g))
        }),
        ("conv2d_4d", |c| {
            let (n, ci) = (c.pick(&[1usize, 2]), c.pick(&[1usize, 2, 3]));
            let x = c.tensor_of(vec![n, ci, 5, 5], DType::F32);
            let w = c.tensor_of(vec![2, ci, 3, 3], DType::F32);
            let (s, p, d, g) = (
                [c.small(), 1],
                [c.small(), c.small()],
                [1, c.small()],
                c.small(),
            );
            drop_ok(x.conv2d(&w, None, s, p, d, g))
        }),
        ("conv1d", |c| {
            let (x, w) = (c.tensor(), c.tensor());
            let (s, p, d, g) = (c.small(), c.small(), c.small(), c.small());
            drop_ok(x.conv1d(&w, None, s, p, d, g))
        }),
        ("max_pool2d", |c| {
            let x = c.tensor();
            let (k, s, p) = (
                [c.small(), c.small()],
                [c.small(), c.small()],
                [c.small(), c.small()],
            );
            drop_ok(x.max_pool2d(k, s, p))
        }),
        ("avg_pool2d", |c| {
            let x = c.tensor();
            let (k, s, p) = (
                [c.small(), c.small()],
                [c.small(), c.small()],
                [c.small(), c.small()],
            );
            drop_ok(x.avg_pool2d(k, s, p))
        }),
        ("adaptive_avg_pool2d", |c| {
            let (x, a, b) = (c.tensor(), c.small(), c.small());
            drop_ok(x.adaptive_avg_pool2d([a, b]))
        }),
        // nn functional
        ("linear", |c| {
            let (x, w, b) = (c.tensor(), c.tensor(), c.tensor());
            drop_ok(F::linear(&x, &w, Some(&b)))
        }),
        ("dropout", |c| {
            let (x, p) = (c.tensor(), c.float());
            drop_ok(F::dropout(&x, p, true))
        }),
        ("layer_norm", |c| {
            let (x, s, w, e) = (c.tensor(), c.dims(), c.tensor(), c.float());
            drop_ok(F::layer_norm(&x, &s, Some(&w), None, e))
        }),
        ("cross_entropy", |c| {
            let (x, t) = (c.tensor(), c.tensor());
            drop_ok(might::nn::cross_entropy(&x, &t, &Default::default()))
        }),
        ("mse_loss", |c| {
            let (x, t) = (c.tensor(), c.tensor());
            drop_ok(might::nn::mse_loss(&x, &t, Default::default()))
        }),
        ("sdpa", |c| {
            let (q, k, v, causal) = (c.tensor(), c.tensor(), c.tensor(), c.chance(50));
            drop_ok(might::nn::scaled_dot_product_attention(
                &q, &k, &v, None, 0.0, causal,
            ))
        }),
        ("backward", |c| {
            let x = c.tensor();
            if !x.dtype().is_float() {
                return Ok(());
            }
            let x = x.contiguous()?.deep_clone()?.with_requires_grad();
            let d = c.dim();
            let y = x.softmax(d)?.sum_all()?;
            y.backward()
        }),
    ]
}

/// Run `n` random cases in this process, printing each before it runs (so the parent can name
/// the one that aborted); returns the panics seen.
fn run_cases(seed: u64, n: usize) -> Vec<String> {
    might::set_memory_limit(Some(2 << 30));
    let cases = cases();
    let mut ctx = Ctx {
        g: Generator::new(seed),
        log: String::new(),
    };
    let mut failures = Vec::new();
    std::panic::set_hook(Box::new(|_| {})); // reported below, once per case
    for i in 0..n {
        let (name, body) = cases[ctx.g.below(cases.len() as u64) as usize];
        ctx.log.clear();
        let state = ctx.g.state();
        eprintln!("case {i} {name} (generator state {state:?})");
        let r = catch_unwind(AssertUnwindSafe(|| body(&mut ctx)));
        if let Err(p) = r {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let line = format!("case {i} {name}:{} -> panic: {msg}", ctx.log);
            eprintln!("PANIC {line}");
            failures.push(line);
        }
    }
    let _ = std::panic::take_hook();
    failures
}

#[test]
fn child_cases() {
    let Ok(seed) = std::env::var("MIGHT_PROP_CHILD") else {
        return; // only in the child the parent starts
    };
    let n = std::env::var("MIGHT_PROP_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20000);
    let failures = run_cases(seed.parse().unwrap(), n);
    if !failures.is_empty() {
        eprintln!("PANICS ({}):\n{}", failures.len(), failures.join("\n"));
        panic!("{} cases panicked", failures.len());
    }
    eprintln!("ALL {n} CASES OK");
}

#[test]
fn every_public_op_returns_ok_or_err_never_panics_or_aborts() {
    let seed = std::env::var("MIGHT_PROP_SEED").unwrap_or_else(|_| "20261203".into());
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_cases",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("MIGHT_PROP_CHILD", &seed)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let last = err.lines().rfind(|l| l.starts_with("case "));
        let report: Vec<&str> = err
            .lines()
            .skip_while(|l| !l.starts_with("PANICS"))
            .collect();
        panic!(
            "the child ({}) failed; last case started: {last:?}\n{}",
            out.status,
            report.join("\n")
        );
    }
    assert!(err.contains("CASES OK"), "{err}");
}
