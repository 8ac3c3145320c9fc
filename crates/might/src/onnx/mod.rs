//! Run exported PyTorch models: an ONNX runtime on might tensors (feature `onnx`).
//!
//! [`Model::load`] parses a `.onnx` file (protobuf, through `prost` and the official
//! `onnx.proto`, including external-data files), checks the graph — the default-domain opset,
//! every operator (all unsupported ones are reported at once, by name), the input and output
//! types — then decodes the initializers and folds the constant parts of the graph. [`Model::run`]
//! executes the rest on any device, node by node, freeing each intermediate after its last use.
//!
//! ```no_run
//! # fn main() -> might::Result<()> {
//! let model = might::onnx::Model::load("resnet18.onnx")?;
//! let x = might::Tensor::randn([1, 3, 224, 224], might::DType::F32)?;
//! for (name, y) in model.run(&[("input", x)])? {
//!     println!("{name}: {}", y.shape());
//! }
//! # Ok(()) }
//! ```

mod control;
mod fuse;
mod lowbit;
mod model;
mod ops;
#[allow(clippy::all, missing_docs)]
#[rustfmt::skip]
pub mod proto;
mod value;

pub use model::{IoInfo, Model, NodeTimes, OPSETS};
pub use ops::lookup as supports_op;
pub use value::{dtype_of, elem, elem_name, elem_of, tensor_from_proto, Value};

/// Decode a serialized `TensorProto` (the `input_K.pb` / `output_K.pb` files of the ONNX test
/// data sets).
pub fn tensor_from_bytes(bytes: &[u8]) -> crate::Result<Value> {
    use prost::Message;
    let t = proto::TensorProto::decode(bytes)
        .map_err(|e| crate::Error::format("onnx", format!("not a TensorProto: {e}")))?;
    tensor_from_proto(&t)
}
