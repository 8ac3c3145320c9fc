//! The image classifier of a `might train mnist` checkpoint.

use might::models::vision;
use might::nn::{Module, Sequential};
use might::{Device, Error, Result, Tensor};

/// A `might train mnist` (or fashion-mnist) model: `--model cnn`, `small-cnn` or `mlp`, on
/// 1x28x28 inputs, with the normalisation and class names its checkpoint records.
pub struct DigitClassifier {
    net: Sequential,
    classes: Vec<String>,
    mean: f32,
    std: f32,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::format("DigitClassifier", msg.into())
}

impl DigitClassifier {
    /// From the bytes of a checkpoint written by `might train mnist` (`last.safetensors`,
    /// `best.safetensors`): its `model`, `chw`, `classes`, `mean` and `std` fields say what to
    /// build; the tensors must then fit it exactly (a strict state-dict load).
    pub fn from_checkpoint(bytes: &[u8]) -> Result<DigitClassifier> {
        let ck = crate::load_checkpoint(bytes)?;
        let field = |k: &str| {
            ck.extra
                .get(k)
                .map(String::as_str)
                .ok_or_else(|| bad(format!("checkpoint has no field {k}")))
        };
        if field("chw")?.replace(' ', "") != "1,28,28" {
            return Err(bad(format!(
                "the page takes 1x28x28 models; this checkpoint's chw is {:?}",
                field("chw")?
            )));
        }
        let classes: Vec<String> = field("classes")?.split('|').map(str::to_string).collect();
        if classes.len() < 2 || classes.len() > 1000 {
            return Err(bad(format!("{} classes", classes.len())));
        }
        let chw = [1, 28, 28];
        let mut net = match field("model")? {
            "cnn" => vision::gray_cnn(chw, classes.len())?,
            "small-cnn" => vision::small_cnn(chw, classes.len())?,
            "mlp" => vision::mlp(28 * 28, 128, classes.len())?,
            m => return Err(bad(format!("unknown model {m:?}"))),
        };
        net.load_state_dict(&ck.model, true)?;
        net.train(false);
        let num = |k: &str, default: f32| -> Result<f32> {
            match ck.extra.get(k).map(String::as_str) {
                None | Some("") => Ok(default),
                Some(v) => v
                    .parse::<f32>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| bad(format!("field {k} = {v:?} is not a number"))),
            }
        };
        let (mean, std) = (num("mean", 0.0)?, num("std", 1.0)?);
        if std <= 0.0 {
            return Err(bad(format!("field std = {std} must be positive")));
        }
        Ok(DigitClassifier {
            net,
            classes,
            mean,
            std,
        })
    }

    /// Class names, in output order.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Move the weights to `device` (the page's WebGPU adapter).
    pub fn to_device(&self, device: Device) -> Result<()> {
        self.net.to_device(device)
    }

    pub fn device(&self) -> Device {
        self.net.device()
    }

    /// The probability tensor `[classes]` of a 28x28 image (0 = background, 1 = ink), left on
    /// the model's device.
    pub fn probabilities_tensor(&self, pixels: &[f32]) -> Result<Tensor> {
        if pixels.len() != 28 * 28 {
            return Err(Error::invalid(
                "DigitClassifier::probabilities",
                format!("expected 784 pixels (28x28), got {}", pixels.len()),
            ));
        }
        let x: Vec<f32> = pixels
            .iter()
            .map(|&p| (p.clamp(0.0, 1.0) - self.mean) / self.std)
            .collect();
        let x = Tensor::from_vec(x, [1, 1, 28, 28])?.to_device(self.device())?;
        let _g = might::no_grad();
        self.net
            .forward(&x)?
            .softmax(-1)?
            .reshape([self.classes.len()])
    }

    /// Class probabilities of a 28x28 image (0 = background, 1 = ink).
    pub fn probabilities(&self, pixels: &[f32]) -> Result<Vec<f32>> {
        self.probabilities_tensor(pixels)?.to_vec::<f32>()
    }
}
