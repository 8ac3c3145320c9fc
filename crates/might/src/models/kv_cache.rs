//! The key/value cache of autoregressive generation, shared by the char-GPT and GPT-2: each
//! new token costs one forward over one position instead of the whole context.

use crate::{DType, Device, Result, Tensor};

/// Keys and values of every layer for the positions seen so far.
pub struct KvCache {
    /// Per layer `(k, v)` buffers `[B, H, context, D]`, filled up to `len`.
    pub(crate) layers: Vec<(Tensor, Tensor)>,
    pub(crate) len: usize,
}

impl KvCache {
    /// Zeroed buffers of `shape` (`[B, H, context, D]`) for `n_layer` layers.
    pub(crate) fn zeros(
        n_layer: usize,
        shape: [usize; 4],
        dtype: DType,
        device: Device,
    ) -> Result<KvCache> {
        let zeros = || Tensor::zeros_on(shape, dtype, device);
        let layers = (0..n_layer)
            .map(|_| Ok((zeros()?, zeros()?)))
            .collect::<Result<_>>()?;
        Ok(KvCache { layers, len: 0 })
    }

    /// Positions cached so far.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Forget everything (the buffers are reused).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Does this cache fit a model of `n_layer` layers and a batch of `batch` sequences?
    pub(crate) fn fits(&self, n_layer: usize, batch: usize) -> bool {
        self.layers.len() == n_layer
            && self
                .layers
                .first()
                .is_none_or(|(k, _)| k.dims()[0] == batch)
    }
}

/// Write `k`, `v` (`[B, H, T, D]`) into a layer's buffers at positions `past..past + T` and
/// return views of all `past + T` cached keys and values.
pub(crate) fn append(
    (kc, vc): &(Tensor, Tensor),
    past: usize,
    k: &Tensor,
    v: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let t = k.dims()[2];
    kc.narrow(2, past, t)?.copy_(k)?;
    vc.narrow(2, past, t)?.copy_(v)?;
    Ok((kc.narrow(2, 0, past + t)?, vc.narrow(2, 0, past + t)?))
}
