//! `Tensor::to_vec_async` and `might::init_gpu`, the non-blocking forms a browser needs
//! (WebGPU answers only through the page's event loop); natively they give what `to_vec` and
//! `Device::gpu` give. Driven here by a minimal executor.

mod common;

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use might::{DType, Tensor};

/// Run a future to completion on this thread.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark()
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park(),
        }
    }
}

fn views() -> Vec<Tensor> {
    let a = Tensor::arange(0.0, 24.0, 1.0, DType::F32)
        .unwrap()
        .reshape([2, 3, 4])
        .unwrap();
    vec![
        a.clone(),
        a.permute(&[2, 0, 1]).unwrap(),
        a.narrow(2, 1, 2).unwrap(),
        Tensor::from_vec(vec![3i64, -7, 1 << 40], [3]).unwrap(),
        Tensor::zeros([0, 5], DType::F32).unwrap(),
    ]
}

fn same(t: &Tensor) {
    match t.dtype() {
        DType::I64 => assert_eq!(
            block_on(t.to_vec_async::<i64>()).unwrap(),
            t.to_vec::<i64>().unwrap()
        ),
        _ => assert_eq!(
            block_on(t.to_vec_async::<f32>()).unwrap(),
            t.to_vec::<f32>().unwrap()
        ),
    }
}

#[test]
fn to_vec_async_reads_what_to_vec_reads_on_the_cpu() {
    for t in views() {
        same(&t);
    }
    let e = block_on(views()[0].to_vec_async::<f64>()).unwrap_err();
    assert!(e.to_string().contains("to_vec_async"), "{e}");
}

#[cfg(feature = "gpu")]
#[test]
fn init_gpu_and_to_vec_async_on_the_gpu() {
    let Some(dev) = common::gpu() else { return };
    let name = block_on(might::init_gpu(0)).unwrap();
    assert!(dev.name().starts_with(&name), "{name} vs {}", dev.name());
    for t in views() {
        if t.dtype() == DType::I64
            && t.to_vec::<i64>()
                .unwrap()
                .iter()
                .any(|v| v.abs() >= 1 << 31)
        {
            continue; // int64 on the GPU holds 32-bit values
        }
        let g = t.to_device(dev).unwrap();
        same(&g);
        // computed on the GPU, then read without blocking: several reads in flight at once
        let y = g.to_dtype(DType::F32).unwrap().mul_scalar(2.0).unwrap();
        let (a, b) =
            block_on(async { (y.to_vec_async::<f32>().await, y.to_vec_async::<f32>().await) });
        let want: Vec<f32> = t
            .to_dtype(DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v * 2.0)
            .collect();
        assert_eq!(a.unwrap(), want);
        assert_eq!(b.unwrap(), want);
    }
    assert!(block_on(might::init_gpu(99)).is_err());
}
