//! Drawing category indices from rows of weights: `multinomial`. The weights are read to the
//! host and the draws use the global generator (`manual_seed`), so a seed gives the same
//! samples on every backend.

use crate::tensor::random::with_global;
use crate::{DType, Error, Result, Tensor};

/// Index of the first cumulative weight above `u` (`cum` increasing, `u` in `[0, cum.last)`).
fn search(cum: &[f64], u: f64) -> usize {
    cum.partition_point(|&c| c <= u).min(cum.len() - 1)
}

impl Tensor {
    /// `torch.multinomial(self, num_samples, replacement)`: for each row of non-negative
    /// weights (a 1-D tensor is one row; they need not sum to 1), `num_samples` int64 category
    /// indices drawn with probability proportional to the weights. Without replacement a
    /// category is drawn at most once per row, so each row needs that many non-zero weights.
    #[track_caller]
    pub fn multinomial(&self, num_samples: usize, replacement: bool) -> Result<Tensor> {
        let op = "multinomial";
        if !matches!(self.rank(), 1 | 2) {
            return Err(Error::shape(
                op,
                format!(
                    "expected a 1-D or 2-D tensor of weights, got shape {}",
                    self.shape()
                ),
            ));
        }
        if !self.dtype().is_float() {
            return Err(Error::dtype(
                op,
                format!("weights must be floating point, got {}", self.dtype()),
            ));
        }
        let n = self.dims()[self.rank() - 1];
        if n == 0 {
            return Err(Error::shape(op, "the rows have no categories"));
        }
        if num_samples == 0 {
            return Err(Error::invalid(op, "num_samples must be positive"));
        }
        if !replacement && num_samples > n {
            return Err(Error::invalid(
                op,
                format!(
                    "cannot draw {num_samples} samples from {n} categories without replacement"
                ),
            ));
        }
        let w = self.detach().to_f64_vec();
        let rows = w.len() / n;
        // every row is checked before anything is drawn
        for (i, row) in w.chunks(n).enumerate() {
            if let Some(v) = row.iter().find(|v| !v.is_finite() || **v < 0.0) {
                return Err(Error::invalid(
                    op,
                    format!("row {i} has weight {v}: weights must be finite and non-negative"),
                ));
            }
            let nonzero = row.iter().filter(|&&v| v > 0.0).count();
            if nonzero == 0 {
                return Err(Error::invalid(op, format!("row {i} sums to zero")));
            }
            if !replacement && nonzero < num_samples {
                return Err(Error::invalid(
                    op,
                    format!(
                        "row {i} has {nonzero} non-zero weights, too few for {num_samples} \
                         samples without replacement"
                    ),
                ));
            }
        }
        crate::limits::check_alloc(op, &crate::Shape(vec![rows, num_samples]), DType::I64)?;
        let mut out = Vec::with_capacity(rows * num_samples);
        with_global(|g| {
            for row in w.chunks(n) {
                let mut row = row.to_vec();
                let mut cum: Vec<f64> = Vec::with_capacity(n);
                for k in 0..num_samples {
                    // without replacement the weights change after each draw
                    if k == 0 || !replacement {
                        cum.clear();
                        let mut acc = 0.0;
                        for &v in &row {
                            acc += v;
                            cum.push(acc);
                        }
                    }
                    let u = g.next_f64() * cum[n - 1];
                    let mut j = search(&cum, u);
                    // never land on a zero weight (u can round onto a boundary)
                    while row[j] == 0.0 {
                        j = if j + 1 < n { j + 1 } else { 0 };
                    }
                    out.push(j as i64);
                    if !replacement {
                        row[j] = 0.0;
                    }
                }
            }
        });
        let shape = if self.rank() == 1 {
            vec![num_samples]
        } else {
            vec![rows, num_samples]
        };
        Tensor::from_vec(out, shape)?.to_device(self.device())
    }
}
