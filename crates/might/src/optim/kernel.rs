//! The update driver: creates a parameter's state buffers on its first step and runs one
//! fused optimizer update ([`OptimUpdate`], through the backend) on it.

use super::ParamState;
use crate::backend::OptimUpdate;
use crate::{DType, Error, Result, Tensor};

/// Update one parameter in place with `update`, creating zeroed state buffers (`nbufs`) on
/// the first call. Errors (never panics) on a gradient of the wrong shape.
pub(crate) fn update_param(
    op: &str,
    p: &Tensor,
    g: &Tensor,
    state: &mut Option<ParamState>,
    nbufs: usize,
    update: &OptimUpdate,
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
        DType::F32 | DType::F64 => p.optimizer_update_(g, &st.bufs, update),
        DType::F16 | DType::BF16 => {
            // half precision: update an f32 copy (with f32 state), then round back
            let p32 = p.detach().to_dtype(DType::F32)?;
            p32.optimizer_update_(g, &st.bufs, update)?;
            p.copy_(&p32)?;
            Ok(())
        }
        dt => Err(Error::dtype(
            op,
            format!("cannot update a parameter of dtype {dt}"),
        )),
    }
}
