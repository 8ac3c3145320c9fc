//! A tiny hand-written SVG line chart: loss and accuracy per epoch, train vs test.

/// One row of metrics.csv.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub epoch: u64,
    pub train_loss: f64,
    pub train_acc: f64,
    pub test_loss: f64,
    pub test_acc: f64,
    pub seconds: f64,
}

/// What the rows of a run are: the x axis and the held-out split's name.
#[derive(Clone, Copy, Debug)]
pub struct Labels {
    pub x: &'static str,
    pub eval: &'static str,
}

/// Image classifiers: one row per epoch, evaluated on the test split.
pub const EPOCHS: Labels = Labels {
    x: "epoch",
    eval: "test",
};
/// The GPT: one row per evaluation step, on the validation split.
pub const STEPS: Labels = Labels {
    x: "step",
    eval: "val",
};

impl Labels {
    /// The first line of metrics.csv.
    pub fn csv_header(self) -> String {
        let (x, e) = (self.x, self.eval);
        format!("{x},train_loss,train_acc,{e}_loss,{e}_acc,seconds")
    }
}

impl Row {
    pub fn csv(&self) -> String {
        format!(
            "{},{:.6},{:.6},{:.6},{:.6},{:.3}",
            self.epoch,
            self.train_loss,
            self.train_acc,
            self.test_loss,
            self.test_acc,
            self.seconds
        )
    }
    /// The rows of a run's `metrics.csv` up to `last` (epoch or step), for `--resume`;
    /// empty when the file is missing.
    pub fn read_until(path: &std::path::Path, last: u64) -> Vec<Row> {
        std::fs::read_to_string(path)
            .map(|t| {
                t.lines()
                    .filter_map(Row::parse)
                    .filter(|r| r.epoch <= last)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn parse(line: &str) -> Option<Row> {
        let f: Vec<&str> = line.trim().split(',').collect();
        if f.len() != 6 {
            return None;
        }
        let n = |i: usize| f[i].parse::<f64>().ok();
        Some(Row {
            epoch: f[0].parse().ok()?,
            train_loss: n(1)?,
            train_acc: n(2)?,
            test_loss: n(3)?,
            test_acc: n(4)?,
            seconds: n(5)?,
        })
    }
}

/// A named, coloured line of `(epoch, value)` points.
type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);

fn panel(out: &mut String, x0: f64, title: &str, xlabel: &str, series: &[Series]) {
    let (w, h, pad) = (380.0, 260.0, 45.0);
    let pts: Vec<(f64, f64)> = series.iter().flat_map(|s| s.2.iter().copied()).collect();
    let (mut xmin, mut xmax) = (f64::MAX, f64::MIN);
    let (mut ymin, mut ymax) = (f64::MAX, f64::MIN);
    for &(x, y) in pts.iter().filter(|p| p.1.is_finite()) {
        xmin = xmin.min(x);
        xmax = xmax.max(x);
        ymin = ymin.min(y);
        ymax = ymax.max(y);
    }
    if xmin > xmax {
        (xmin, xmax, ymin, ymax) = (0.0, 1.0, 0.0, 1.0);
    }
    if xmax - xmin < 1e-9 {
        xmax = xmin + 1.0;
    }
    if ymax - ymin < 1e-9 {
        ymax = ymin + 1.0;
    }
    let sx = |x: f64| x0 + pad + (x - xmin) / (xmax - xmin) * (w - 2.0 * pad);
    let sy = |y: f64| 30.0 + (h - pad) - (y - ymin) / (ymax - ymin) * (h - 1.5 * pad);
    out.push_str(&format!(
        "<text x=\"{}\" y=\"20\" font-size=\"14\" text-anchor=\"middle\">{title}</text>\n",
        x0 + w / 2.0
    ));
    out.push_str(&format!(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
        x0 + pad,
        30.0 + pad / 2.0,
        w - 2.0 * pad,
        h - 1.5 * pad
    ));
    for i in 0..=4 {
        let y = ymin + (ymax - ymin) * i as f64 / 4.0;
        out.push_str(&format!(
            "<text x=\"{}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{y:.3}</text>\n",
            x0 + pad - 4.0,
            sy(y) + 3.0
        ));
    }
    out.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{xlabel} ({xmin:.0}–{xmax:.0})</text>\n",
        x0 + w / 2.0,
        h + 22.0
    ));
    for (k, (name, color, s)) in series.iter().enumerate() {
        let path: Vec<String> = s
            .iter()
            .filter(|p| p.1.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        out.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\n",
            path.join(" ")
        ));
        for p in &path {
            let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
            out.push_str(&format!(
                "<circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"{color}\"/>\n"
            ));
        }
        out.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"{color}\">{name}</text>\n",
            x0 + w - pad - 70.0,
            50.0 + 14.0 * k as f64
        ));
    }
}

/// The SVG document for `rows`.
pub fn curves_svg(rows: &[Row], labels: Labels) -> String {
    let mut s = String::from(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"780\" height=\"300\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
    );
    let pts = |f: fn(&Row) -> f64| rows.iter().map(|r| (r.epoch as f64, f(r))).collect();
    panel(
        &mut s,
        0.0,
        "loss",
        labels.x,
        &[
            ("train", "#1f77b4", pts(|r| r.train_loss)),
            (labels.eval, "#d62728", pts(|r| r.test_loss)),
        ],
    );
    panel(
        &mut s,
        390.0,
        "accuracy",
        labels.x,
        &[
            ("train", "#1f77b4", pts(|r| r.train_acc)),
            (labels.eval, "#d62728", pts(|r| r.test_acc)),
        ],
    );
    s.push_str("</svg>\n");
    s
}
