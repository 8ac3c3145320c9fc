//! Training checkpoints: model state, optimizer state, epoch, RNG state and a few text fields
//! (dataset, model kind, ...), in one file written atomically (tmp file + fsync + rename).
//!
//! Format (`MIGHTCK1`): magic, u64 LE header length, a UTF-8 header of lines, then the raw
//! little-endian tensor bytes. Header lines: `meta KEY VALUE`, `scalar NAME VALUE`,
//! `tensor SECTION NAME DTYPE DIMS OFFSET NBYTES` (DIMS comma-separated, `-` for a scalar).
//! Loading checks every offset and size against the file before reading.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use might::{DType, Error, Result, Tensor};

const MAGIC: &[u8; 8] = b"MIGHTCK1";

#[derive(Default)]
pub struct Checkpoint {
    pub model: Vec<(String, Tensor)>,
    pub optim_tensors: Vec<(String, Tensor)>,
    pub optim_scalars: Vec<(String, f64)>,
    pub epoch: u64,
    pub rng: [u64; 4],
    pub meta: BTreeMap<String, String>,
}

fn tensor_bytes(t: &Tensor) -> Result<(&'static str, Vec<u8>)> {
    Ok(match t.dtype() {
        DType::I64 => (
            "i64",
            t.to_vec::<i64>()?.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        _ => (
            "f32",
            t.to_dtype(DType::F32)?
                .to_vec::<f32>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
    })
}

fn clean(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

pub fn save(path: &Path, ck: &Checkpoint) -> Result<()> {
    let mut header = String::new();
    let mut data = Vec::new();
    for (k, v) in &ck.meta {
        header += &format!("meta {} {}\n", clean(k).replace(' ', "_"), clean(v));
    }
    header += &format!("meta epoch {}\n", ck.epoch);
    header += &format!(
        "meta rng {} {} {} {}\n",
        ck.rng[0], ck.rng[1], ck.rng[2], ck.rng[3]
    );
    for (n, v) in &ck.optim_scalars {
        header += &format!("scalar {n} {v:e}\n");
    }
    for (section, list) in [("model", &ck.model), ("optim", &ck.optim_tensors)] {
        for (name, t) in list.iter() {
            let (dt, bytes) = tensor_bytes(t)?;
            let dims = if t.rank() == 0 {
                "-".to_string()
            } else {
                t.dims().iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")
            };
            header += &format!(
                "tensor {section} {name} {dt} {dims} {} {}\n",
                data.len(),
                bytes.len()
            );
            data.extend_from_slice(&bytes);
        }
    }
    let tmp = path.with_extension("tmp");
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(MAGIC)?;
        f.write_all(&(header.len() as u64).to_le_bytes())?;
        f.write_all(header.as_bytes())?;
        f.write_all(&data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| Error::io("save_checkpoint", format!("{}: {e}", path.display())))
}

pub fn load(path: &Path) -> Result<Checkpoint> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::io("load_checkpoint", format!("{}: {e}", path.display())))?;
    let bad = |m: &str| Error::format("load_checkpoint", format!("{}: {m}", path.display()));
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(bad("not a might checkpoint (bad magic)"));
    }
    let hlen = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")) as usize;
    let body = &bytes[16..];
    if hlen > body.len() {
        return Err(bad("truncated header"));
    }
    let header = std::str::from_utf8(&body[..hlen]).map_err(|_| bad("header is not UTF-8"))?;
    let data = &body[hlen..];
    let mut ck = Checkpoint::default();
    for line in header.lines() {
        let f: Vec<&str> = line.splitn(3, ' ').collect();
        match f.as_slice() {
            ["meta", "epoch", v] => ck.epoch = v.parse().map_err(|_| bad("bad epoch"))?,
            ["meta", "rng", v] => {
                let r: Vec<u64> = v
                    .split(' ')
                    .map(|x| x.parse().map_err(|_| bad("bad rng state")))
                    .collect::<Result<_>>()?;
                ck.rng = r.try_into().map_err(|_| bad("bad rng state"))?;
            }
            ["meta", k, v] => {
                ck.meta.insert(k.to_string(), v.to_string());
            }
            ["scalar", n, v] => ck
                .optim_scalars
                .push((n.to_string(), v.parse().map_err(|_| bad("bad scalar"))?)),
            ["tensor", rest @ ..] => {
                let rest = rest.join(" ");
                let p: Vec<&str> = rest.split(' ').collect();
                let [section, name, dt, dims, off, nb]: [&str; 6] =
                    p.try_into().map_err(|_| bad("bad tensor line"))?;
                let dims: Vec<usize> = if dims == "-" {
                    vec![]
                } else {
                    dims.split(',')
                        .map(|d| d.parse().map_err(|_| bad("bad dims")))
                        .collect::<Result<_>>()?
                };
                let off: usize = off.parse().map_err(|_| bad("bad offset"))?;
                let nb: usize = nb.parse().map_err(|_| bad("bad size"))?;
                let numel = dims
                    .iter()
                    .try_fold(1usize, |a, &d| a.checked_mul(d))
                    .ok_or_else(|| bad("dims overflow"))?;
                let end = off.checked_add(nb).ok_or_else(|| bad("bad offset"))?;
                if end > data.len() || numel.checked_mul(if dt == "i64" { 8 } else { 4 }) != Some(nb)
                {
                    return Err(bad(&format!("tensor {name} does not fit the file")));
                }
                let raw = &data[off..end];
                let t = match dt {
                    "f32" => Tensor::from_vec(
                        raw.chunks_exact(4)
                            .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
                            .collect::<Vec<_>>(),
                        dims,
                    )?,
                    "i64" => Tensor::from_vec(
                        raw.chunks_exact(8)
                            .map(|c| i64::from_le_bytes(c.try_into().expect("8")))
                            .collect::<Vec<_>>(),
                        dims,
                    )?,
                    _ => return Err(bad(&format!("unknown dtype {dt}"))),
                };
                match section {
                    "model" => ck.model.push((name.to_string(), t)),
                    "optim" => ck.optim_tensors.push((name.to_string(), t)),
                    _ => return Err(bad(&format!("unknown section {section}"))),
                }
            }
            _ => return Err(bad(&format!("unknown header line {line:?}"))),
        }
    }
    Ok(ck)
}

/// Copy checkpoint tensors into the model's tensors (names and shapes must match exactly).
pub fn load_into(state: &[(String, Tensor)], saved: &[(String, Tensor)]) -> Result<()> {
    let _g = might::no_grad();
    for (name, t) in state {
        let s = saved
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .ok_or_else(|| Error::format("load_checkpoint", format!("checkpoint has no {name}")))?;
        if s.dims() != t.dims() {
            return Err(Error::shape(
                "load_checkpoint",
                format!("{name}: checkpoint has {} but the model has {}", s.shape(), t.shape()),
            ));
        }
        t.copy_(s)?;
    }
    if saved.len() != state.len() {
        return Err(Error::format(
            "load_checkpoint",
            format!(
                "checkpoint has {} tensors but the model has {} (different model?)",
                saved.len(),
                state.len()
            ),
        ));
    }
    Ok(())
}
