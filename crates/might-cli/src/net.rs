//! The models the CLI trains (defined in `might::models::vision`), boxed per dataset, and the
//! loss and accuracy the training loop reads.

use might::models::vision::{self, gray_cnn, rgb_cnn};
use might::nn::Module;
use might::{Result, Tensor};

use crate::train::CliError;

/// The convolutional model for a dataset: the gray CNN for 1-channel inputs (MNIST,
/// Fashion-MNIST), the VGG-style CNN for RGB (CIFAR-10).
pub fn cnn(chw: [usize; 3], classes: usize) -> std::result::Result<Box<dyn Module>, CliError> {
    let min = if chw[0] == 1 { 4 } else { 8 };
    if chw[1] < min || chw[2] < min {
        return Err(CliError(format!(
            "model cnn needs images of at least {min}x{min}, got {chw:?}"
        )));
    }
    Ok(if chw[0] == 1 {
        Box::new(gray_cnn(chw, classes)?)
    } else {
        Box::new(rgb_cnn(chw, classes)?)
    })
}

/// The benchmark's small CNN (`might::models::vision::small_cnn`), boxed.
pub fn small_cnn(
    [c, h, w]: [usize; 3],
    classes: usize,
) -> std::result::Result<Box<dyn Module>, CliError> {
    if h < 10 || w < 10 {
        return Err(CliError(format!(
            "model small-cnn needs images of at least 10x10, got {h}x{w}"
        )));
    }
    Ok(Box::new(vision::small_cnn([c, h, w], classes)?))
}

/// Mean cross-entropy of `logits [b, c]` against class ids `targets [b]` (i64).
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    might::nn::functional::cross_entropy(logits, targets, &Default::default())
}

/// Number of rows of `logits` whose argmax equals the target.
pub fn correct(logits: &Tensor, targets: &Tensor) -> Result<usize> {
    let pred = logits.argmax(-1, false)?.to_vec::<i64>()?;
    let t = targets.to_vec::<i64>()?;
    Ok(pred.iter().zip(&t).filter(|(a, b)| a == b).count())
}
