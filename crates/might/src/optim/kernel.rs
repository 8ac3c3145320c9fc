//! The fused update driver: hands an optimizer's per-element kernel the parameter, gradient
//! and state buffers of one parameter as plain slices (no temporaries), splitting large
//! tensors across the thread pool.

use super::ParamState;
use crate::backend::cpu::{threads, CpuDType};
use crate::{DType, Error, Result, Tensor};
use std::sync::Mutex;

/// Element types the fused kernels run in.
pub(crate) trait Real: num_traits::Float + CpuDType + Send + Sync {
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

/// Update one parameter in place with `k`, creating zeroed state buffers (`nbufs`) on the
/// first call. Errors (never panics) on a gradient of the wrong shape.
pub(crate) fn update_param<K: Kernel>(
    op: &str,
    p: &Tensor,
    g: &Tensor,
    state: &mut Option<ParamState>,
    nbufs: usize,
    k: &K,
) -> Result<()> {
    if g.shape() != p.shape() {
        return Err(Error::shape(
            op,
            format!(
                "gradient has shape {}, parameter has shape {}",
                g.shape(),
                p.shape()
            ),
        ));
    }
    let sdt = super::state_dtype(p.dtype());
    if state.is_none() {
        let bufs = (0..nbufs)
            .map(|_| Tensor::zeros(p.shape(), sdt)?.to_device(p.device()))
            .collect::<Result<Vec<_>>>()?;
        *state = Some(ParamState { step: 0, bufs });
    }
    let st = state.as_mut().expect("set above");
    match p.dtype() {
        DType::F32 => drive::<f32, K>(p, g, st, k),
        DType::F64 => drive::<f64, K>(p, g, st, k),
        DType::F16 | DType::BF16 => {
            // half precision: update an f32 copy (with f32 state), then round back
            let p32 = p.detach().to_dtype(DType::F32)?;
            drive::<f32, K>(&p32, g, st, k)?;
            p.copy_(&p32)?;
            Ok(())
        }
        dt => Err(Error::dtype(
            op,
            format!("cannot update a parameter of dtype {dt}"),
        )),
    }
}

fn drive<T: Real, K: Kernel>(p: &Tensor, g: &Tensor, st: &mut ParamState, k: &K) -> Result<()> {
    let g = g.detach().to_dtype(T::DTYPE)?;
    let g = if g.same_storage(p) {
        g.deep_clone()?
    } else {
        g.contiguous()?
    };
    let Some((ps, pe)) = p.layout().contiguous_range() else {
        // a strided parameter (rare): update a dense copy and write it back
        let tmp = p.detach().contiguous()?;
        drive::<T, K>(&tmp, &g, st, k)?;
        p.copy_(&tmp)?;
        return Ok(());
    };
    let (gs, ge) = g
        .layout()
        .contiguous_range()
        .expect("made contiguous above");
    let gguard = g.storage();
    let gsl = &T::slice(gguard.cpu()).expect("converted above")[gs..ge];
    let mut pguard = p.storage_mut();
    let psl = &mut T::slice_mut(pguard.cpu_mut()).expect("dtype checked")[ps..pe];
    let mut guards: Vec<_> = st.bufs.iter().map(|b| b.storage_mut()).collect();
    let bufs: Vec<&mut [T]> = guards
        .iter_mut()
        .map(|b| T::slice_mut(b.cpu_mut()).expect("state dtype matches"))
        .collect();
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
    Ok(())
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
