//! Optimizers, clipping and schedules: hand-computed first steps, state round trips, and
//! 20-step trajectories against PyTorch (tests/fixtures/optim.json, from gen_optim.py).

use might::optim::{
    clip_grad_norm_, clip_grad_norm_p_, clip_grad_value_, Adam, AdamConfig, AdamW,
    CosineAnnealingLR, ExponentialLR, LambdaLR, LinearWarmup, LrSchedule, MultiStepLR, OneCycleLR,
    Optimizer, OptimizerState, ParamGroup, RmsProp, RmsPropConfig, Scheduler, Sgd, SgdConfig,
    StepLR, WarmupCosine,
};
use might::{DType, Device, ErrorKind, Result, Tensor};

mod common;

device_tests!(
    clip_grad_value_clamps_elementwise,
    ; f64:
    sgd_momentum_dampening_weight_decay_by_hand,
    sgd_plain_and_nesterov_by_hand,
    adam_adamw_first_steps_by_hand,
    adam_amsgrad_keeps_the_max_second_moment,
    rmsprop_plain_centered_momentum_by_hand,
    params_without_grad_are_skipped_and_keep_no_state,
    param_groups_override_weight_decay_and_scale_lr,
    updates_are_in_place_and_reach_views_and_half_precision,
    clip_grad_norm_matches_pytorch_formula,
    clip_grad_norm_of_large_gradients,
    clipping_a_gradient_shared_by_two_params_scales_it_once,
    scheduler_drives_any_optimizer,
    state_dict_round_trip_reproduces_the_run,
    load_state_dict_rejects_foreign_state_and_changes_nothing,
    trajectories_match_pytorch,
);

fn param(dev: Device, v: &[f64]) -> Tensor {
    Tensor::new(v).to_device(dev).unwrap().with_requires_grad()
}

/// Set `p`'s gradient (on `p`'s device).
fn grad(p: &Tensor, g: &[f64]) {
    let g = Tensor::from_slice(g, p.dims()).unwrap();
    p.set_grad(Some(g.to_device(p.device()).unwrap()));
}

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "{a:?} vs {b:?} (tol {tol})"
        );
    }
}

// ---------- hand-computed steps ----------

fn sgd_momentum_dampening_weight_decay_by_hand(dev: Device) -> Result<()> {
    let p = param(dev, &[1.0, -2.0]);
    let cfg = SgdConfig {
        lr: 0.1,
        momentum: 0.9,
        dampening: 0.5,
        weight_decay: 0.1,
        nesterov: false,
    };
    let mut opt = Sgd::new(vec![p.clone()], cfg)?;
    grad(&p, &[0.5, 0.5]);
    opt.step()?;
    // d = g + 0.1 p = [0.6, 0.3]; first step buf = d; p -= 0.1 d
    close(&p.to_vec::<f64>()?, &[0.94, -2.03], 1e-12);
    opt.step()?;
    // d = [0.5 + 0.094, 0.5 - 0.203]; buf = 0.9 buf + 0.5 d; p -= 0.1 buf
    let b0 = 0.9 * 0.6 + 0.5 * 0.594;
    let b1 = 0.9 * 0.3 + 0.5 * 0.297;
    close(
        &p.to_vec::<f64>()?,
        &[0.94 - 0.1 * b0, -2.03 - 0.1 * b1],
        1e-12,
    );
    let sd = opt.state_dict();
    close(
        &sd.tensor("state.0.momentum_buffer")
            .unwrap()
            .to_vec::<f64>()?,
        &[b0, b1],
        1e-12,
    );
    Ok(())
}

fn sgd_plain_and_nesterov_by_hand(dev: Device) -> Result<()> {
    let p = param(dev, &[1.0]);
    let mut opt = Sgd::new(
        vec![p.clone()],
        SgdConfig {
            lr: 0.5,
            ..Default::default()
        },
    )?;
    grad(&p, &[0.25]);
    opt.step()?;
    assert_eq!(p.to_vec::<f64>()?, vec![0.875]);
    assert!(opt.state_dict().tensors.is_empty(), "no momentum, no state");

    let q = param(dev, &[1.0]);
    let cfg = SgdConfig {
        lr: 0.1,
        momentum: 0.9,
        nesterov: true,
        ..Default::default()
    };
    let mut opt = Sgd::new(vec![q.clone()], cfg)?;
    grad(&q, &[0.6]);
    opt.step()?; // buf = 0.6, d = 0.6 + 0.9*0.6 = 1.14
    close(&q.to_vec::<f64>()?, &[0.886], 1e-12);
    opt.step()?; // buf = 0.9*0.6 + 0.6 = 1.14, d = 0.6 + 0.9*1.14 = 1.626
    close(&q.to_vec::<f64>()?, &[0.886 - 0.1626], 1e-12);

    let e = Sgd::new(
        vec![param(dev, &[1.0])],
        SgdConfig {
            nesterov: true,
            ..Default::default()
        },
    )
    .err()
    .unwrap();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.to_string().contains("Nesterov"), "{e}");
    Ok(())
}

fn adam_adamw_first_steps_by_hand(dev: Device) -> Result<()> {
    // a constant gradient makes every bias-corrected Adam step exactly lr·sign(g)
    let p = param(dev, &[1.0, 1.0]);
    let cfg = AdamConfig {
        lr: 0.1,
        eps: 0.0,
        ..Default::default()
    };
    let mut opt = Adam::new(vec![p.clone()], cfg)?;
    for k in 1..=3 {
        grad(&p, &[0.5, -3.0]);
        opt.step()?;
        let k = k as f64;
        close(&p.to_vec::<f64>()?, &[1.0 - 0.1 * k, 1.0 + 0.1 * k], 1e-12);
    }
    let sd = opt.state_dict();
    assert_eq!(sd.scalar("state.0.step"), Some(3.0));
    // m after 3 steps of g: g (1 - 0.9^3)
    close(
        &sd.tensor("state.0.exp_avg").unwrap().to_vec::<f64>()?,
        &[0.5 * (1.0 - 0.729), -3.0 * (1.0 - 0.729)],
        1e-12,
    );

    // Adam's L2 decay enters the gradient; AdamW's shrinks the weight first
    let a = param(dev, &[1.0]);
    let mut adam = Adam::new(
        vec![a.clone()],
        AdamConfig {
            lr: 0.1,
            weight_decay: 0.5,
            ..Default::default()
        },
    )?;
    grad(&a, &[-0.2]); // d = -0.2 + 0.5 = 0.3 > 0: one lr step down
    adam.step()?;
    close(&a.to_vec::<f64>()?, &[0.9], 1e-6);
    let w = param(dev, &[1.0]);
    let mut adamw = AdamW::new(
        vec![w.clone()],
        AdamConfig {
            lr: 0.1,
            weight_decay: 0.5,
            ..Default::default()
        },
    )?;
    grad(&w, &[-0.2]); // p = 1·(1 - 0.05), then one lr step up
    adamw.step()?;
    close(&w.to_vec::<f64>()?, &[0.95 + 0.1], 1e-6);
    Ok(())
}

fn adam_amsgrad_keeps_the_max_second_moment(dev: Device) -> Result<()> {
    let p = param(dev, &[0.0]);
    let cfg = AdamConfig {
        lr: 0.1,
        amsgrad: true,
        eps: 0.0,
        ..Default::default()
    };
    let mut opt = Adam::new(vec![p.clone()], cfg)?;
    grad(&p, &[1.0]);
    opt.step()?;
    close(&p.to_vec::<f64>()?, &[-0.1], 1e-12);
    grad(&p, &[0.0]);
    opt.step()?;
    let (m, v) = (0.09, 0.999 * 0.001);
    let vmax: f64 = 0.001; // > v
    let bc1 = 1.0 - 0.81;
    let bc2: f64 = 1.0 - 0.999 * 0.999;
    let step = 0.1 / bc1 * m / (vmax.sqrt() / bc2.sqrt());
    close(&p.to_vec::<f64>()?, &[-0.1 - step], 1e-12);
    let sd = opt.state_dict();
    close(
        &sd.tensor("state.0.exp_avg_sq").unwrap().to_vec::<f64>()?,
        &[v],
        1e-12,
    );
    close(
        &sd.tensor("state.0.max_exp_avg_sq")
            .unwrap()
            .to_vec::<f64>()?,
        &[vmax],
        1e-12,
    );
    Ok(())
}

fn rmsprop_plain_centered_momentum_by_hand(dev: Device) -> Result<()> {
    let run = |cfg: RmsPropConfig, steps: usize| -> Result<f64> {
        let p = param(dev, &[1.0]);
        let mut opt = RmsProp::new(vec![p.clone()], cfg)?;
        for _ in 0..steps {
            grad(&p, &[0.5]);
            opt.step()?;
        }
        p.item()
    };
    let base = RmsPropConfig {
        lr: 0.01,
        eps: 0.0,
        ..Default::default()
    };
    // sq = 0.01·0.25, avg = 0.05: p -= 0.01·0.5/0.05
    close(&[run(base, 1)?], &[0.9], 1e-12);
    let centered = RmsPropConfig {
        centered: true,
        ..base
    };
    let avg = (0.0025f64 - 0.005 * 0.005).sqrt();
    close(&[run(centered, 1)?], &[1.0 - 0.01 * 0.5 / avg], 1e-12);
    let mom = RmsPropConfig {
        momentum: 0.9,
        ..base
    };
    let sq2: f64 = 0.99 * 0.0025 + 0.0025;
    let buf2 = 0.9 * 10.0 + 0.5 / sq2.sqrt();
    close(&[run(mom, 2)?], &[0.9 - 0.01 * buf2], 1e-12);
    Ok(())
}

fn params_without_grad_are_skipped_and_keep_no_state(dev: Device) -> Result<()> {
    let a = param(dev, &[1.0]);
    let b = param(dev, &[2.0]);
    let mut opt = Adam::new(vec![a.clone(), b.clone()], AdamConfig::default())?;
    grad(&a, &[1.0]);
    opt.step()?;
    opt.step()?;
    assert_eq!(b.to_vec::<f64>()?, vec![2.0]);
    let sd = opt.state_dict();
    assert_eq!(sd.scalar("state.0.step"), Some(2.0));
    assert_eq!(sd.scalar("state.1.step"), None);
    assert!(sd.tensor("state.1.exp_avg").is_none());
    opt.zero_grad();
    assert!(a.grad().is_none());
    Ok(())
}

fn param_groups_override_weight_decay_and_scale_lr(dev: Device) -> Result<()> {
    let w = Tensor::from_slice(&[1.0f64, 1.0], [1, 2])?
        .to_device(dev)?
        .with_requires_grad();
    let bias = param(dev, &[1.0]);
    let named = vec![
        ("w".to_string(), w.clone()),
        ("b".to_string(), bias.clone()),
    ];
    let mut groups = ParamGroup::decay_split(&named, 0.5);
    groups[1].lr_scale = 0.5;
    let cfg = SgdConfig {
        lr: 0.1,
        weight_decay: 123.0, // overridden by both groups
        ..Default::default()
    };
    let mut opt = Sgd::with_groups(groups, cfg)?;
    grad(&w, &[0.0, 1.0]);
    grad(&bias, &[1.0]);
    opt.step()?;
    // w: d = g + 0.5 w; bias: no decay, lr 0.05
    close(&w.to_vec::<f64>()?, &[0.95, 0.85], 1e-12);
    close(&bias.to_vec::<f64>()?, &[0.95], 1e-12);
    opt.set_lr(1.0);
    assert_eq!(opt.lr(), 1.0);

    let e = Sgd::new(vec![w.clone(), w.clone()], cfg).err().unwrap();
    assert!(e.to_string().contains("twice"), "{e}");
    let e = Sgd::new(vec![Tensor::new(&[1i64]).to_device(dev).unwrap()], cfg)
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::DType);
    Ok(())
}

fn updates_are_in_place_and_reach_views_and_half_precision(dev: Device) -> Result<()> {
    // the model's tensor and the optimizer's share storage: the model sees the step
    let model_w = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [2, 2])?
        .to_device(dev)?
        .with_requires_grad();
    let mut opt = Sgd::new(
        vec![model_w.clone()],
        SgdConfig {
            lr: 0.5,
            ..Default::default()
        },
    )?;
    model_w.sum_all()?.backward()?;
    opt.step()?;
    assert_eq!(model_w.to_vec::<f32>()?, vec![0.5, 1.5, 2.5, 3.5]);

    // a strided parameter (a transposed view) is updated through its base storage
    let base = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2])?.to_device(dev)?;
    let view = base.t()?;
    view.requires_grad_(true);
    let mut opt = Sgd::new(
        vec![view.clone()],
        SgdConfig {
            lr: 1.0,
            ..Default::default()
        },
    )?;
    grad(&view, &[1.0, 0.0, 0.0, 0.0]); // d/d view[0,0] = base[0,0]
    opt.step()?;
    assert_eq!(base.to_vec::<f64>()?, vec![0.0, 2.0, 3.0, 4.0]);

    for dt in [DType::F16, DType::BF16] {
        let h = Tensor::full([3], 1.0, dt)?
            .to_device(dev)?
            .with_requires_grad();
        let mut opt = Adam::new(
            vec![h.clone()],
            AdamConfig {
                lr: 0.25,
                ..Default::default()
            },
        )?;
        h.set_grad(Some(Tensor::full([3], 2.0, dt)?.to_device(dev)?));
        opt.step()?;
        assert_eq!(h.dtype(), dt);
        close(&h.to_f64_vec(), &[0.75; 3], 1e-3);
        assert_eq!(
            opt.state_dict().tensor("state.0.exp_avg").unwrap().dtype(),
            DType::F32
        );
    }

    let p = param(dev, &[1.0, 2.0]);
    let mut opt = Sgd::new(vec![p.clone()], SgdConfig::default())?;
    grad(&p, &[1.0, 2.0]);
    p.set_grad(Some(
        Tensor::new(&[1.0f64, 2.0, 3.0]).to_device(dev).unwrap(),
    ));
    let e = opt.step().unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    Ok(())
}

#[test]
fn large_f32_parameter_split_across_threads_matches_f64() -> Result<()> {
    // big enough that the fused loop is split into chunks run on the pool
    let n = 200_003;
    let init: Vec<f64> = (0..n).map(|i| ((i as f64) * 0.001).sin()).collect();
    let g: Vec<f64> = (0..n).map(|i| ((i as f64) * 0.0007).cos()).collect();
    let p32 = Tensor::from_vec(init.iter().map(|&x| x as f32).collect(), [n])?.with_requires_grad();
    let p64 = Tensor::from_vec(init.clone(), [n])?.with_requires_grad();
    let cfg = AdamConfig {
        lr: 0.01,
        weight_decay: 0.1,
        amsgrad: true,
        ..Default::default()
    };
    let mut o32 = AdamW::new(vec![p32.clone()], cfg)?;
    let mut o64 = AdamW::new(vec![p64.clone()], cfg)?;
    for s in 0..3 {
        let gs: Vec<f64> = g.iter().map(|x| x * (1.0 + s as f64)).collect();
        p32.set_grad(Some(Tensor::from_vec(
            gs.iter().map(|&x| x as f32).collect(),
            [n],
        )?));
        p64.set_grad(Some(Tensor::from_vec(gs, [n])?));
        o32.step()?;
        o64.step()?;
    }
    let a = p32.to_f64_vec();
    let b = p64.to_vec::<f64>()?;
    let worst = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1e-5, "max |f32 - f64| = {worst}");
    Ok(())
}

// ---------- clipping ----------

fn clip_grad_norm_matches_pytorch_formula(dev: Device) -> Result<()> {
    let a = param(dev, &[0.0, 0.0]);
    let b = param(dev, &[0.0]);
    let c = param(dev, &[0.0]); // no grad: ignored
    grad(&a, &[3.0, 4.0]);
    grad(&b, &[12.0]);
    let params = [a.clone(), b.clone(), c.clone()];
    let total = clip_grad_norm_(&params, 6.5)?;
    assert_eq!(total, 13.0);
    let coef = 6.5 / (13.0 + 1e-6);
    close(
        &a.grad().unwrap().to_vec::<f64>()?,
        &[3.0 * coef, 4.0 * coef],
        1e-15,
    );
    close(&b.grad().unwrap().to_vec::<f64>()?, &[12.0 * coef], 1e-15);
    assert!(c.grad().is_none());
    // below the limit: untouched
    let total = clip_grad_norm_(&params, 100.0)?;
    close(&[total], &[6.5], 1e-6);
    close(&b.grad().unwrap().to_vec::<f64>()?, &[12.0 * coef], 1e-15);
    // max norm
    grad(&a, &[3.0, -4.0]);
    grad(&b, &[1.0]);
    let total = clip_grad_norm_p_(&params, 2.0, f64::INFINITY)?;
    assert_eq!(total, 4.0);
    close(&a.grad().unwrap().to_vec::<f64>()?, &[1.5, -2.0], 1e-6);
    assert!(clip_grad_norm_(&params, -1.0).is_err());
    Ok(())
}

/// Large gradients (the vector path, split across threads when there are two) give the f64
/// norm of their values, f32 and f64, lengths with a tail past the 16-wide chunks.
fn clip_grad_norm_of_large_gradients(dev: Device) -> Result<()> {
    let before = might::get_num_threads();
    for threads in [1, 2] {
        might::set_num_threads(threads);
        for (dt, len) in [
            (DType::F32, 100_003),
            (DType::F64, 40_001),
            (DType::F32, 17),
        ] {
            let p = Tensor::zeros([len], dt)?
                .to_device(dev)?
                .with_requires_grad();
            let vals: Vec<f64> = (0..len)
                .map(|i| ((i * 7919) % 1000) as f64 / 250.0 - 2.0)
                .collect();
            p.set_grad(Some(
                Tensor::new(vals.as_slice())
                    .to_device(dev)
                    .unwrap()
                    .to_dtype(dt)?,
            ));
            let want: f64 = p
                .grad()
                .unwrap()
                .to_f64_vec()
                .iter()
                .map(|x| x * x)
                .sum::<f64>()
                .sqrt();
            let total = clip_grad_norm_(std::slice::from_ref(&p), 1e9)?;
            close(&[total], &[want], 1e-9 * want);
        }
    }
    might::set_num_threads(before);
    Ok(())
}

fn clipping_a_gradient_shared_by_two_params_scales_it_once(dev: Device) -> Result<()> {
    let a = param(dev, &[0.0, 0.0]);
    let b = param(dev, &[0.0, 0.0]);
    let g = Tensor::new(&[3.0f64, 4.0]).to_device(dev).unwrap();
    a.set_grad(Some(g.clone()));
    b.set_grad(Some(g.clone()));
    let total = clip_grad_norm_(&[a.clone(), b.clone()], 1.0)?;
    close(&[total], &[50f64.sqrt()], 1e-12);
    let coef = 1.0 / (50f64.sqrt() + 1e-6);
    close(
        &a.grad().unwrap().to_vec::<f64>()?,
        &[3.0 * coef, 4.0 * coef],
        1e-12,
    );
    close(
        &b.grad().unwrap().to_vec::<f64>()?,
        &[3.0 * coef, 4.0 * coef],
        1e-12,
    );
    assert_eq!(
        g.to_vec::<f64>()?,
        vec![3.0, 4.0],
        "caller's tensor untouched"
    );
    Ok(())
}

fn clip_grad_value_clamps_elementwise(dev: Device) -> Result<()> {
    let a = Tensor::zeros([3], DType::F32)?
        .to_device(dev)?
        .with_requires_grad();
    a.set_grad(Some(
        Tensor::new(&[-2.0f32, 0.05, 7.0]).to_device(dev).unwrap(),
    ));
    clip_grad_value_(std::slice::from_ref(&a), 0.1)?;
    assert_eq!(a.grad().unwrap().to_vec::<f32>()?, vec![-0.1, 0.05, 0.1]);
    assert!(clip_grad_value_(&[a], -1.0).is_err());
    Ok(())
}

// ---------- schedules ----------

fn factors(s: &dyn LrSchedule, n: usize) -> Vec<f64> {
    (0..n).map(|i| s.lr_at(i)).collect()
}

#[test]
fn step_multistep_exponential_cosine_by_hand() -> Result<()> {
    close(
        &factors(&StepLR::new(2, 0.5)?, 6),
        &[1.0, 1.0, 0.5, 0.5, 0.25, 0.25],
        1e-15,
    );
    close(
        &factors(&MultiStepLR::new(vec![2, 4], 0.1), 6),
        &[1.0, 1.0, 0.1, 0.1, 0.01, 0.01],
        1e-15,
    );
    close(
        &factors(&ExponentialLR::new(0.5), 4),
        &[1.0, 0.5, 0.25, 0.125],
        1e-15,
    );
    let c = CosineAnnealingLR::new(4, 0.2)?;
    let h = (1.0 + std::f64::consts::FRAC_1_SQRT_2) / 2.0;
    close(
        &factors(&c, 5),
        &[1.0, 0.2 + 0.8 * h, 0.6, 0.2 + 0.8 * (1.0 - h), 0.2],
        1e-12,
    );
    assert!(StepLR::new(0, 0.5).is_err());
    Ok(())
}

#[test]
fn warmup_onecycle_warmupcosine_by_hand() -> Result<()> {
    let w = LinearWarmup::new(0.1, 4);
    close(&factors(&w, 6), &[0.1, 0.325, 0.55, 0.775, 1.0, 1.0], 1e-12);
    let w = LinearWarmup::new(0.0, 2).then(StepLR::new(2, 0.5)?);
    close(
        &factors(&w, 7),
        &[0.0, 0.5, 1.0, 1.0, 0.5, 0.5, 0.25],
        1e-12,
    );

    // total 10, pct 0.3: up to step 2 (= 0.3·10 − 1), down to step 9
    let oc = OneCycleLR::with_options(10, 0.3, 25.0, 1e4)?;
    let f = factors(&oc, 11);
    close(&f[..3], &[0.04, 0.52, 1.0], 1e-12);
    let min = 0.04 / 1e4;
    let down =
        |s: f64| min + (1.0 - min) / 2.0 * ((std::f64::consts::PI * (s - 2.0) / 7.0).cos() + 1.0);
    close(
        &f[3..],
        &[
            down(3.0),
            down(4.0),
            down(5.0),
            down(6.0),
            down(7.0),
            down(8.0),
            min,
            min,
        ],
        1e-12,
    );
    assert!(OneCycleLR::with_options(10, 0.05, 25.0, 1e4).is_err());

    let wc = WarmupCosine::new(2, 10, 0.1)?;
    let f = factors(&wc, 12);
    close(
        &[f[0], f[1], f[2], f[6], f[10], f[11]],
        &[0.0, 0.5, 1.0, 0.55, 0.1, 0.1],
        1e-12,
    );
    assert!(WarmupCosine::new(5, 5, 0.0).is_err());
    Ok(())
}

fn scheduler_drives_any_optimizer(dev: Device) -> Result<()> {
    let p = param(dev, &[1.0]);
    let mut opt = Adam::new(
        vec![p.clone()],
        AdamConfig {
            lr: 0.2,
            ..Default::default()
        },
    )?;
    let mut sched = Scheduler::for_optimizer(&mut opt, LinearWarmup::new(0.5, 2));
    assert_eq!(opt.lr(), 0.1);
    let mut seen = vec![];
    for _ in 0..3 {
        seen.push(opt.lr());
        opt.step()?;
        sched.step(&mut opt);
    }
    close(&seen, &[0.1, 0.15, 0.2], 1e-15);
    assert_eq!(sched.current_step(), 3);
    // closures are schedules too
    let mut s2 = Scheduler::new(1.0, LambdaLR(|s: usize| 1.0 / (1 + s) as f64));
    let dynopt: &mut dyn Optimizer = &mut opt;
    s2.step(dynopt);
    assert_eq!(dynopt.lr(), 0.5);
    Ok(())
}

// ---------- state round trip ----------

fn quadratic_grads(ps: &[Tensor], k: usize) {
    for (i, p) in ps.iter().enumerate() {
        let v = p.to_vec::<f64>().unwrap();
        let g: Vec<f64> = v
            .iter()
            .enumerate()
            .map(|(j, x)| x * (1.0 + i as f64) - 0.3 * ((j + k) as f64).sin())
            .collect();
        grad(p, &g);
    }
}

fn roundtrip(dev: Device, make: &dyn Fn(Vec<Tensor>) -> Box<dyn Optimizer>) -> Result<()> {
    let ps = vec![param(dev, &[1.0, -0.5, 0.25]), param(dev, &[2.0])];
    let mut opt = make(ps.clone());
    for k in 0..3 {
        quadratic_grads(&ps, k);
        opt.step()?;
    }
    let saved: OptimizerState = opt.state_dict();
    let saved_p: Vec<Vec<f64>> = ps.iter().map(|p| p.to_vec().unwrap()).collect();
    let run = |opt: &mut dyn Optimizer| -> Result<Vec<Vec<f64>>> {
        for k in 3..7 {
            quadratic_grads(&ps, k);
            opt.step()?;
        }
        Ok(ps.iter().map(|p| p.to_vec().unwrap()).collect())
    };
    let first = run(opt.as_mut())?;
    // restore into a fresh optimizer and rerun: identical
    for (p, v) in ps.iter().zip(&saved_p) {
        let _g = might::no_grad();
        p.copy_(&Tensor::new(v.as_slice()).to_device(dev)?)?;
    }
    let mut fresh = make(ps.clone());
    fresh.set_lr(123.0);
    fresh.load_state_dict(&saved)?;
    assert_eq!(fresh.lr(), opt.lr());
    let second = run(fresh.as_mut())?;
    assert_eq!(first, second);
    Ok(())
}

fn state_dict_round_trip_reproduces_the_run(dev: Device) -> Result<()> {
    roundtrip(dev, &|ps| {
        Box::new(
            Sgd::new(
                ps,
                SgdConfig {
                    lr: 0.1,
                    momentum: 0.9,
                    dampening: 0.1,
                    ..Default::default()
                },
            )
            .unwrap(),
        )
    })?;
    roundtrip(dev, &|ps| {
        Box::new(
            Adam::new(
                ps,
                AdamConfig {
                    lr: 0.05,
                    amsgrad: true,
                    ..Default::default()
                },
            )
            .unwrap(),
        )
    })?;
    roundtrip(dev, &|ps| {
        Box::new(AdamW::new(ps, AdamConfig::adamw()).unwrap())
    })?;
    roundtrip(dev, &|ps| {
        Box::new(
            RmsProp::new(
                ps,
                RmsPropConfig {
                    momentum: 0.5,
                    centered: true,
                    ..Default::default()
                },
            )
            .unwrap(),
        )
    })
}

fn load_state_dict_rejects_foreign_state_and_changes_nothing(dev: Device) -> Result<()> {
    let p = param(dev, &[1.0, 2.0]);
    let mut opt = Adam::new(vec![p.clone()], AdamConfig::default())?;
    grad(&p, &[1.0, 1.0]);
    opt.step()?;
    let good = opt.state_dict();
    let names: Vec<&str> = good.tensors.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["state.0.exp_avg", "state.0.exp_avg_sq"]);

    let mut bad = good.clone();
    bad.tensors[0].1 = Tensor::new(&[1.0f64, 2.0, 3.0]).to_device(dev).unwrap();
    assert_eq!(
        opt.load_state_dict(&bad).unwrap_err().kind,
        ErrorKind::Shape
    );
    let mut bad = good.clone();
    bad.tensors.push((
        "state.7.exp_avg".into(),
        Tensor::new(&[0.0f64, 0.0]).to_device(dev).unwrap(),
    ));
    assert!(opt.load_state_dict(&bad).is_err());
    let mut bad = good.clone();
    bad.tensors.remove(1);
    let e = opt.load_state_dict(&bad).unwrap_err();
    assert!(e.to_string().contains("exp_avg_sq"), "{e}");
    let mut bad = good.clone();
    bad.scalars.retain(|(n, _)| n != "state.0.step");
    assert!(opt.load_state_dict(&bad).is_err());
    // nothing was half-loaded
    let now = opt.state_dict();
    assert_eq!(now.scalar("state.0.step"), Some(1.0));
    // an Adam checkpoint is not an SGD one
    let mut sgd = Sgd::new(
        vec![p],
        SgdConfig {
            momentum: 0.9,
            ..Default::default()
        },
    )?;
    assert!(sgd.load_state_dict(&good).is_err());
    Ok(())
}

// ---------- PyTorch parity ----------

fn trajectories_match_pytorch(dev: Device) -> Result<()> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/optim.json"
    );
    let text = std::fs::read_to_string(path).expect("fixture optim.json");
    let data: serde_json::Value = serde_json::from_str(&text).expect("valid json");
    let f64s = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let x = Tensor::from_vec(f64s(&data["x"]), [6, 4])?.to_device(dev)?;
    let y = Tensor::from_vec(f64s(&data["y"]), [6, 3])?.to_device(dev)?;
    let steps = data["steps"].as_u64().unwrap() as usize;
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() >= 15);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let num = |k: &str, d: f64| c.get(k).and_then(|v| v.as_f64()).unwrap_or(d);
        let flag = |k: &str| c.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
        let w = Tensor::from_vec(f64s(&data["w0"]), [4, 3])?
            .to_device(dev)?
            .with_requires_grad();
        let b = Tensor::from_vec(f64s(&data["b0"]), [3])?
            .to_device(dev)?
            .with_requires_grad();
        let lr = num("lr", 0.0);
        let wd = num("weight_decay", 0.0);
        let groups = if flag("groups") {
            vec![
                ParamGroup::new(vec![w.clone()]),
                ParamGroup::new(vec![b.clone()])
                    .with_weight_decay(0.0)
                    .with_lr_scale(0.5),
            ]
        } else {
            vec![ParamGroup::new(vec![w.clone(), b.clone()])]
        };
        let betas = c
            .get("betas")
            .map(|v| (v[0].as_f64().unwrap(), v[1].as_f64().unwrap()))
            .unwrap_or((0.9, 0.999));
        let acfg = AdamConfig {
            lr,
            betas,
            eps: num("eps", 1e-8),
            weight_decay: wd,
            amsgrad: flag("amsgrad"),
        };
        let mut opt: Box<dyn Optimizer> = match c["opt"].as_str().unwrap() {
            "sgd" => Box::new(Sgd::with_groups(
                groups,
                SgdConfig {
                    lr,
                    momentum: num("momentum", 0.0),
                    dampening: num("dampening", 0.0),
                    nesterov: flag("nesterov"),
                    weight_decay: wd,
                },
            )?),
            "adam" => Box::new(Adam::with_groups(groups, acfg)?),
            "adamw" => Box::new(AdamW::with_groups(groups, acfg)?),
            "rmsprop" => Box::new(RmsProp::with_groups(
                groups,
                RmsPropConfig {
                    lr,
                    alpha: num("alpha", 0.99),
                    eps: num("eps", 1e-8),
                    weight_decay: wd,
                    momentum: num("momentum", 0.0),
                    centered: flag("centered"),
                },
            )?),
            o => panic!("unknown optimizer {o}"),
        };
        let mut sched = match c.get("schedule") {
            Some(s) if !s.is_null() => {
                let sch: Box<dyn LrSchedule> = match s["kind"].as_str().unwrap() {
                    "step" => Box::new(StepLR::new(
                        s["step_size"].as_u64().unwrap() as usize,
                        s["gamma"].as_f64().unwrap(),
                    )?),
                    "onecycle" => Box::new(OneCycleLR::with_options(
                        s["total_steps"].as_u64().unwrap() as usize,
                        s["pct_start"].as_f64().unwrap(),
                        s["div_factor"].as_f64().unwrap(),
                        s["final_div_factor"].as_f64().unwrap(),
                    )?),
                    k => panic!("unknown schedule {k}"),
                };
                Some(Scheduler::for_optimizer(opt.as_mut(), sch))
            }
            _ => None,
        };
        let traj = c["traj"].as_array().unwrap();
        let norms = f64s(&c["norms"]);
        let losses = f64s(&c["losses"]);
        for s in 0..steps {
            opt.zero_grad();
            let loss = x
                .matmul(&w)?
                .add(&b)?
                .tanh()?
                .sub(&y)?
                .square()?
                .mean_all()?;
            loss.backward()?;
            close(&[loss.item()?], &[losses[s]], 1e-5);
            if let Some(m) = c.get("clip_norm").and_then(|v| v.as_f64()) {
                let n = clip_grad_norm_(&[w.clone(), b.clone()], m)?;
                close(&[n], &[norms[s]], 1e-5);
            }
            if let Some(v) = c.get("clip_value").and_then(|v| v.as_f64()) {
                clip_grad_value_(&[w.clone(), b.clone()], v)?;
            }
            opt.step()?;
            if let Some(sc) = &mut sched {
                sc.step(opt.as_mut());
            }
            let mut got = w.to_vec::<f64>()?;
            got.extend(b.to_vec::<f64>()?);
            let want = f64s(&traj[s]);
            for (g, t) in got.iter().zip(&want) {
                assert!(
                    (g - t).abs() <= 1e-5 * t.abs().max(1e-3),
                    "{name}: step {s}: got {got:?}, PyTorch {want:?}"
                );
            }
        }
    }
    Ok(())
}

/// Timing of the fused f32 AdamW step (run with `--ignored --nocapture`); compares it with
/// one `add_scaled_` pass over the same tensor, the least any update can cost.
#[test]
#[ignore]
fn bench_fused_adamw_step() -> Result<()> {
    let n = 1 << 22;
    let p = Tensor::randn([n], DType::F32)?.with_requires_grad();
    p.set_grad(Some(Tensor::randn([n], DType::F32)?));
    let mut opt = AdamW::new(vec![p.clone()], AdamConfig::adamw())?;
    opt.step()?;
    let reps = 20;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        opt.step()?;
    }
    let fused = t.elapsed().as_secs_f64() / reps as f64;
    let g = p.grad().unwrap();
    let t = std::time::Instant::now();
    for _ in 0..reps {
        let _ng = might::no_grad();
        p.add_scaled_(&g, -1e-3)?;
    }
    let axpy = t.elapsed().as_secs_f64() / reps as f64;
    println!(
        "AdamW f32 step, {n} params: {:.2} ms ({:.2} ns/param); add_scaled_ pass: {:.2} ms",
        fused * 1e3,
        fused * 1e9 / n as f64,
        axpy * 1e3
    );
    Ok(())
}
