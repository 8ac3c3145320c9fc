//! The JavaScript API (wasm-bindgen): `Digits`, `Text`, `mnistInput`, `setSimd` and, in
//! builds with feature `gpu`, `initGpu` with the `toGpu` / `predictGpu` / `nextGpu` methods.
//! Errors reach JavaScript as `Error`s carrying might's message.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;

use crate::{mnist_input, DigitClassifier, TextGenerator};

fn js(e: might::Error) -> JsError {
    JsError::new(&e.to_string())
}

/// The MNIST classifier of a `might train mnist` checkpoint.
#[wasm_bindgen]
pub struct Digits(DigitClassifier);

#[wasm_bindgen]
impl Digits {
    /// From the checkpoint's bytes.
    #[wasm_bindgen(constructor)]
    pub fn new(checkpoint: &[u8]) -> Result<Digits, JsError> {
        DigitClassifier::from_checkpoint(checkpoint)
            .map(Digits)
            .map_err(js)
    }

    /// Class names, in output order.
    pub fn classes(&self) -> Vec<String> {
        self.0.classes().to_vec()
    }

    /// Class probabilities of a 28x28 image (0 background .. 1 ink), on the CPU.
    pub fn predict(&self, pixels: &[f32]) -> Result<Vec<f32>, JsError> {
        self.0.probabilities(pixels).map_err(js)
    }
}

/// The character GPT of a `might train gpt` checkpoint. Shared so that an asynchronous
/// `nextGpu` can hold it across its waits.
#[wasm_bindgen]
pub struct Text(Rc<RefCell<TextGenerator>>);

impl Text {
    fn generator(&self) -> Result<std::cell::RefMut<'_, TextGenerator>, JsError> {
        self.0
            .try_borrow_mut()
            .map_err(|_| JsError::new("Text: a previous nextGpu has not finished"))
    }
}

#[wasm_bindgen]
impl Text {
    #[wasm_bindgen(constructor)]
    pub fn new(checkpoint: &[u8]) -> Result<Text, JsError> {
        TextGenerator::from_checkpoint(checkpoint)
            .map(|t| Text(Rc::new(RefCell::new(t))))
            .map_err(js)
    }

    /// The characters a prompt may use.
    pub fn vocabulary(&self) -> Result<String, JsError> {
        Ok(self.generator()?.vocabulary())
    }

    /// Start a sample (`top_k` 0 = no cut-off; `temperature` 0 = greedy).
    pub fn start(
        &self,
        prompt: &str,
        temperature: f64,
        top_k: usize,
        seed: u32,
    ) -> Result<(), JsError> {
        self.generator()?
            .start(prompt, temperature, top_k, seed as u64)
            .map_err(js)
    }

    /// The next `n` characters, computed on the CPU.
    pub fn next(&self, n: usize) -> Result<String, JsError> {
        self.generator()?.next(n).map_err(js)
    }
}

/// A drawing (`width x height` ink values, 0..1) as MNIST's 28x28 input.
#[wasm_bindgen(js_name = mnistInput)]
pub fn mnist_input_js(ink: &[f32], width: usize, height: usize) -> Vec<f32> {
    mnist_input(ink, width, height)
}

/// Run the CPU kernels' simd128 build (default) or their scalar build.
#[wasm_bindgen(js_name = setSimd)]
pub fn set_simd(on: bool) {
    might::set_wasm_simd128(on)
}

#[cfg(feature = "gpu")]
mod gpu {
    use super::*;
    use might::Device;
    use wasm_bindgen_futures::future_to_promise;

    fn js_value(e: might::Error) -> JsValue {
        JsError::new(&e.to_string()).into()
    }

    /// Ask the browser's WebGPU for an adapter and open it; resolves to the adapter's name.
    #[wasm_bindgen(js_name = initGpu)]
    pub async fn init_gpu() -> Result<String, JsError> {
        might::init_gpu(0).await.map_err(js)
    }

    #[wasm_bindgen]
    impl Digits {
        /// Move the weights to the GPU opened by `initGpu`.
        #[wasm_bindgen(js_name = toGpu)]
        pub fn to_gpu(&self) -> Result<(), JsError> {
            self.0.to_device(Device::Gpu(0)).map_err(js)
        }

        /// Class probabilities computed on the GPU; resolves to a `Float32Array`.
        #[wasm_bindgen(js_name = predictGpu)]
        pub fn predict_gpu(&self, pixels: &[f32]) -> Result<js_sys::Promise, JsError> {
            let probs = self.0.probabilities_tensor(pixels).map_err(js)?;
            Ok(future_to_promise(async move {
                let v = probs.to_vec_async::<f32>().await.map_err(js_value)?;
                Ok(js_sys::Float32Array::from(&v[..]).into())
            }))
        }
    }

    #[wasm_bindgen]
    impl Text {
        /// Move the weights to the GPU opened by `initGpu` (ends a running sample).
        #[wasm_bindgen(js_name = toGpu)]
        pub fn to_gpu(&self) -> Result<(), JsError> {
            self.generator()?.to_device(Device::Gpu(0)).map_err(js)
        }

        /// The next `n` characters, computed on the GPU; resolves to a string. The generator
        /// stays borrowed across the waits; a second call meanwhile is refused, not a panic.
        #[wasm_bindgen(js_name = nextGpu)]
        #[allow(clippy::await_holding_refcell_ref)]
        pub fn next_gpu(&self, n: usize) -> js_sys::Promise {
            let shared = self.0.clone();
            future_to_promise(async move {
                let mut g = shared.try_borrow_mut().map_err(|_| {
                    JsValue::from(JsError::new("Text: a previous nextGpu has not finished"))
                })?;
                let s = g.next_async(n).await.map_err(js_value)?;
                Ok(JsValue::from_str(&s))
            })
        }
    }
}
