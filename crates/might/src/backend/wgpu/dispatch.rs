//! The backend interface on the GPU: every method of [`BackendStorage`] forwards to the WGSL
//! kernels of this folder, but for the fused paths `fused.rs` explains it leaves to their
//! composed defaults (each primitive a kernel on the GPU, queued without a sync).

use super::{elementwise as ew, fused, index, linalg, pool, reduce, value_of, WgpuStorage as S};
use crate::backend::{
    BackendStorage, BinaryOp, CmpOp, ConvGeom, OptimUpdate, PoolGeom, ReduceOp, UnaryOp,
};
use crate::{DType, Device, Error, Layout, Result, WithDType};

impl BackendStorage for S {
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn len(&self) -> usize {
        self.len
    }
    fn device(&self) -> Device {
        Device::Gpu(self.ordinal)
    }

    fn to_vec<T: WithDType>(&self, layout: &Layout) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(Error::dtype(
                "to_vec",
                format!("tensor has dtype {}, asked for {}", self.dtype, T::DTYPE),
            ));
        }
        let w = self.words("to_vec", layout)?;
        Ok(w.into_iter()
            .map(|w| T::from_f64(value_of(self.dtype, w)))
            .collect())
    }
    fn to_f64_vec(&self, layout: &Layout) -> Result<Vec<f64>> {
        let w = self.words("to_vec", layout)?;
        Ok(w.into_iter().map(|w| value_of(self.dtype, w)).collect())
    }

    fn copy_contiguous(&self, layout: &Layout) -> Result<S> {
        ew::copy(self, layout)
    }
    fn to_dtype(&self, layout: &Layout, dtype: DType) -> Result<S> {
        ew::to_dtype(self, layout, dtype)
    }
    fn assign(&mut self, dst: &Layout, src: &S, src_layout: &Layout) -> Result<()> {
        self.shadow = None;
        ew::assign(self, dst, src, src_layout)
    }

    fn unary(&self, layout: &Layout, op: UnaryOp) -> Result<S> {
        ew::unary(self, layout, op)
    }
    fn unary_backward(&self, gl: &Layout, saved: &S, sl: &Layout, op: UnaryOp) -> Result<S> {
        ew::unary_backward(self, gl, saved, sl, op)
    }
    fn binary(&self, l: &Layout, rhs: &S, rl: &Layout, op: BinaryOp) -> Result<S> {
        ew::binary(self, l, rhs, rl, op)
    }
    fn binary_inplace(&mut self, l: &Layout, rhs: &S, rl: &Layout, op: BinaryOp) -> Result<()> {
        self.shadow = None;
        ew::binary_inplace(self, l, rhs, rl, op)
    }
    fn add_scaled_inplace(&mut self, l: &Layout, rhs: &S, rl: &Layout, alpha: f64) -> Result<bool> {
        self.shadow = None;
        ew::add_scaled_inplace(self, l, rhs, rl, alpha)
    }
    fn affine_inplace(&mut self, l: &Layout, mul: f64, add: f64) -> Result<bool> {
        self.shadow = None;
        ew::affine_inplace(self, l, mul, add)
    }
    fn cmp(&self, l: &Layout, rhs: &S, rl: &Layout, op: CmpOp) -> Result<S> {
        ew::cmp(self, l, rhs, rl, op)
    }
    fn where_cond(&self, cl: &Layout, a: &S, al: &Layout, b: &S, bl: &Layout) -> Result<S> {
        ew::where_cond(self, cl, a, al, b, bl)
    }

    fn reduce(&self, l: &Layout, mask: &[bool], op: ReduceOp) -> Result<S> {
        reduce::reduce(self, l, mask, op)
    }
    fn arg_reduce(&self, l: &Layout, mask: &[bool], max: bool) -> Result<(S, S)> {
        reduce::arg_reduce(self, l, mask, max)
    }
    fn softmax_rows(&self, l: &Layout, n: usize, log: bool) -> Result<Option<S>> {
        reduce::softmax_rows(self, l, n, log).map(Some)
    }
    fn softmax_backward_rows(
        &self,
        gl: &Layout,
        y: &S,
        yl: &Layout,
        n: usize,
        log: bool,
    ) -> Result<S> {
        reduce::softmax_backward_rows(self, gl, y, yl, n, log)
    }

    fn matmul(&self, l: &Layout, rhs: &S, rl: &Layout) -> Result<S> {
        linalg::matmul(self, l, rhs, rl)
    }

    fn conv2d(
        &self,
        l: &Layout,
        w: &S,
        wl: &Layout,
        bias: Option<(&S, &Layout)>,
        geom: &ConvGeom,
        relu: bool,
    ) -> Result<S> {
        linalg::conv2d((self, l), (w, wl), bias, geom, relu)
    }
    fn conv2d_backward(
        &self,
        l: &Layout,
        w: &S,
        wl: &Layout,
        g: &S,
        gl: &Layout,
        y: Option<(&S, &Layout)>,
        geom: &ConvGeom,
        need: [bool; 3],
    ) -> Result<[Option<S>; 3]> {
        linalg::conv2d_backward((self, l), (w, wl), (g, gl), y, geom, need)
    }
    fn max_pool2d(&self, l: &Layout, geom: &PoolGeom) -> Result<(S, S)> {
        pool::max_pool2d(self, l, geom)
    }
    fn max_pool2d_backward(&self, l: &Layout, idx: &S, il: &Layout, geom: &PoolGeom) -> Result<S> {
        pool::max_pool2d_backward(self, l, idx, il, geom)
    }
    fn avg_pool2d(&self, l: &Layout, geom: &PoolGeom) -> Result<S> {
        pool::avg_pool2d(self, l, geom, false)
    }
    fn avg_pool2d_backward(&self, l: &Layout, geom: &PoolGeom) -> Result<S> {
        pool::avg_pool2d(self, l, geom, true)
    }
    fn adaptive_avg_pool2d(
        &self,
        l: &Layout,
        planes: usize,
        hw: [usize; 2],
        out: [usize; 2],
    ) -> Result<S> {
        pool::adaptive_avg_pool2d(self, l, planes, hw, out, false)
    }
    fn adaptive_avg_pool2d_backward(
        &self,
        l: &Layout,
        planes: usize,
        hw: [usize; 2],
        out: [usize; 2],
    ) -> Result<S> {
        pool::adaptive_avg_pool2d(self, l, planes, hw, out, true)
    }

    fn index_select(&self, l: &Layout, ids: &[usize], dims: [usize; 3]) -> Result<S> {
        index::index_select(self, l, ids, dims)
    }
    fn index_add_inplace(
        &mut self,
        ids: &[usize],
        src: &S,
        sl: &Layout,
        dims: [usize; 3],
    ) -> Result<()> {
        self.shadow = None;
        index::index_add(self, ids, src, sl, dims)
    }
    fn gather(&self, l: &Layout, ids: &[usize], index_dims: &[usize], dim: usize) -> Result<S> {
        index::gather(self, l, ids, index_dims, dim)
    }
    fn scatter_add_inplace(
        &mut self,
        l: &Layout,
        ids: &[usize],
        index_dims: &[usize],
        src: &S,
        sl: &Layout,
        dim: usize,
    ) -> Result<()> {
        self.shadow = None;
        index::scatter_add(self, l, ids, index_dims, src, sl, dim)
    }

    fn layer_norm(
        &self,
        l: &Layout,
        w: Option<(&S, &Layout)>,
        b: Option<(&S, &Layout)>,
        n: usize,
        eps: f64,
    ) -> Result<Option<[S; 3]>> {
        fused::layer_norm(self, l, w, b, n, eps)
    }
    fn layer_norm_backward(
        &self,
        gl: &Layout,
        x: (&S, &Layout),
        w: Option<(&S, &Layout)>,
        mean: &S,
        rstd: &S,
        n: usize,
    ) -> Result<[S; 3]> {
        fused::layer_norm_backward(self, gl, x, w, mean, rstd, n)
    }
    fn causal_softmax(
        &self,
        l: &Layout,
        t: usize,
        s: usize,
        scale: f64,
        offset: usize,
    ) -> Result<Option<S>> {
        fused::causal_softmax(self, l, None, t, s, scale, offset)
    }
    fn causal_softmax_backward(
        &self,
        gl: &Layout,
        y: &S,
        yl: &Layout,
        t: usize,
        s: usize,
        scale: f64,
        offset: usize,
    ) -> Result<S> {
        fused::causal_softmax(self, gl, Some((y, yl)), t, s, scale, offset)?.ok_or_else(|| {
            Error::dtype(
                "causal_softmax_backward",
                "expected f32 operands on the GPU",
            )
        })
    }
    fn optimizer_update(
        &mut self,
        l: &Layout,
        grad: (&S, &Layout),
        state: &mut [&mut S],
        update: &OptimUpdate,
    ) -> Result<bool> {
        let st: Vec<&S> = state.iter().map(|s| &**s).collect();
        fused::optimizer_update(self, l, grad, &st, update)
    }
}
