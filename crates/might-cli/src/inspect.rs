//! `might inspect FILE`: list the tensors of a safetensors, `.npy`, `.npz` or PyTorch
//! `.pt`/`.pth` file without loading their data (headers only where the format allows), so a
//! downloaded model can be checked before it is trusted or loaded.

use std::path::Path;

use crate::train::json_str;
use might::io::TensorInfo;
use might::Result;

/// Print one row per tensor (name, dtype, shape, elements, bytes) and the totals.
pub fn inspect(path: &Path, json: bool) -> Result<()> {
    let shown = path.display().to_string();
    let infos = might::io::inspect(path).map_err(|mut e| {
        // Loader messages describe the bytes; say which file they came from.
        if !e.msg.contains(&shown) {
            e.msg = format!("{shown}: {}", e.msg);
        }
        e
    })?;
    if json {
        println!("{}", to_json(path, &infos));
    } else {
        print!("{}", table(path, &infos));
    }
    Ok(())
}

fn numel(i: &TensorInfo) -> usize {
    i.shape.iter().product()
}

fn shape_str(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(", "))
}

/// `1234567` → `1.23 MB`: sizes people read at a glance (the exact byte count is in the
/// column next to it).
fn human_bytes(b: usize) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// The human-readable listing: aligned columns, then one totals line.
pub fn table(path: &Path, infos: &[TensorInfo]) -> String {
    let header = ["name", "dtype", "shape", "numel", "bytes"];
    let rows: Vec<[String; 5]> = infos
        .iter()
        .map(|i| {
            [
                i.name.clone(),
                i.dtype.to_string(),
                shape_str(&i.shape),
                numel(i).to_string(),
                i.bytes.to_string(),
            ]
        })
        .collect();
    let mut width = header.map(str::len);
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = format!("{}\n", path.display());
    let line = |cells: [&str; 5]| {
        format!(
            "  {:<w0$}  {:<w1$}  {:<w2$}  {:>w3$}  {:>w4$}\n",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            cells[4],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2],
            w3 = width[3],
            w4 = width[4]
        )
    };
    out.push_str(&line(header));
    for r in &rows {
        out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4]]));
    }
    let params: usize = infos.iter().map(numel).sum();
    let bytes: usize = infos.iter().map(|i| i.bytes).sum();
    out.push_str(&format!(
        "total: {} tensors, {params} parameters, {bytes} bytes ({})\n",
        infos.len(),
        human_bytes(bytes)
    ));
    out
}

/// One JSON object: `{"file":..,"tensors":[{name,dtype,shape,numel,bytes}],"parameters":..,"bytes":..}`.
pub fn to_json(path: &Path, infos: &[TensorInfo]) -> String {
    let tensors: Vec<String> = infos
        .iter()
        .map(|i| {
            format!(
                "{{\"name\":{},\"dtype\":\"{}\",\"shape\":{},\"numel\":{},\"bytes\":{}}}",
                json_str(&i.name),
                i.dtype,
                shape_str(&i.shape).replace(' ', ""),
                numel(i),
                i.bytes
            )
        })
        .collect();
    let params: usize = infos.iter().map(numel).sum();
    let bytes: usize = infos.iter().map(|i| i.bytes).sum();
    format!(
        "{{\"file\":{},\"tensors\":[{}],\"parameters\":{params},\"bytes\":{bytes}}}",
        json_str(&path.display().to_string()),
        tensors.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use might::DType;

    fn info(name: &str, dtype: DType, shape: &[usize]) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
            bytes: shape.iter().product::<usize>() * dtype.size_in_bytes(),
        }
    }

    #[test]
    fn table_lists_rows_and_totals() {
        let infos = [info("w", DType::F32, &[3, 4]), info("b", DType::F16, &[3])];
        let t = table(Path::new("m.safetensors"), &infos);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        assert!(lines[2].contains("w") && lines[2].contains("[3, 4]") && lines[2].ends_with("48"));
        assert!(lines[3].contains("float16") && lines[3].ends_with(" 6"));
        assert_eq!(lines[4], "total: 2 tensors, 15 parameters, 54 bytes (54 B)");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_234_567), "1.23 MB");
    }

    #[test]
    fn json_escapes_names() {
        let j = to_json(Path::new("x"), &[info("a\"b", DType::I64, &[])]);
        assert_eq!(
            j,
            "{\"file\":\"x\",\"tensors\":[{\"name\":\"a\\\"b\",\"dtype\":\"int64\",\"shape\":[],\"numel\":1,\"bytes\":8}],\"parameters\":1,\"bytes\":8}"
        );
    }
}
