//! Running loss and accuracy of a training or evaluation loop, read back only when asked.
//!
//! On the CPU a loss is a number as soon as it is computed, so the meter reads each one (and
//! a non-finite loss stops the run at its step). On a GPU reading a value waits for every
//! queued kernel: there the meter keeps its sums on the device and the loop reads them every
//! few steps, so the GPU is never drained once per step.

use crate::train::{CliError, Res};
use might::{DType, Device, Tensor};

pub struct Meter {
    /// Whether values are read as they come (the CPU).
    eager: bool,
    loss: f64,
    right: usize,
    n: usize,
    /// Device-side sums not yet read.
    dev_loss: Option<Tensor>,
    dev_right: Option<Tensor>,
}

impl Meter {
    pub fn new(device: Device) -> Meter {
        Meter {
            eager: device == Device::Cpu,
            loss: 0.0,
            right: 0,
            n: 0,
            dev_loss: None,
            dev_right: None,
        }
    }

    /// Add `loss · weight` and the rows of `logits` whose argmax equals `targets`.
    pub fn add(
        &mut self,
        loss: &Tensor,
        weight: f64,
        logits: &Tensor,
        targets: &Tensor,
    ) -> Res<()> {
        self.n += targets.numel();
        if self.eager {
            let l = loss.item()?;
            check(l)?;
            self.loss += l * weight;
            self.right += crate::net::correct(logits, targets)?;
            return Ok(());
        }
        let l = loss.detach().to_dtype(DType::F32)?.mul_scalar(weight)?;
        let r = logits.detach().argmax(-1, false)?.eq(targets)?.sum_all()?;
        self.dev_loss = Some(match self.dev_loss.take() {
            Some(s) => s.add(&l)?,
            None => l,
        });
        self.dev_right = Some(match self.dev_right.take() {
            Some(s) => s.add(&r)?,
            None => r,
        });
        Ok(())
    }

    /// `(loss sum, right, count)` so far (waits for the device's queued work).
    pub fn read(&mut self) -> Res<(f64, usize, usize)> {
        if let Some(l) = self.dev_loss.take() {
            let l = l.item()?;
            check(l)?;
            self.loss += l;
        }
        if let Some(r) = self.dev_right.take() {
            self.right += r.item()? as usize;
        }
        Ok((self.loss, self.right, self.n))
    }
}

/// A non-finite loss as the error `loss became NaN` (the caller says where).
fn check(l: f64) -> Res<()> {
    if l.is_finite() {
        Ok(())
    } else {
        Err(CliError(format!("loss became {l}")))
    }
}

/// The device a `--device` flag names: `cpu`, `gpu` (the first GPU), `gpu:N`, or `best` (a
/// hardware GPU when there is one, else the CPU).
pub fn parse_device(s: &str) -> Res<Device> {
    let gpu = |n: usize| -> Res<Device> {
        #[cfg(feature = "gpu")]
        return Device::gpu(n).map_err(|e| CliError(format!("--device {s}: {e}")));
        #[cfg(not(feature = "gpu"))]
        Err(CliError(format!(
            "--device {s}: this build of might has no GPU backend (build with --features gpu); gpu {n} unavailable"
        )))
    };
    match s {
        "cpu" => Ok(Device::Cpu),
        "best" => Ok(Device::best()),
        "gpu" | "cuda" => gpu(0),
        _ => match s.strip_prefix("gpu:").and_then(|n| n.parse().ok()) {
            Some(n) => gpu(n),
            None => Err(CliError(format!(
                "--device {s}: expected cpu, gpu, gpu:N or best"
            ))),
        },
    }
}

/// The run's device for the JSON line: `"device":"gpu:0","adapter":"..."`.
pub fn json_fields(d: Device) -> String {
    format!(
        "\"device\":{},\"adapter\":{}",
        crate::train::json_str(&d.to_string()),
        crate::train::json_str(&d.name())
    )
}
