//! The fused optimizer updates on the CPU: each optimizer's per-element kernel gets the
//! parameter, gradient and state buffers of one parameter as plain slices (no temporaries),
//! large tensors split across the thread pool at the same places in every buffer.

use super::{simd, threads};
use crate::backend::OptimUpdate;
use std::sync::Mutex;

/// Element types the fused kernels run in.
pub(crate) trait Real: num_traits::Float + super::CpuDType + Send + Sync {
    fn of(v: f64) -> Self;
}
impl Real for f32 {
    #[inline(always)]
    fn of(v: f64) -> Self {
        v as f32
    }
}
impl Real for f64 {
    #[inline(always)]
    fn of(v: f64) -> Self {
        v
    }
}

/// One optimizer's element-wise update. `s` holds the state buffers in the optimizer's
/// order, each the same length as `p` and `g`.
pub(crate) trait Kernel: Sync {
    fn run<T: Real>(&self, p: &mut [T], g: &[T], s: &mut [&mut [T]]);
}

/// A parameter chunk, its gradient and its state buffers, updated by one task.
type Piece<'a, T> = (&'a mut [T], &'a [T], Vec<&'a mut [T]>);

/// Elements per parallel task of an update.
const CHUNK: usize = 1 << 14;

/// Run `update` on one parameter's slices (`state` in the optimizer's buffer order).
pub(crate) fn update<T: Real>(p: &mut [T], g: &[T], state: Vec<&mut [T]>, update: &OptimUpdate) {
    match *update {
        OptimUpdate::Sgd {
            lr,
            weight_decay,
            momentum,
            dampening,
            nesterov,
            first,
        } => drive(
            p,
            g,
            state,
            &SgdKernel {
                lr,
                wd: weight_decay,
                momentum,
                dampening,
                nesterov,
                first,
            },
        ),
        OptimUpdate::Adam {
            lr,
            beta1,
            beta2,
            eps,
            l2,
            decay,
            step,
        } => drive(
            p,
            g,
            state,
            &AdamKernel {
                lr,
                beta1,
                beta2,
                eps,
                l2,
                decay,
                step,
            },
        ),
        OptimUpdate::RmsProp {
            lr,
            weight_decay,
            alpha,
            eps,
            momentum,
        } => drive(
            p,
            g,
            state,
            &RmsKernel {
                lr,
                wd: weight_decay,
                alpha,
                eps,
                momentum,
            },
        ),
    }
}

fn drive<T: Real, K: Kernel>(psl: &mut [T], gsl: &[T], bufs: Vec<&mut [T]>, k: &K) {
    if threads::parallel(psl.len()) {
        // cut the parameter, its gradient and every state buffer at the same places
        let mut pieces: Vec<Piece<T>> = psl
            .chunks_mut(CHUNK)
            .zip(gsl.chunks(CHUNK))
            .map(|(p, g)| (p, g, Vec::with_capacity(bufs.len())))
            .collect();
        for b in bufs {
            for (piece, c) in pieces.iter_mut().zip(b.chunks_mut(CHUNK)) {
                piece.2.push(c);
            }
        }
        let pieces: Vec<Mutex<_>> = pieces.into_iter().map(Mutex::new).collect();
        threads::run(pieces.len(), |i| {
            let (p, g, s) = &mut *pieces[i].lock().unwrap();
            k.run(p, g, s);
        });
    } else {
        let mut bufs = bufs;
        k.run(psl, gsl, &mut bufs);
    }
}

/// PyTorch's `lerp(a, b, w)` for weights in [0, 1] (the form its CPU kernel uses, so f64
/// trajectories agree bit for bit in the common case).
#[inline(always)]
pub(crate) fn lerp<T: Real>(a: T, b: T, w: T) -> T {
    // both forms, then a select: a branch here kept the optimizer loops from vectorising
    let lo = a + w * (b - a);
    let hi = b - (b - a) * (T::of(1.0) - w);
    if w < T::of(0.5) {
        lo
    } else {
        hi
    }
}

struct SgdKernel {
    lr: f64,
    wd: f64,
    momentum: f64,
    dampening: f64,
    nesterov: bool,
    first: bool,
}

impl Kernel for SgdKernel {
    fn run<T: Real>(&self, p: &mut [T], g: &[T], s: &mut [&mut [T]]) {
        let (lr, wd, mu) = (T::of(self.lr), T::of(self.wd), T::of(self.momentum));
        let damp = T::of(1.0 - self.dampening);
        let has_wd = self.wd != 0.0;
        // The flags are tested outside the loops (one straight loop per case, which LLVM
        // vectorises), and the loops run in the widest SIMD build this CPU has.
        match s {
            [] => simd::run(
                #[inline(always)]
                || {
                    if has_wd {
                        for (p, &g) in p.iter_mut().zip(g) {
                            *p = *p - lr * (g + wd * *p);
                        }
                    } else {
                        for (p, &g) in p.iter_mut().zip(g) {
                            *p = *p - lr * g;
                        }
                    }
                },
            ),
            [buf] => simd::run(
                #[inline(always)]
                || {
                    let it = p.iter_mut().zip(g).zip(buf.iter_mut());
                    match (has_wd, self.first, self.nesterov) {
                        (false, false, false) => {
                            for ((p, &g), b) in it {
                                *b = *b * mu + damp * g;
                                *p = *p - lr * *b;
                            }
                        }
                        (wd_on, first, nesterov) => {
                            for ((p, &g), b) in it {
                                let d = if wd_on { g + wd * *p } else { g };
                                *b = if first { d } else { *b * mu + damp * d };
                                let d = if nesterov { d + mu * *b } else { *b };
                                *p = *p - lr * d;
                            }
                        }
                    }
                },
            ),
            _ => unreachable!("sgd keeps at most one buffer"),
        }
    }
}

struct AdamKernel {
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    /// L2 term added to the gradient (Adam).
    l2: f64,
    /// Decoupled factor `1 - lr·wd` applied to the parameter first (AdamW), 1 otherwise.
    decay: f64,
    step: u64,
}

impl Kernel for AdamKernel {
    fn run<T: Real>(&self, p: &mut [T], g: &[T], s: &mut [&mut [T]]) {
        let step = self.step as f64;
        let bc1 = 1.0 - self.beta1.powf(step);
        let bc2 = 1.0 - self.beta2.powf(step);
        let step_size = T::of(self.lr / bc1);
        let bc2_sqrt = T::of(bc2.sqrt());
        let (w1, b2, w2) = (
            T::of(1.0 - self.beta1),
            T::of(self.beta2),
            T::of(1.0 - self.beta2),
        );
        let (eps, l2, decay) = (T::of(self.eps), T::of(self.l2), T::of(self.decay));
        let (has_l2, has_decay) = (self.l2 != 0.0, self.decay != 1.0);
        // In the widest SIMD build (sqrt and division are exact, so every build rounds
        // alike), the per-parameter choices as selects: with a branch per element the loop
        // stayed scalar. A small GPT's 0.8 M parameters at 2 threads: 650 -> 530 us (one
        // thread is memory-bound either way, ~0.85 ms).
        simd::run(
            #[inline(always)]
            || match s {
                [m, v] => {
                    for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut())
                    {
                        let pd = *p * decay;
                        *p = if has_decay { pd } else { *p };
                        let gl = g + l2 * *p;
                        let d = if has_l2 { gl } else { g };
                        *m = lerp(*m, d, w1);
                        *v = *v * b2 + w2 * d * d;
                        let denom = v.sqrt() / bc2_sqrt + eps;
                        *p = *p - step_size * *m / denom;
                    }
                }
                [m, v, vmax] => {
                    for ((((p, &g), m), v), vmax) in p
                        .iter_mut()
                        .zip(g)
                        .zip(m.iter_mut())
                        .zip(v.iter_mut())
                        .zip(vmax.iter_mut())
                    {
                        let pd = *p * decay;
                        *p = if has_decay { pd } else { *p };
                        let gl = g + l2 * *p;
                        let d = if has_l2 { gl } else { g };
                        *m = lerp(*m, d, w1);
                        *v = *v * b2 + w2 * d * d;
                        *vmax = vmax.max(*v);
                        let denom = vmax.sqrt() / bc2_sqrt + eps;
                        *p = *p - step_size * *m / denom;
                    }
                }
                _ => unreachable!("adam keeps two or three buffers"),
            },
        )
    }
}

struct RmsKernel {
    lr: f64,
    wd: f64,
    alpha: f64,
    eps: f64,
    momentum: f64,
}

impl RmsKernel {
    #[inline(always)]
    fn elem<T: Real>(&self, p: &mut T, g: T, sq: &mut T, ga: Option<&mut T>, buf: Option<&mut T>) {
        let (lr, wd, a, eps) = (
            T::of(self.lr),
            T::of(self.wd),
            T::of(self.alpha),
            T::of(self.eps),
        );
        let w = T::of(1.0 - self.alpha);
        let d = if self.wd != 0.0 { g + wd * *p } else { g };
        *sq = *sq * a + w * d * d;
        let avg = match ga {
            Some(ga) => {
                *ga = lerp(*ga, d, w);
                (*sq - *ga * *ga).sqrt() + eps
            }
            None => sq.sqrt() + eps,
        };
        match buf {
            Some(b) => {
                *b = *b * T::of(self.momentum) + d / avg;
                *p = *p - lr * *b;
            }
            None => *p = *p - lr * d / avg,
        }
    }
}

impl Kernel for RmsKernel {
    fn run<T: Real>(&self, p: &mut [T], g: &[T], s: &mut [&mut [T]]) {
        let has_mom = self.momentum > 0.0;
        match (s, has_mom) {
            ([sq], _) => {
                for ((p, &g), sq) in p.iter_mut().zip(g).zip(sq.iter_mut()) {
                    self.elem(p, g, sq, None, None);
                }
            }
            ([sq, b], true) => {
                for (((p, &g), sq), b) in p.iter_mut().zip(g).zip(sq.iter_mut()).zip(b.iter_mut()) {
                    self.elem(p, g, sq, None, Some(b));
                }
            }
            ([sq, ga], false) => {
                for (((p, &g), sq), ga) in p.iter_mut().zip(g).zip(sq.iter_mut()).zip(ga.iter_mut())
                {
                    self.elem(p, g, sq, Some(ga), None);
                }
            }
            ([sq, b, ga], _) => {
                for ((((p, &g), sq), b), ga) in p
                    .iter_mut()
                    .zip(g)
                    .zip(sq.iter_mut())
                    .zip(b.iter_mut())
                    .zip(ga.iter_mut())
                {
                    self.elem(p, g, sq, Some(ga), Some(b));
                }
            }
            _ => unreachable!("rmsprop keeps one to three buffers"),
        }
    }
}
