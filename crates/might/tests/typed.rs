//! The typed API (`might::typed`): the boundary check, each op against the dynamic op it
//! wraps, and the three example models (MNIST MLP, MNIST CNN, char-GPT) trained side by side
//! with their dynamic versions from one seed: the losses must agree bit for bit.
//! The compile-time side (what must NOT build) is in `typed_ui.rs`.

use might::models::{Gpt, GptConfig};
use might::nn::functional::{cross_entropy as dyn_cross_entropy, CrossEntropyOptions};
use might::nn::{
    BatchNorm2d as DynBatchNorm2d, Conv2d as DynConv2d, Conv2dConfig, Dropout, Flatten,
    Linear as DynLinear, MaxPool2d as DynMaxPool2d, Module, ReLU, Sequential,
};
use might::optim::{Adam, AdamConfig, AdamW, OneCycleLR, Optimizer, ParamGroup, Scheduler};
use might::typed::{
    attention, cross_entropy, cross_entropy_seq, mse_loss, BatchNorm2d, Conv2d, Dyn, Embedding,
    LayerNorm, Linear, MaxPool2d, Tensor0, Tensor1, Tensor2, Tensor3, Tensor4, Typed,
};
use might::{DType, ErrorKind, Result, Tensor};

/// Every test here compares bits, so every test runs the kernels on one thread, set before it
/// computes anything (the setting is global: a test that changed it halfway through another's
/// two runs would make them differ). Why one: with two, `Conv2d`'s weight gradient is not
/// bit-for-bit reproducible even for the dynamic layer alone (two freshly built, identical
/// models get gradients that differ in the last bits; the forward is identical), so a
/// comparison would measure that instead.
fn one_thread() {
    might::set_num_threads(1);
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn boundary_checks_rank_static_dims_and_dtype_once() -> Result<()> {
    one_thread();
    let t = Tensor::randn([5, 784], DType::F32)?;
    let x: Tensor2<Dyn, 784> = Tensor2::from_dyn(t.clone())?;
    assert_eq!(x.dims(), [5, 784]);
    assert!(x.as_dyn().same_storage(&t), "wrapping must not copy");
    assert_eq!(
        std::mem::size_of::<Tensor2<Dyn, 784>>(),
        std::mem::size_of::<Tensor>()
    );

    let e = Tensor2::<Dyn, 100>::from_dyn(t.clone()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    assert!(
        e.msg.contains("[5, 784]") && e.msg.contains("[Dyn, 100]"),
        "{}",
        e.msg
    );
    let e = Tensor3::<Dyn, 28, 28>::from_dyn(t.clone()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    let e = Tensor2::<Dyn, 784, f64>::from_dyn(t.clone()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::DType);
    assert!(
        e.msg.contains("float32") && e.msg.contains("float64"),
        "{}",
        e.msg
    );
    let y: Tensor2<5, 784> = t.clone().try_into()?;
    let back: Tensor = y.into();
    assert!(back.same_storage(&t));
    Ok(())
}

#[test]
fn ops_give_the_dynamic_values() -> Result<()> {
    one_thread();
    might::manual_seed(1);
    let a = Tensor2::<3, 4>::randn()?;
    let b = Tensor2::<4, 2>::randn()?;
    let bias = Tensor1::<2>::from_vec(vec![0.5, -1.0])?;
    let got = a.matmul(&b)?.add_bias(&bias)?.relu()?;
    let want = a.as_dyn().matmul(b.as_dyn())?.add(bias.as_dyn())?.relu()?;
    assert_eq!(got.dims(), [3, 2]);
    assert_eq!(got.to_vec()?, want.to_vec::<f32>()?);

    // transpose, softmax, argmax, reductions
    let s = a.t()?.softmax()?;
    assert_eq!(s.dims(), [4, 3]);
    assert_eq!(s.to_vec()?, a.as_dyn().t()?.softmax(-1)?.to_vec::<f32>()?);
    let rows = s.sum_last()?.to_f64_vec();
    assert!(rows.iter().all(|r| (r - 1.0).abs() < 1e-6), "{rows:?}");
    let am: Tensor1<3, i64> = a.argmax()?;
    assert_eq!(am.to_vec()?, a.as_dyn().argmax(-1, false)?.to_vec::<i64>()?);

    // reshape with a Dyn dim carries the run-time size over; flatten; permute
    let x: Tensor2<Dyn, 12> =
        Tensor2::from_dyn(Tensor::arange(0., 24., 1., DType::F32)?.reshape([2, 12])?)?;
    let img: Tensor4<Dyn, 3, 2, 2> = x.reshape()?;
    assert_eq!(img.dims(), [2, 3, 2, 2]);
    let flat: Tensor2<Dyn, 12> = img.flatten()?;
    assert_eq!(flat.to_vec()?, x.to_vec()?);
    let nhwc: Tensor4<Dyn, 2, 2, 3> = img.permute::<0, 2, 3, 1, _, _, _, _>()?;
    assert_eq!(nhwc.dims(), [2, 2, 2, 3]);
    assert_eq!(
        nhwc.contiguous()?.to_vec()?,
        img.as_dyn()
            .permute(&[0, 2, 3, 1])?
            .contiguous()?
            .to_vec::<f32>()?
    );
    let st: Tensor2<4, 6> = Tensor2::<2, 12>::from_dyn(x.as_dyn().clone())?.reshape()?;
    assert_eq!(st.to_vec()?, x.to_vec()?);
    let seq: Tensor3<Dyn, 4, 3> = x.reshape()?;
    let parts: Tensor3<Dyn, 4, 1> = seq.narrow_last::<2, 1>()?;
    assert_eq!(
        parts.to_f64_vec(),
        (0..8).map(|i| (3 * i + 2) as f64).collect::<Vec<_>>()
    );
    let swapped: Tensor3<3, Dyn, 4> = seq.permute::<2, 0, 1, _, _, _>()?;
    assert_eq!(swapped.dims(), [3, 2, 4]);

    // the element type is a parameter: f64 end to end
    let d = Tensor2::<2, 2, f64>::from_vec(vec![1., 2., 3., 4.])?;
    assert_eq!(d.matmul(&d)?.to_vec()?, vec![7., 10., 15., 22.]);
    assert_eq!(d.to_dtype::<f32>()?.dtype(), DType::F32);
    let l: Tensor0<f64> = mse_loss(&d, &d.mul_scalar(2.0)?)?;
    assert_eq!(l.item()?, 7.5);

    // a Dyn batch that disagrees at run time is the dynamic op's error, not a wrong result
    let p: Tensor2<Dyn, 12> = Tensor2::from_dyn(Tensor::zeros([3, 12], DType::F32)?)?;
    assert_eq!(x.add(&p).unwrap_err().kind, ErrorKind::Shape);
    Ok(())
}

#[test]
fn layers_give_dynamic_shapes_values_and_gradients() -> Result<()> {
    one_thread();
    might::manual_seed(2);
    let conv = Conv2d::<3, 8, 3, 2, 1>::new()?;
    let pool = MaxPool2d::<2>::new();
    let bn = BatchNorm2d::<8>::new().unwrap();
    let x: Tensor4<Dyn, 3, 9, 9> = Tensor4::from_dyn(Tensor::randn([2, 3, 9, 9], DType::F32)?)?;
    let x = x.with_requires_grad();
    let h: Tensor4<Dyn, 8, 5, 5> = conv.forward(&x)?;
    let h = bn.forward_relu(&h)?;
    let p: Tensor4<Dyn, 8, 2, 2> = pool.forward(&h)?;
    let fc = Linear::<32, 3>::new()?;
    let out = fc.forward(&p.flatten::<32>()?)?;
    let loss = out.square()?.mean_all()?;
    loss.backward()?;

    // the same computation on the dynamic tensors inside
    let xd = x.detach().into_dyn().with_requires_grad();
    let hd = xd.conv2d(
        conv.weight().as_dyn(),
        conv.bias().as_ref().map(|b| b.as_dyn()),
        [2, 2],
        [1, 1],
        [1, 1],
        1,
    )?;
    let nb = DynBatchNorm2d::new(8).unwrap();
    let hd = nb
        .forward(&hd)?
        .relu()?
        .max_pool2d([2, 2], [2, 2], [0, 0])?;
    let od = might::nn::functional::linear(
        &hd.flatten(1, -1)?,
        fc.weight().as_dyn(),
        fc.bias().as_ref().map(|b| b.as_dyn()),
    )?;
    let ld = od.square()?.mean_all()?;
    ld.backward()?;
    assert_eq!(loss.item()?.to_bits(), ld.item()?.to_bits());
    assert_eq!(
        bits(&x.grad().unwrap().to_f64_vec()),
        bits(&xd.grad().unwrap().to_f64_vec())
    );

    // LayerNorm and Linear act on the last dim whatever the leading ones are
    let ln = LayerNorm::<4>::new()?;
    let s: Tensor3<2, 3, 4> = Tensor3::randn()?;
    let n = ln.forward(&s)?;
    for row in n.to_f64_vec().chunks(4) {
        assert!(row.iter().sum::<f64>().abs() < 1e-5, "{row:?}");
    }
    let lin = Linear::<4, 6, f64>::new()?;
    let y: Tensor3<2, 3, 6, f64> = lin.forward(&s.to_dtype::<f64>()?)?;
    assert_eq!(y.dims(), [2, 3, 6]);
    let emb = Embedding::<10, 4>::new()?;
    let ids: Tensor2<Dyn, 3, i64> = Tensor2::from_dyn(Tensor::rand_int(0, 10, [5, 3])?)?;
    assert_eq!(emb.forward(&ids)?.dims(), [5, 3, 4]);
    // an id out of range is a value: a run-time error
    let bad: Tensor1<2, i64> = Tensor1::from_vec(vec![3, 10])?;
    assert!(emb.lookup(&bad).is_err());
    Ok(())
}

// ---- MNIST MLP: examples/03_mnist_mlp.rs (dynamic) vs examples/06_typed_mnist_mlp.rs ----

/// A few batches of MNIST-shaped synthetic data (`[B, 1, 28, 28]` pixels, labels).
fn mnist_like(n: usize, b: usize) -> Result<Vec<(Tensor, Tensor)>> {
    might::manual_seed(99);
    (0..n)
        .map(|_| {
            Ok((
                Tensor::randn([b, 1, 28, 28], DType::F32)?,
                Tensor::rand_int(0, 10, [b])?,
            ))
        })
        .collect()
}

/// SGD with momentum as in the MLP examples: `v = m v + g; p -= lr v`.
fn sgd_step(params: &[Tensor], velocity: &mut [Tensor]) -> Result<()> {
    let _g = might::no_grad();
    for (p, v) in params.iter().zip(velocity.iter_mut()) {
        v.affine_(0.9, 0.0)?.add_(&p.grad().unwrap())?;
        p.add_scaled_(v, -0.01)?;
    }
    Ok(())
}

fn mlp_dynamic(data: &[(Tensor, Tensor)]) -> Result<Vec<f64>> {
    might::manual_seed(0);
    let linear = |fan_in: usize, fan_out: usize| -> Result<(Tensor, Tensor)> {
        let b = 1.0 / (fan_in as f64).sqrt();
        Ok((
            Tensor::uniform([fan_out, fan_in], -b, b, DType::F32)?.with_requires_grad(),
            Tensor::uniform([fan_out], -b, b, DType::F32)?.with_requires_grad(),
        ))
    };
    let (w1, b1) = linear(784, 128)?;
    let (w2, b2) = linear(128, 10)?;
    let params = [w1.clone(), b1.clone(), w2.clone(), b2.clone()];
    let mut velocity: Vec<Tensor> = params
        .iter()
        .map(Tensor::zeros_like)
        .collect::<Result<_>>()?;
    let mut losses = Vec::new();
    for (x, y) in data {
        let x = x.reshape([x.dims()[0], 784])?;
        let logits = x
            .matmul(&w1.t()?)?
            .add(&b1)?
            .relu()?
            .matmul(&w2.t()?)?
            .add(&b2)?;
        let loss = logits
            .log_softmax(-1)?
            .gather(1, &y.unsqueeze(1)?)?
            .mean_all()?
            .neg()?;
        for p in &params {
            p.zero_grad();
        }
        loss.backward()?;
        sgd_step(&params, &mut velocity)?;
        losses.push(loss.item()?);
    }
    Ok(losses)
}

fn mlp_typed(data: &[(Tensor, Tensor)]) -> Result<Vec<f64>> {
    might::manual_seed(0);
    let b = 1.0 / 784f64.sqrt();
    let w1 = Tensor2::<128, 784>::uniform(-b, b)?.with_requires_grad();
    let b1 = Tensor1::<128>::uniform(-b, b)?.with_requires_grad();
    let b = 1.0 / 128f64.sqrt();
    let w2 = Tensor2::<10, 128>::uniform(-b, b)?.with_requires_grad();
    let b2 = Tensor1::<10>::uniform(-b, b)?.with_requires_grad();
    let params = [
        w1.as_dyn().clone(),
        b1.as_dyn().clone(),
        w2.as_dyn().clone(),
        b2.as_dyn().clone(),
    ];
    let mut velocity: Vec<Tensor> = params
        .iter()
        .map(Tensor::zeros_like)
        .collect::<Result<_>>()?;
    let mut losses = Vec::new();
    for (x, y) in data {
        let x: Tensor4<Dyn, 1, 28, 28> = Tensor4::from_dyn(x.clone())?;
        let y: Tensor1<Dyn, i64> = Tensor1::from_dyn(y.clone())?;
        let x: Tensor2<Dyn, 784> = x.reshape()?;
        let logits = x
            .matmul(&w1.t()?)?
            .add_bias(&b1)?
            .relu()?
            .matmul(&w2.t()?)?
            .add_bias(&b2)?;
        let loss = logits.log_softmax()?.gather_rows(&y)?.mean_all()?.neg()?;
        for p in &params {
            p.zero_grad();
        }
        loss.backward()?;
        sgd_step(&params, &mut velocity)?;
        losses.push(loss.item()?);
    }
    Ok(losses)
}

#[test]
fn typed_mlp_trains_bit_for_bit_like_the_dynamic_one() -> Result<()> {
    one_thread();
    // one batch seen four times: the loss must fall
    let data = vec![mnist_like(1, 32)?.remove(0); 4];
    let want = mlp_dynamic(&data)?;
    let got = mlp_typed(&data)?;
    assert_eq!(bits(&got), bits(&want), "typed {got:?} vs dynamic {want:?}");
    assert!(want[3] < want[0], "the loss must go down: {want:?}");

    // typed Linear layers against nn::Linear in a Sequential (the fused linear kernel)
    might::manual_seed(5);
    let seq = Sequential::new()
        .add(DynLinear::new(784, 64, true).unwrap())
        .add(ReLU)
        .add(DynLinear::new(64, 10, true).unwrap());
    might::manual_seed(5);
    let (l1, l2) = (Linear::<784, 64>::new()?, Linear::<64, 10>::new()?);
    let (x, y) = &data[0];
    let xd = x.reshape([32, 784])?;
    let ld = dyn_cross_entropy(&seq.forward(&xd)?, y, &CrossEntropyOptions::default())?;
    let xt: Tensor2<32, 784> = Tensor2::from_dyn(xd)?;
    let lt = cross_entropy(
        &l2.forward(&l1.forward(&xt)?.relu()?)?,
        &Tensor1::from_dyn(y.clone())?,
    )?;
    assert_eq!(ld.item()?.to_bits(), lt.item()?.to_bits());
    ld.backward()?;
    lt.backward()?;
    assert_eq!(
        bits(&seq.parameters()[0].grad().unwrap().to_f64_vec()),
        bits(&l1.weight().grad().unwrap().to_f64_vec())
    );
    Ok(())
}

// ---- MNIST CNN: examples/04_mnist_cnn.rs (nn::Sequential) vs 07_typed_mnist_cnn.rs ----

fn cnn_dynamic() -> Result<Sequential> {
    let cfg = Conv2dConfig {
        padding: 1,
        bias: false,
        ..Default::default()
    };
    let block = |net: Sequential, cin: usize, cout: usize| -> Result<Sequential> {
        Ok(net
            .add(DynConv2d::new(cin, cout, 3, cfg)?)
            .add(DynBatchNorm2d::new(cout).unwrap())
            .add(ReLU)
            .add(DynMaxPool2d::new(2)))
    };
    let net = block(block(Sequential::new(), 1, 32)?, 32, 64)?;
    Ok(net
        .add(Flatten::new())
        .add(Dropout::new(0.25))
        .add(DynLinear::new(64 * 7 * 7, 128, true).unwrap())
        .add(ReLU)
        .add(Dropout::new(0.25))
        .add(DynLinear::new(128, 10, true).unwrap()))
}

/// The typed CNN of `examples/07_typed_mnist_cnn.rs`.
struct TypedCnn {
    conv1: Conv2d<1, 32, 3, 1, 1>,
    bn1: BatchNorm2d<32>,
    conv2: Conv2d<32, 64, 3, 1, 1>,
    bn2: BatchNorm2d<64>,
    fc1: Linear<3136, 128>,
    fc2: Linear<128, 10>,
    training: bool,
}

impl TypedCnn {
    fn new() -> Result<TypedCnn> {
        Ok(TypedCnn {
            conv1: Conv2d::without_bias()?,
            bn1: BatchNorm2d::new().unwrap(),
            conv2: Conv2d::without_bias()?,
            bn2: BatchNorm2d::new().unwrap(),
            fc1: Linear::new()?,
            fc2: Linear::new()?,
            training: true,
        })
    }

    fn forward(&self, x: &Tensor4<Dyn, 1, 28, 28>) -> Result<Tensor2<Dyn, 10>> {
        let pool = MaxPool2d::<2>::new();
        let h: Tensor4<Dyn, 32, 28, 28> = self.conv1.forward(x)?;
        let h: Tensor4<Dyn, 32, 14, 14> = pool.forward(&self.bn1.forward_relu(&h)?)?;
        let h: Tensor4<Dyn, 64, 14, 14> = self.conv2.forward(&h)?;
        let h: Tensor4<Dyn, 64, 7, 7> = pool.forward(&self.bn2.forward_relu(&h)?)?;
        let h = h.flatten::<3136>()?.dropout(0.25, self.training)?;
        let h = self.fc1.forward(&h)?.relu()?.dropout(0.25, self.training)?;
        self.fc2.forward(&h)
    }

    fn parameters(&self) -> Vec<Tensor> {
        let mut v = self.conv1.parameters();
        v.extend(self.bn1.parameters());
        v.extend(self.conv2.parameters());
        v.extend(self.bn2.parameters());
        v.extend(self.fc1.parameters());
        v.extend(self.fc2.parameters());
        v
    }
}

#[test]
fn typed_cnn_trains_bit_for_bit_like_the_dynamic_one() -> Result<()> {
    one_thread();
    let data = mnist_like(3, 8)?;
    let adam = || AdamConfig {
        lr: 3e-3,
        ..Default::default()
    };
    let mut runs = Vec::new();
    for typed in [false, true] {
        might::manual_seed(0);
        let dynamic = if typed { None } else { Some(cnn_dynamic()?) };
        let model = if typed { Some(TypedCnn::new()?) } else { None };
        let params = match (&dynamic, &model) {
            (Some(d), _) => d.parameters(),
            (_, Some(t)) => t.parameters(),
            _ => unreachable!(),
        };
        let mut opt = Adam::new(params, adam())?;
        let mut sched = Scheduler::for_optimizer(&mut opt, OneCycleLR::new(10)?);
        let mut losses = Vec::new();
        for (x, y) in &data {
            let loss = match (&dynamic, &model) {
                (Some(d), _) => {
                    dyn_cross_entropy(&d.forward(x)?, y, &CrossEntropyOptions::default())?
                }
                (_, Some(t)) => cross_entropy(
                    &t.forward(&Tensor4::from_dyn(x.clone())?)?,
                    &Tensor1::from_dyn(y.clone())?,
                )?
                .into_dyn(),
                _ => unreachable!(),
            };
            opt.zero_grad();
            loss.backward()?;
            opt.step()?;
            sched.step(&mut opt);
            losses.push(loss.item()?);
        }
        // eval mode: running statistics, no dropout
        let _g = might::no_grad();
        let (x, _) = &data[0];
        let eval = match (dynamic, model) {
            (Some(mut d), _) => {
                d.eval();
                d.forward(x)?
            }
            (_, Some(mut t)) => {
                t.training = false;
                t.bn1.train(false);
                t.bn2.train(false);
                t.forward(&Tensor4::from_dyn(x.clone())?)?.into_dyn()
            }
            _ => unreachable!(),
        };
        losses.extend(eval.to_f64_vec());
        runs.push(losses);
    }
    assert_eq!(bits(&runs[1]), bits(&runs[0]), "typed vs dynamic");
    Ok(())
}

// ---- char-GPT: models::Gpt vs the typed block of examples/08_typed_char_gpt.rs ----

const V: usize = 13;
const T: usize = 8;
const C: usize = 16;
const NH: usize = 2;
const HD: usize = C / NH;

/// A GPT block written with the typed API (pre-LayerNorm causal attention + GELU MLP).
struct TypedBlock {
    ln_1: LayerNorm<C>,
    c_attn: Linear<C, { 3 * C }>,
    attn_proj: Linear<C, C>,
    ln_2: LayerNorm<C>,
    c_fc: Linear<C, { 4 * C }>,
    mlp_proj: Linear<{ 4 * C }, C>,
}

impl TypedBlock {
    fn attention(&self, x: &Tensor3<Dyn, T, C>) -> Result<Tensor3<Dyn, T, C>> {
        let qkv = self.c_attn.forward(x)?;
        let heads = |t: Tensor3<Dyn, T, C>| -> Result<Tensor4<Dyn, NH, T, HD>> {
            t.reshape::<Tensor4<Dyn, T, NH, HD>>()?.transpose_12()
        };
        let q = heads(qkv.narrow_last::<0, C>()?)?;
        let k = heads(qkv.narrow_last::<C, C>()?)?;
        let v = heads(qkv.narrow_last::<{ 2 * C }, C>()?)?;
        let y: Tensor3<Dyn, T, C> = attention(&q, &k, &v, true)?.transpose_12()?.reshape()?;
        self.attn_proj.forward(&y)
    }

    fn forward(&self, x: &Tensor3<Dyn, T, C>) -> Result<Tensor3<Dyn, T, C>> {
        let x = x.add(&self.attention(&self.ln_1.forward(x)?)?)?;
        let m = self.c_fc.forward(&self.ln_2.forward(&x)?)?.gelu()?;
        x.add(&self.mlp_proj.forward(&m)?)
    }
}

/// A typed Linear around the dynamic model's `{p}.weight` and `{p}.bias` (checked once).
fn linear<const I: usize, const O: usize>(
    named: &[(String, Tensor)],
    p: &str,
) -> Result<Linear<I, O>> {
    let get = |n: String| named.iter().find(|(k, _)| *k == n).unwrap().1.clone();
    Linear::from_weights(
        Typed::from_dyn(get(format!("{p}.weight")))?,
        Some(Typed::from_dyn(get(format!("{p}.bias")))?),
    )
}

struct TypedGpt {
    wte: Embedding<V, C>,
    wpe: Embedding<T, C>,
    h: Vec<TypedBlock>,
    ln_f: LayerNorm<C>,
}

impl TypedGpt {
    /// Take the tensors of a dynamic model (same storage: one set of parameters).
    fn from_named(named: &[(String, Tensor)], n_layer: usize) -> Result<TypedGpt> {
        let get = |n: &str| named.iter().find(|(k, _)| k == n).unwrap().1.clone();
        let ln = |p: &str| -> Result<LayerNorm<C>> {
            LayerNorm::from_weights(
                Typed::from_dyn(get(&format!("{p}.weight")))?,
                Some(Typed::from_dyn(get(&format!("{p}.bias")))?),
                1e-5,
            )
        };
        let mut h = Vec::new();
        for i in 0..n_layer {
            let p = format!("transformer.h.{i}");
            h.push(TypedBlock {
                ln_1: ln(&format!("{p}.ln_1"))?,
                c_attn: linear(named, &format!("{p}.attn.c_attn"))?,
                attn_proj: linear(named, &format!("{p}.attn.c_proj"))?,
                ln_2: ln(&format!("{p}.ln_2"))?,
                c_fc: linear(named, &format!("{p}.mlp.c_fc"))?,
                mlp_proj: linear(named, &format!("{p}.mlp.c_proj"))?,
            });
        }
        Ok(TypedGpt {
            wte: Embedding::from_weight(Typed::from_dyn(get("transformer.wte.weight"))?)?,
            wpe: Embedding::from_weight(Typed::from_dyn(get("transformer.wpe.weight"))?)?,
            h,
            ln_f: ln("transformer.ln_f")?,
        })
    }

    fn forward(&self, idx: &Tensor2<Dyn, T, i64>) -> Result<Tensor3<Dyn, T, V>> {
        let pos: Tensor1<T, i64> =
            Tensor1::from_dyn(Tensor::arange(0., T as f64, 1., DType::I64)?)?;
        let mut x = self
            .wte
            .forward(idx)?
            .add_broadcast(&self.wpe.lookup(&pos)?)?;
        for blk in &self.h {
            x = blk.forward(&x)?;
        }
        self.ln_f
            .forward(&x)?
            .matmul_shared(&self.wte.weight().t()?)
    }
}

#[test]
fn typed_gpt_block_trains_bit_for_bit_like_nn_gpt() -> Result<()> {
    one_thread();
    let cfg = GptConfig {
        vocab_size: V,
        block_size: T,
        n_layer: 2,
        n_head: NH,
        n_embd: C,
        dropout: 0.0,
        bias: true,
    };
    might::manual_seed(7);
    let batches: Vec<(Tensor, Tensor)> = (0..4)
        .map(|_| {
            Ok((
                Tensor::rand_int(0, V as i64, [3, T])?,
                Tensor::rand_int(0, V as i64, [3, T])?,
            ))
        })
        .collect::<Result<_>>()?;
    let mut runs = Vec::new();
    for typed in [false, true] {
        might::manual_seed(0);
        let gpt = Gpt::new(cfg)?;
        let named = gpt.named_parameters();
        let model = TypedGpt::from_named(&named, cfg.n_layer)?;
        let mut opt = AdamW::with_groups(
            ParamGroup::decay_split(&named, 0.1),
            AdamConfig {
                lr: 1e-2,
                betas: (0.9, 0.99),
                ..AdamConfig::adamw()
            },
        )?;
        let mut losses = Vec::new();
        for (x, y) in &batches {
            let loss = if typed {
                let logits = model.forward(&Tensor2::from_dyn(x.clone())?)?;
                cross_entropy_seq(&logits, &Tensor2::from_dyn(y.clone())?)?.into_dyn()
            } else {
                gpt.forward_with_loss(x, y)?.1
            };
            opt.zero_grad();
            loss.backward()?;
            opt.step()?;
            losses.push(loss.item()?);
        }
        runs.push(losses);
    }
    assert_eq!(bits(&runs[1]), bits(&runs[0]), "typed vs models::Gpt");
    assert!(
        runs[0][3] < runs[0][0],
        "the loss must go down: {:?}",
        runs[0]
    );
    Ok(())
}
