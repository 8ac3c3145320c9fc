//! The weights compiled into `examples/05_embedded_mnist.rs` load from bytes and classify the
//! committed MNIST test images: if any tensor were read wrongly (offsets, f16 decoding,
//! names, transposition) the accuracy would collapse far below the bar.

#[path = "../examples/05_embedded_mnist.rs"]
mod example;

use might::data::Mnist;
use might::nn::Module;

fn data_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/mnist")
}

#[test]
fn embedded_weights_classify_mnist() {
    let clf = example::Classifier::from_bytes(example::WEIGHTS).unwrap();
    assert_eq!(clf.model.num_parameters(), 784 * 128 + 128 + 128 * 10 + 10);
    assert!((clf.mean - 0.1307).abs() < 1e-6 && (clf.std - 0.3081).abs() < 1e-6);
    let test = Mnist::load(data_dir(), false).unwrap();
    let acc = clf.accuracy(&test, 2000).unwrap();
    assert!(acc >= 0.97, "accuracy {acc} on the first 2000 test images");
}

#[test]
fn embedded_weights_reject_corruption() {
    // Cut inside the tensor data: a clean error, not a half-loaded model.
    let w = example::WEIGHTS;
    assert!(example::Classifier::from_bytes(&w[..w.len() - 1]).is_err());
    assert!(example::Classifier::from_bytes(&w[..100]).is_err());
}
