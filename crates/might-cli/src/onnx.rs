//! ONNX models from the command line (feature `onnx`): `might run MODEL.onnx` executes a
//! model on `.npy` inputs, `might inspect MODEL.onnx` describes it, `might onnx-test DIR…`
//! runs ONNX backend test cases (`model.onnx` + `test_data_set_N/{input,output}_K.pb`).

use std::path::{Path, PathBuf};

use crate::train::{CliError, Res};

/// `might run` options.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The `.onnx` file.
    pub model: PathBuf,
    /// An input as NAME=FILE.npy (repeat for each input; a one-input model also takes FILE.npy).
    #[arg(long = "input", short = 'i')]
    pub inputs: Vec<String>,
    /// Write each output to DIR/NAME.npy.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Where to run: cpu, gpu, gpu:N or best.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Time this many more runs after the first and report the median (bench/onnx/run.sh).
    #[arg(long, default_value_t = 0)]
    pub reps: usize,
    /// Kernel threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print the time spent in each operator type and the slowest nodes (mean of `--reps` more
    /// runs, at least one).
    #[arg(long)]
    pub profile: bool,
}

/// `might onnx-test` options.
#[derive(clap::Args, Debug)]
pub struct OnnxTestArgs {
    /// Test case folders, or folders holding them.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Only cases whose name contains this.
    #[arg(long)]
    pub filter: Option<String>,
    /// A file listing the cases expected not to pass (one name per line, `#` comments): any
    /// other case that fails is an error (exit 1), and listed cases that pass are reported so
    /// the list can shrink.
    #[arg(long)]
    pub expected_failures: Option<PathBuf>,
    /// Print only failures and the summary.
    #[arg(long)]
    pub quiet: bool,
    /// Where to run: cpu, gpu, gpu:N or best.
    #[arg(long, default_value = "cpu")]
    pub device: String,
}

#[cfg(feature = "onnx")]
mod imp {
    use super::*;
    use crate::meter::parse_device;
    use might::onnx::{elem_name, tensor_from_bytes, Model, Value};
    use might::{ErrorKind, Tensor};
    use std::collections::HashMap;
    use std::time::Instant;

    fn file_name(name: &str) -> String {
        let s: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if s.is_empty() || s.starts_with('.') {
            format!("output{s}")
        } else {
            s
        }
    }

    pub fn run(args: &RunArgs) -> Res<()> {
        let device = parse_device(&args.device)?;
        if let Some(t) = args.threads {
            if t == 0 {
                return Err(CliError("--threads must be at least 1".into()));
            }
            might::set_num_threads(t);
        }
        let t0 = Instant::now();
        let model = Model::load(&args.model)?.to_device(device)?;
        let load_ms = t0.elapsed().as_secs_f64() * 1e3;
        let declared = model.inputs();
        let mut inputs: Vec<(String, Tensor)> = Vec::new();
        for spec in &args.inputs {
            let (name, file) = match spec.split_once('=') {
                Some((n, f)) => (n.to_string(), f),
                None if declared.len() == 1 => (declared[0].name.clone(), spec.as_str()),
                None => {
                    return Err(CliError(format!(
                        "--input {spec}: say which input, NAME=FILE.npy (the model takes {})",
                        names(&declared)
                    )));
                }
            };
            inputs.push((name, might::io::npy::load(file)?));
        }
        let refs: Vec<(&str, Tensor)> = inputs
            .iter()
            .map(|(n, t)| (n.as_str(), t.clone()))
            .collect();
        let t1 = Instant::now();
        let outs = model.run(&refs)?;
        let run_ms = t1.elapsed().as_secs_f64() * 1e3;
        let mut times = Vec::with_capacity(args.reps);
        for _ in 0..args.reps {
            let t = Instant::now();
            model.run(&refs)?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        if args.profile {
            let vals: std::collections::HashMap<String, might::onnx::Value> = refs
                .iter()
                .map(|(n, t)| (n.to_string(), might::onnx::Value::new(t.clone())))
                .collect();
            let runs = args.reps.max(1);
            // per node, in run order: (op, node, total ms over the runs)
            let mut nodes: Vec<(String, String, f64)> = Vec::new();
            for _ in 0..runs {
                let (_, prof) = model.run_profiled(vals.clone())?;
                if nodes.is_empty() {
                    nodes = prof;
                } else {
                    for (n, p) in nodes.iter_mut().zip(prof) {
                        n.2 += p.2;
                    }
                }
            }
            for n in nodes.iter_mut() {
                n.2 /= runs as f64;
            }
            let total: f64 = nodes.iter().map(|x| x.2).sum();
            let mut by_op: Vec<(String, f64)> = Vec::new();
            for (op, _, ms) in &nodes {
                match by_op.iter_mut().find(|x| &x.0 == op) {
                    Some(x) => x.1 += ms,
                    None => by_op.push((op.clone(), *ms)),
                }
            }
            by_op.sort_by(|a, b| b.1.total_cmp(&a.1));
            eprintln!("time per operator type (mean of {runs} runs):");
            for (op, ms) in by_op {
                eprintln!(
                    "{op:<24} {ms:9.2} ms  {:5.1} %",
                    100.0 * ms / total.max(1e-9)
                );
            }
            nodes.sort_by(|a, b| b.2.total_cmp(&a.2));
            eprintln!("slowest nodes:");
            for (op, name, ms) in nodes.iter().take(40) {
                eprintln!("{op:<12} {name:<40} {ms:9.3} ms");
            }
        }
        if let Some(dir) = &args.output {
            std::fs::create_dir_all(dir)
                .map_err(|e| CliError(format!("{}: {e}", dir.display())))?;
        }
        for (name, t) in &outs {
            let v = t.to_f64_vec();
            let (mut lo, mut hi, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
            for &x in &v {
                lo = lo.min(x);
                hi = hi.max(x);
                sum += x;
            }
            let mean = if v.is_empty() {
                0.0
            } else {
                sum / v.len() as f64
            };
            let head: Vec<String> = v.iter().take(5).map(|x| format!("{x:.6}")).collect();
            println!(
                "{name}: {} {:?}  min {lo:.6}  max {hi:.6}  mean {mean:.6}  [{}{}]",
                t.dtype(),
                t.dims(),
                head.join(", "),
                if v.len() > 5 { ", …" } else { "" }
            );
            if let Some(dir) = &args.output {
                let path = dir.join(format!("{}.npy", file_name(name)));
                let t = if t.dtype() == might::DType::BF16 {
                    t.to_dtype(might::DType::F32)?
                } else {
                    t.clone()
                };
                might::io::npy::save(&path, &t)?;
            }
        }
        println!("{} nodes (after constant folding), loaded in {load_ms:.1} ms, ran in {run_ms:.1} ms on {}", model.node_count(), args.device);
        if !times.is_empty() {
            println!(
                "median of {} more runs: {:.2} ms (min {:.2} ms)",
                times.len(),
                times[times.len() / 2],
                times[0]
            );
        }
        Ok(())
    }

    fn names(io: &[might::onnx::IoInfo]) -> String {
        io.iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn io_line(i: &might::onnx::IoInfo) -> String {
        format!("{}: {} [{}]", i.name, i.elem, i.dims.join(", "))
    }

    pub fn inspect(path: &Path, json: bool) -> Res<()> {
        let model = Model::load(path)?;
        let (ins, outs, ops) = (model.inputs(), model.outputs(), model.ops_used());
        if json {
            use crate::train::json_str;
            let io = |v: &[might::onnx::IoInfo]| -> String {
                let items: Vec<String> = v
                    .iter()
                    .map(|i| {
                        format!(
                            "{{\"name\":{},\"type\":{},\"shape\":[{}]}}",
                            json_str(&i.name),
                            json_str(&i.elem),
                            i.dims
                                .iter()
                                .map(|d| json_str(d))
                                .collect::<Vec<_>>()
                                .join(",")
                        )
                    })
                    .collect();
                format!("[{}]", items.join(","))
            };
            let ops_json: Vec<String> = ops
                .iter()
                .map(|(k, v)| format!("{}:{v}", json_str(k)))
                .collect();
            println!(
                "{{\"file\":{},\"opset\":{},\"ir_version\":{},\"producer\":{},\"inputs\":{},\"outputs\":{},\"ops\":{{{}}},\"parameters\":{}}}",
                json_str(&path.display().to_string()),
                model.opset(),
                model.ir_version,
                json_str(&model.producer),
                io(&ins),
                io(&outs),
                ops_json.join(","),
                model.parameter_count()
            );
            return Ok(());
        }
        println!(
            "{}: ONNX model, opset {}, IR version {}, from {}",
            path.display(),
            model.opset(),
            model.ir_version,
            if model.producer.is_empty() {
                "?"
            } else {
                &model.producer
            }
        );
        println!("inputs:");
        for i in &ins {
            println!("  {}", io_line(i));
        }
        println!("outputs:");
        for o in &outs {
            println!("  {}", io_line(o));
        }
        let total: usize = ops.values().sum();
        println!("ops ({total} nodes, {} kinds):", ops.len());
        for (k, v) in &ops {
            println!("  {k:<28} {v}");
        }
        println!("parameters: {}", model.parameter_count());
        Ok(())
    }

    /// What one case came to.
    enum Outcome {
        Pass,
        Fail(String),
        Unsupported(String),
    }

    fn read_value(path: &Path) -> Result<Value, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        tensor_from_bytes(&bytes).map_err(|e| format!("{}: {}", path.display(), e.msg))
    }

    fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
        let mut v: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let k = name
                    .strip_prefix(prefix)?
                    .trim_end_matches(".pb")
                    .parse()
                    .ok()?;
                Some((k, e.path()))
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, p)| p).collect()
    }

    fn compare(name: &str, got: &Value, want: &Value, rtol: f64, atol: f64) -> Result<(), String> {
        if got.elem != want.elem {
            return Err(format!(
                "{name}: type {} (expected {})",
                elem_name(got.elem),
                elem_name(want.elem)
            ));
        }
        if got.dims() != want.dims() {
            return Err(format!(
                "{name}: shape {:?} (expected {:?})",
                got.dims(),
                want.dims()
            ));
        }
        let g = got.narrowed().map_err(|e| e.to_string())?.to_f64_vec();
        let w = want.tensor.to_f64_vec();
        let float = want.tensor.dtype().is_float();
        for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
            let ok = if float {
                (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs()
            } else {
                a == b
            };
            if !ok {
                return Err(format!("{name}[{i}] = {a} (expected {b})"));
            }
        }
        Ok(())
    }

    fn run_case(dir: &Path, device: might::Device) -> Outcome {
        let (rtol, atol) = std::fs::read_to_string(dir.join("meta.txt"))
            .ok()
            .and_then(|s| {
                let v: Vec<f64> = s
                    .split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect();
                (v.len() == 2).then(|| (v[0], v[1]))
            })
            .unwrap_or((1e-3, 1e-7));
        let model = match Model::load(dir.join("model.onnx")).and_then(|m| m.to_device(device)) {
            Ok(m) => m,
            Err(e) if e.kind == ErrorKind::Unsupported => return Outcome::Unsupported(e.msg),
            Err(e) => return Outcome::Fail(format!("load: {}", e.msg)),
        };
        let sets = numbered(dir, "test_data_set_");
        if sets.is_empty() {
            return Outcome::Fail("no test_data_set_N folders".into());
        }
        let declared = model.inputs();
        let outs_declared = model.outputs();
        for set in sets {
            let mut inputs = HashMap::new();
            let files = numbered(&set, "input_");
            for (k, f) in files.iter().enumerate() {
                let Some(info) = declared.get(k) else { break };
                match read_value(f) {
                    Ok(v) => {
                        inputs.insert(info.name.clone(), v);
                    }
                    Err(e) => return Outcome::Unsupported(e),
                }
            }
            let got = match model.run_values(inputs) {
                Ok(g) => g,
                Err(e) if e.kind == ErrorKind::Unsupported => return Outcome::Unsupported(e.msg),
                Err(e) => return Outcome::Fail(e.msg),
            };
            for (k, f) in numbered(&set, "output_").iter().enumerate() {
                let want = match read_value(f) {
                    Ok(v) => v,
                    Err(e) => return Outcome::Unsupported(e),
                };
                let name = outs_declared.get(k).map(|o| o.name.as_str()).unwrap_or("?");
                let Some((_, g)) = got.get(k) else {
                    return Outcome::Fail(format!("output {k} missing"));
                };
                if let Err(e) = compare(name, g, &want, rtol, atol) {
                    return Outcome::Fail(e);
                }
            }
        }
        Outcome::Pass
    }

    /// Whether a case is in the scored set: default domain, tensor types only (no
    /// `ai.onnx.ml`, training ops, strings, sequences, maps or optionals).
    fn scored(dir: &Path) -> bool {
        let Ok(bytes) = std::fs::read(dir.join("model.onnx")) else {
            return false;
        };
        use prost::Message;
        let Ok(m) = might::onnx::proto::ModelProto::decode(bytes.as_slice()) else {
            return false;
        };
        let Some(g) = m.graph else { return false };
        if g.node.iter().any(|n| {
            matches!(
                n.domain.as_deref(),
                Some("ai.onnx.ml") | Some("ai.onnx.preview.training")
            )
        }) {
            return false;
        }
        g.input.iter().chain(&g.output).all(|v| {
            match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(might::onnx::proto::type_proto::Value::TensorType(t)) => {
                    t.elem_type != Some(might::onnx::elem::STRING)
                }
                _ => false,
            }
        })
    }

    fn collect(dirs: &[PathBuf]) -> Vec<PathBuf> {
        let mut cases = Vec::new();
        for d in dirs {
            if d.join("model.onnx").is_file() {
                cases.push(d.clone());
            } else if let Ok(rd) = std::fs::read_dir(d) {
                let mut v: Vec<PathBuf> = rd
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.join("model.onnx").is_file())
                    .collect();
                v.sort();
                cases.extend(v);
            }
        }
        cases
    }

    pub fn onnx_test(args: &OnnxTestArgs) -> Res<()> {
        let device = parse_device(&args.device)?;
        let expected: Option<Vec<String>> = match &args.expected_failures {
            Some(p) => Some(
                std::fs::read_to_string(p)
                    .map_err(|e| CliError(format!("{}: {e}", p.display())))?
                    .lines()
                    .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect(),
            ),
            None => None,
        };
        let cases: Vec<PathBuf> = collect(&args.dirs)
            .into_iter()
            .filter(|c| {
                args.filter.as_ref().is_none_or(|f| {
                    c.file_name()
                        .is_some_and(|n| n.to_string_lossy().contains(f.as_str()))
                })
            })
            .collect();
        if cases.is_empty() {
            return Err(CliError(
                "no test cases (folders with a model.onnx) found".into(),
            ));
        }
        let (mut all, mut sc) = ([0usize; 3], [0usize; 3]);
        let mut new_failures = Vec::new();
        let mut now_passing = Vec::new();
        let prev_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        for case in &cases {
            let name = case
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let outcome = std::panic::catch_unwind(|| run_case(case, device)).unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Outcome::Fail(format!("panic: {msg}"))
            });
            let k = match &outcome {
                Outcome::Pass => 0,
                Outcome::Fail(_) => 1,
                Outcome::Unsupported(_) => 2,
            };
            all[k] += 1;
            if scored(case) {
                sc[k] += 1;
            }
            let listed = expected.as_ref().is_some_and(|l| l.contains(&name));
            match &outcome {
                Outcome::Pass => {
                    if listed {
                        now_passing.push(name.clone());
                    }
                    if !args.quiet {
                        println!("PASS        {name}");
                    }
                }
                Outcome::Fail(why) | Outcome::Unsupported(why) => {
                    if expected.is_some() && !listed {
                        new_failures.push(name.clone());
                    }
                    if !args.quiet || (expected.is_some() && !listed) || expected.is_none() {
                        let tag = if k == 1 { "FAIL" } else { "UNSUPPORTED" };
                        let why: String = why.chars().take(300).collect();
                        println!("{tag:<11} {name}: {why}");
                    }
                }
            }
        }
        std::panic::set_hook(prev_hook);
        let n: usize = all.iter().sum();
        println!(
            "onnx node tests: {} passed, {} failed, {} unsupported of {n}",
            all[0], all[1], all[2]
        );
        let ns: usize = sc.iter().sum();
        if ns > 0 {
            println!(
                "scored set (default domain, tensor types): {} passed, {} failed, {} unsupported of {ns} ({:.1} % pass)",
                sc[0],
                sc[1],
                sc[2],
                100.0 * sc[0] as f64 / ns as f64
            );
        }
        if !now_passing.is_empty() {
            println!(
                "now passing, drop from the expected failures: {}",
                now_passing.join(" ")
            );
        }
        if expected.is_none() && all[0] < n {
            return Err(CliError(format!(
                "{} of {n} case(s) did not pass",
                n - all[0]
            )));
        }
        if !new_failures.is_empty() {
            return Err(CliError(format!(
                "{} case(s) not in the expected failures did not pass: {}",
                new_failures.len(),
                new_failures.join(" ")
            )));
        }
        Ok(())
    }
}

#[cfg(feature = "onnx")]
pub use imp::{inspect, onnx_test, run};

#[cfg(not(feature = "onnx"))]
fn needs_feature() -> Res<()> {
    Err(CliError(
        "this might was built without ONNX support (cargo build --features onnx)".into(),
    ))
}

#[cfg(not(feature = "onnx"))]
pub fn run(_: &RunArgs) -> Res<()> {
    needs_feature()
}

#[cfg(not(feature = "onnx"))]
pub fn inspect(_: &Path, _: bool) -> Res<()> {
    needs_feature()
}

#[cfg(not(feature = "onnx"))]
pub fn onnx_test(_: &OnnxTestArgs) -> Res<()> {
    needs_feature()
}
