//! The backend interface on the reference backend: every required method of
//! [`BackendStorage`] forwards to the scalar kernels of this folder. The optional fused fast
//! paths keep their default bodies, so the ops compose them from these primitives.

use super::{elementwise as ew, index, linalg, pool, reduce, RefStorage as S};
use crate::backend::{BackendStorage, BinaryOp, CmpOp, ConvGeom, PoolGeom, ReduceOp, UnaryOp};
use crate::{DType, Device, Error, Layout, Result, WithDType};

impl BackendStorage for S {
    fn dtype(&self) -> DType {
        S::dtype(self)
    }
    fn len(&self) -> usize {
        match &self.buf {
            super::Buf::F(v) => v.len(),
            super::Buf::I(v) => v.len(),
        }
    }
    fn device(&self) -> Device {
        Device::Reference
    }

    fn to_vec<T: WithDType>(&self, layout: &Layout) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(Error::dtype(
                "to_vec",
                format!("tensor has dtype {}, asked for {}", self.dtype(), T::DTYPE),
            ));
        }
        Ok(self.to_host(layout))
    }
    fn to_f64_vec(&self, layout: &Layout) -> Result<Vec<f64>> {
        Ok(self.gather_f(layout))
    }

    fn copy_contiguous(&self, layout: &Layout) -> Result<S> {
        Ok(self.select(&super::offsets(layout)))
    }
    fn to_dtype(&self, layout: &Layout, dtype: DType) -> Result<S> {
        Ok(ew::to_dtype(self, layout, dtype))
    }
    fn assign(&mut self, dst: &Layout, src: &S, src_layout: &Layout) -> Result<()> {
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
        ew::binary_inplace(self, l, rhs, rl, op)
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
        Ok(reduce::softmax_rows(self, l, n, log))
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
        pool::avg_pool2d(self, l, geom)
    }
    fn avg_pool2d_backward(&self, l: &Layout, geom: &PoolGeom) -> Result<S> {
        pool::avg_pool2d_backward(self, l, geom)
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
        Ok(index::index_select(self, l, ids, dims))
    }
    fn index_add_inplace(
        &mut self,
        ids: &[usize],
        src: &S,
        sl: &Layout,
        dims: [usize; 3],
    ) -> Result<()> {
        index::index_add(self, ids, src, sl, dims)
    }
    fn gather(&self, l: &Layout, ids: &[usize], index_dims: &[usize], dim: usize) -> Result<S> {
        Ok(index::gather(self, l, ids, index_dims, dim))
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
        index::scatter_add(self, l, ids, index_dims, src, sl, dim)
    }
}
