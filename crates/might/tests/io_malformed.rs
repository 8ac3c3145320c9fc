//! Hostile input for every loader: truncations, bad magic, huge lengths, overflowing shapes,
//! out-of-range offsets, pickle bombs and disallowed globals. Every case must come back as a
//! `Format`/`Io` error (never a panic, never a huge allocation).

use might::io::{npy, npz, pt, safetensors, write_zip_stored};
use might::{ErrorKind, Result, Tensor};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/io")
        .join(name)
}

fn fails<T>(r: Result<T>, what: &str) -> String {
    match r {
        Ok(_) => panic!("{what}: loaded without error"),
        Err(e) => {
            assert!(
                matches!(e.kind, ErrorKind::Format | ErrorKind::Io),
                "{what}: kind {:?}: {e}",
                e.kind
            );
            e.to_string()
        }
    }
}

fn st_file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend(header.as_bytes());
    v.extend(data);
    v
}

#[test]
fn safetensors_corpus() {
    let good = std::fs::read(fixture("all.safetensors")).unwrap();
    assert!(safetensors::load_from_bytes(&good).is_ok());
    for n in 0..good.len() {
        fails(
            safetensors::load_from_bytes(&good[..n]),
            &format!("truncated at {n}"),
        );
    }
    let mut huge = good.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    let m = fails(safetensors::load_from_bytes(&huge), "huge header length");
    assert!(m.contains("header length"), "{m}");
    fails(
        safetensors::load_from_bytes(b"GGUF\x03\0\0\0\0\0\0\0"),
        "bad magic",
    );
    let f32x4 = [0u8; 16];
    let cases: &[(&str, &str)] = &[
        (
            r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}}"#,
            "overflow",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,16]}}"#,
            "bytes overflow",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,17]}}"#,
            "out of range",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[8,4]}}"#,
            "begin > end",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}}"#,
            "shape needs more",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,18446744073709551616]}}"#,
            "u64 overflow",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}}"#,
            "negative dim",
        ),
        (r#"{"a":{"dtype":"F32","shape":[4]}}"#, "missing offsets"),
        (
            r#"{"a":{"dtype":"I32","shape":[4],"data_offsets":[0,16]}}"#,
            "I32",
        ),
        (
            r#"{"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,16]}}"#,
            "unknown dtype",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#,
            "dup",
        ),
        (r#"{"__metadata__":{"k":1}}"#, "metadata not string"),
        // caught by the reference crate's checks: a gap before the data, overlapping tensors,
        // and bytes no tensor covers
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#,
            "gap",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
            "overlap",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
            "uncovered tail",
        ),
        (r#"[1,2]"#, "not object"),
        (r#"{"a":"#, "bad json"),
    ];
    for (h, what) in cases {
        let m = fails(safetensors::load_from_bytes(&st_file(h, &f32x4)), what);
        assert!(m.starts_with("safetensors"), "{m}");
    }
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
    fails(
        safetensors::load_from_bytes(&st_file(&deep, &[])),
        "deep json",
    );
    let m = fails(
        safetensors::load(fixture("does-not-exist.safetensors")),
        "missing file",
    );
    assert!(m.contains("does-not-exist"), "{m}");
}

#[test]
fn npy_corpus() {
    let good = std::fs::read(fixture("f8_fortran.npy")).unwrap();
    assert!(npy::load_from_bytes(&good).is_ok());
    for n in 0..good.len() {
        fails(
            npy::load_from_bytes(&good[..n]),
            &format!("truncated at {n}"),
        );
    }
    let header = |h: &str| {
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend((h.len() as u16).to_le_bytes());
        v.extend(h.as_bytes());
        v.extend([0u8; 16]);
        v
    };
    fails(
        npy::load_from_bytes(b"\x93NUMPZ\x01\x00\x10\x00"),
        "bad magic",
    );
    let mut v = b"\x93NUMPY\x02\x00".to_vec();
    v.extend(u32::MAX.to_le_bytes());
    fails(npy::load_from_bytes(&v), "huge header length");
    let mut v = b"\x93NUMPY\x09\x00".to_vec();
    v.extend([0u8; 20]);
    fails(npy::load_from_bytes(&v), "version 9");
    for h in [
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f4', 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,",
        "not a dict",
    ] {
        let m = fails(npy::load_from_bytes(&header(h)), h);
        assert!(m.starts_with("npy"), "{m}");
    }
}

#[test]
fn npz_corpus() {
    for f in ["arrays.npz", "arrays_compressed.npz"] {
        let good = std::fs::read(fixture(f)).unwrap();
        assert!(npz::load_from_bytes(&good).is_ok());
        for n in (0..good.len()).step_by(3) {
            fails(
                npz::load_from_bytes(&good[..n]),
                &format!("{f} truncated at {n}"),
            );
        }
        // Flip each data/header byte in turn: every result is a clean Ok or Err, no panic.
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x5A;
            let _ = npz::load_from_bytes(&bad);
        }
    }
    // A corrupted payload is caught by the CRC.
    let t = Tensor::new(&[1f32, 2., 3.]);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.npz");
    npz::save(&p, &[("x".into(), t)]).unwrap();
    let mut bytes = std::fs::read(&p).unwrap();
    let pos = bytes
        .windows(4)
        .position(|w| w == 2f32.to_le_bytes())
        .unwrap();
    bytes[pos] ^= 1;
    let m = fails(npz::load_from_bytes(&bytes), "crc");
    assert!(m.contains("CRC"), "{m}");
    // An end record claiming 65535 entries in a tiny directory.
    let mut eocd = b"PK\x05\x06\0\0\0\0\xfe\xff\xfe\xff".to_vec();
    eocd.extend(46u32.to_le_bytes());
    eocd.extend(0u32.to_le_bytes());
    eocd.extend(0u16.to_le_bytes());
    fails(npz::load_from_bytes(&eocd), "huge entry count");
    // A central directory past the end of the file.
    let mut eocd = b"PK\x05\x06\0\0\0\0\x01\x00\x01\x00".to_vec();
    eocd.extend(46u32.to_le_bytes());
    eocd.extend(1_000_000u32.to_le_bytes());
    eocd.extend(0u16.to_le_bytes());
    fails(npz::load_from_bytes(&eocd), "directory out of range");
    // A member that is not an npy.
    let z = write_zip_stored(&[("a.npy".into(), b"hello".to_vec())]).unwrap();
    let m = fails(npz::load_from_bytes(&z), "member not npy");
    assert!(m.contains("'a.npy'"), "{m}");
}

// ------------------------------------------------------------------------ pickle / .pt

/// A minimal protocol-2 pickle writer for hand-made `torch.save` payloads.
#[derive(Default)]
struct Pk(Vec<u8>);

impl Pk {
    fn new() -> Pk {
        Pk(vec![0x80, 2])
    }
    fn op(mut self, b: &[u8]) -> Pk {
        self.0.extend(b);
        self
    }
    fn str(mut self, s: &str) -> Pk {
        self.0.push(b'X');
        self.0.extend((s.len() as u32).to_le_bytes());
        self.0.extend(s.as_bytes());
        self
    }
    fn int(mut self, v: i64) -> Pk {
        self.0.push(0x8a);
        self.0.push(8);
        self.0.extend(v.to_le_bytes());
        self
    }
    fn global(self, m: &str, n: &str) -> Pk {
        self.op(format!("c{m}\n{n}\n").as_bytes())
    }
    fn ints(mut self, v: &[i64]) -> Pk {
        self = self.op(b"(");
        for &x in v {
            self = self.int(x);
        }
        self.op(b"t")
    }
    /// `_rebuild_tensor_v2(('storage', FloatStorage, key, 'cpu', numel), offset, size, stride, False, OrderedDict())`
    fn tensor(self, key: &str, numel: i64, offset: i64, size: &[i64], stride: &[i64]) -> Pk {
        self.global("torch._utils", "_rebuild_tensor_v2")
            .op(b"((")
            .str("storage")
            .global("torch", "FloatStorage")
            .str(key)
            .str("cpu")
            .int(numel)
            .op(b"tQ")
            .int(offset)
            .ints(size)
            .ints(stride)
            .op(b"\x89")
            .global("collections", "OrderedDict")
            .op(b")Rt")
            .op(b"R")
    }
}

fn pt_archive(pkl: &[u8], storages: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut entries = vec![("archive/data.pkl".to_string(), pkl.to_vec())];
    entries.push(("archive/byteorder".into(), b"little".to_vec()));
    for (k, v) in storages {
        entries.push((format!("archive/data/{k}"), v.clone()));
    }
    write_zip_stored(&entries).unwrap()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn dict_of(t: Pk) -> Vec<u8> {
    // {"w": <t>}
    let mut p = Pk::new().op(b"}").str("w");
    p.0.extend(&t.0[2..]);
    p.op(b"s.").0
}

#[test]
fn pt_hand_made_pickle_loads() {
    let data = f32_bytes(&[0., 1., 2., 3., 4., 5.]);
    // A transposed 2x3 → 3x2 view with an offset: elements 1.. of a 7-element storage.
    let mut st = vec![9f32];
    st.extend([0., 1., 2., 3., 4., 5.]);
    let pkl = dict_of(Pk::new().tensor("0", 7, 1, &[3, 2], &[1, 3]));
    let got = pt::load_from_bytes(&pt_archive(&pkl, &[("0", f32_bytes(&st))])).unwrap();
    assert_eq!(got[0].0, "w");
    assert_eq!(
        got[0].1.to_vec2::<f32>().unwrap(),
        vec![vec![0., 3.], vec![1., 4.], vec![2., 5.]]
    );
    // Memo + BINGET of a shared storage, stride-0 broadcast dims are fine too.
    let pkl = dict_of(Pk::new().tensor("0", 6, 0, &[2, 3], &[0, 1]));
    let got = pt::load_from_bytes(&pt_archive(&pkl, &[("0", data)])).unwrap();
    assert_eq!(
        got[0].1.to_vec::<f32>().unwrap(),
        vec![0., 1., 2., 0., 1., 2.]
    );
}

#[test]
fn pt_corpus() {
    let good = std::fs::read(fixture("state_dict.pt")).unwrap();
    assert!(pt::load_from_bytes(&good).is_ok());
    for n in (0..good.len()).step_by(7) {
        fails(
            pt::load_from_bytes(&good[..n]),
            &format!("truncated at {n}"),
        );
    }
    for i in (0..good.len()).step_by(3) {
        let mut bad = good.clone();
        bad[i] ^= 0xA5;
        let _ = pt::load_from_bytes(&bad); // Ok or Err, never a panic
    }
    let six = || vec![("0", f32_bytes(&[0.; 6]))];
    let check = |pkl: Vec<u8>, storages: Vec<(&str, Vec<u8>)>, what: &str, needle: &str| {
        let m = fails(pt::load_from_bytes(&pt_archive(&pkl, &storages)), what);
        assert!(m.contains(needle), "{what}: {m}");
        assert!(m.starts_with("pt"), "{m}");
    };
    check(
        Pk::new()
            .global("os", "system")
            .str("echo hi")
            .op(b"\x85R.")
            .0,
        vec![],
        "os.system",
        "'os.system' is not allowed",
    );
    check(
        Pk::new().global("builtins", "eval").0,
        vec![],
        "eval",
        "'builtins.eval'",
    );
    check(
        Pk::new().global("torch.storage", "_load_from_bytes").0,
        vec![],
        "load_from_bytes",
        "'torch.storage._load_from_bytes'",
    );
    check(
        Pk::new().str("subprocess").str("Popen").op(b"\x93.").0,
        vec![],
        "STACK_GLOBAL",
        "'subprocess.Popen'",
    );
    check(
        Pk::new().global("torch", "IntStorage").0,
        vec![],
        "IntStorage",
        "torch.IntStorage",
    );
    check(
        Pk::new().op(b"\xff").0,
        vec![],
        "unknown opcode",
        "opcode 0xff",
    );
    check(
        Pk::new().op(b"I1\n.").0,
        vec![],
        "text INT opcode",
        "opcode 0x49",
    );
    check(Pk::new().op(b"}").0, vec![], "no STOP", "no STOP");
    check(
        Pk::new().op(b"X\xff\xff\xff\x7f").0,
        vec![],
        "huge string",
        "truncated",
    );
    check(
        Pk::new().op(b"\x8d\xff\xff\xff\xff\xff\xff\xff\xff").0,
        vec![],
        "huge string8",
        "",
    );
    check(
        Pk::new().op(b"h\x05.").0,
        vec![],
        "undefined memo",
        "memo key 5",
    );
    check(Pk::new().op(b"s.").0, vec![], "underflow", "underflow");
    check(
        Pk::new().op(b"\x8a\x10").op(&[0x11; 16]).op(b".").0,
        vec![],
        "int > 64 bits",
        "64 bits",
    );
    // Deep nesting: a million nested lists, built and dropped without recursion.
    let n = 1_000_000;
    let mut deep = Pk::new();
    deep.0.extend(std::iter::repeat_n(b']', n));
    deep.0.extend(std::iter::repeat_n(b'a', n - 1));
    deep.0.push(b'.');
    check(deep.0, vec![], "deep nesting", "nested deeper");
    // A dict that contains itself.
    check(
        Pk::new().op(b"}q\x00X\x01\x00\x00\x00ah\x00s.").0,
        vec![],
        "cycle",
        "nested deeper",
    );
    // Billion laughs: each list holds the previous one twice.
    let mut bomb = Pk::new().op(b"]");
    for _ in 0..40 {
        bomb = bomb.op(b"q\x00(h\x00h\x00l");
    }
    check(
        bomb.op(b".").0,
        vec![],
        "shared-reference bomb",
        "more than",
    );
    // Too many items on the stack.
    let mut wide = Pk::new();
    wide.0.extend(std::iter::repeat_n(b'N', (1 << 20) + 1));
    check(wide.0, vec![], "stack cap", "stack deeper");
    // Tensors pointing outside their storage.
    check(
        dict_of(Pk::new().tensor("0", 6, 0, &[2, 4], &[4, 1])),
        six(),
        "extent",
        "reach past its storage",
    );
    check(
        dict_of(Pk::new().tensor("0", 6, 6, &[1], &[1])),
        six(),
        "offset",
        "reach past",
    );
    check(
        dict_of(Pk::new().tensor("0", 6, i64::MAX, &[2], &[1])),
        six(),
        "offset overflow",
        "reach past",
    );
    check(
        dict_of(Pk::new().tensor("0", 6, 0, &[2, 2], &[i64::MAX, 1])),
        six(),
        "stride overflow",
        "reach past",
    );
    check(
        dict_of(Pk::new().tensor("0", 6, 0, &[1 << 40, 1 << 40], &[0, 0])),
        six(),
        "size overflow",
        "overflow",
    );
    check(
        dict_of(Pk::new().tensor("0", 6, 0, &[-1], &[1])),
        six(),
        "negative size",
        "negative",
    );
    check(
        dict_of(Pk::new().tensor("0", 6, 0, &[2], &[1, 1])),
        six(),
        "rank mismatch",
        "different lengths",
    );
    // Storage size disagreements.
    check(
        dict_of(Pk::new().tensor("0", 7, 0, &[6], &[1])),
        six(),
        "numel mismatch",
        "should hold 7",
    );
    check(
        dict_of(Pk::new().tensor("0", 1 << 62, 0, &[6], &[1])),
        six(),
        "numel huge",
        "",
    );
    check(
        dict_of(Pk::new().tensor("1", 6, 0, &[6], &[1])),
        six(),
        "missing storage",
        "archive/data/1",
    );
    check(
        dict_of(Pk::new().tensor("../0", 6, 0, &[6], &[1])),
        six(),
        "path traversal",
        "not a plain name",
    );
    // Not a zip / no data.pkl.
    fails(pt::load_from_bytes(b"\x80\x02}."), "legacy format");
    fails(
        pt::load_from_bytes(&write_zip_stored(&[("a/b".into(), vec![])]).unwrap()),
        "no data.pkl",
    );
    let m = fails(pt::load(fixture("evil.pt")), "evil fixture");
    assert!(m.contains("evil.pt"), "{m}");
}
