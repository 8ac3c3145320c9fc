//! ZIP archives for `.npz` and PyTorch's `torch.save` files: the `zip` crate reads the
//! directory (zip64 included) and inflates deflate entries; stored entries are borrowed
//! straight from the file (no copy of a large checkpoint's tensors) and CRC-checked here. The
//! sizes the directory declares are checked before anything is allocated: against the
//! archive's length, deflate's maximum ratio (so a zip bomb cannot allocate) and the memory
//! budget. The writer (stored entries only) is our own: a few lines, no options needed.

use crate::{Error, Result};
use std::borrow::Cow;
use std::io::Read;
use zip::CompressionMethod;

// record signatures the writer emits
const EOCD_SIG: u32 = 0x0605_4b50;
const CDH_SIG: u32 = 0x0201_4b50;
const LFH_SIG: u32 = 0x0403_4b50;
/// Deflate cannot expand more than ~1032:1.
const MAX_DEFLATE_RATIO: u64 = 1032;

#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) name: String,
    index: usize,
    method: CompressionMethod,
    crc: u32,
    csize: u64,
    pub(crate) usize: u64,
    data_start: u64,
}

pub(crate) struct Archive<'a> {
    fmt: &'static str,
    bytes: &'a [u8],
    zip: zip::ZipArchive<std::io::Cursor<&'a [u8]>>,
    entries: Vec<Entry>,
}

impl<'a> Archive<'a> {
    pub(crate) fn parse(fmt: &'static str, bytes: &'a [u8]) -> Result<Archive<'a>> {
        let bad = |m: String| Error::format(fmt, format!("bad zip archive: {m}"));
        let mut zip =
            zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| bad(e.to_string()))?;
        let mut entries = Vec::with_capacity(zip.len());
        for index in 0..zip.len() {
            let f = zip.by_index_raw(index).map_err(|e| bad(e.to_string()))?;
            if f.encrypted() {
                return Err(bad("encrypted entries are not supported".into()));
            }
            entries.push(Entry {
                name: String::from_utf8_lossy(f.name_raw()).into_owned(),
                index,
                method: f.compression(),
                crc: f.crc32(),
                csize: f.compressed_size(),
                usize: f.size(),
                data_start: f.data_start().unwrap_or(u64::MAX),
            });
        }
        Ok(Archive {
            fmt,
            bytes,
            zip,
            entries,
        })
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub(crate) fn find(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The uncompressed bytes of an entry (borrowed when stored), CRC-checked.
    pub(crate) fn read(&self, e: &Entry) -> Result<Cow<'a, [u8]>> {
        let bad = |m: String| Error::format(self.fmt, format!("zip entry '{}': {m}", e.name));
        let out: Cow<'a, [u8]> = match e.method {
            CompressionMethod::Stored => {
                if e.csize != e.usize {
                    return Err(bad("stored entry with different sizes".into()));
                }
                let data = usize::try_from(e.data_start)
                    .ok()
                    .zip(usize::try_from(e.csize).ok())
                    .and_then(|(s, n)| self.bytes.get(s..s.checked_add(n)?))
                    .ok_or_else(|| {
                        bad(format!(
                            "{} bytes at offset {} run past the end of the {}-byte file",
                            e.csize,
                            e.data_start,
                            self.bytes.len()
                        ))
                    })?;
                Cow::Borrowed(data)
            }
            CompressionMethod::Deflated => {
                if e.usize > e.csize.saturating_mul(MAX_DEFLATE_RATIO) + 1024 {
                    return Err(bad(format!(
                        "declares {} bytes from {} compressed, more than deflate can produce",
                        e.usize, e.csize
                    )));
                }
                let what = format_args!("zip entry '{}'", e.name);
                crate::limits::check_bytes(self.fmt, &what, e.usize as u128, 1)?;
                // (the archive reader is a cursor over borrowed bytes: cloning it is cheap)
                let mut zip = self.zip.clone();
                let mut f = zip.by_index(e.index).map_err(|err| bad(err.to_string()))?;
                let mut v = Vec::new();
                v.try_reserve_exact(e.usize as usize)
                    .map_err(|_| bad(format!("cannot allocate {} bytes", e.usize)))?;
                (&mut f)
                    .take(e.usize + 1)
                    .read_to_end(&mut v)
                    .map_err(|err| bad(format!("deflate data is corrupt ({err})")))?;
                if v.len() as u64 != e.usize {
                    return Err(bad(format!(
                        "inflated to {} bytes, directory says {}",
                        v.len(),
                        e.usize
                    )));
                }
                Cow::Owned(v)
            }
            m => {
                return Err(bad(format!(
                    "compression method {m:?} is not supported (only stored and deflate)"
                )))
            }
        };
        let crc = crc32(&out);
        if crc != e.crc {
            return Err(bad(format!(
                "CRC mismatch ({crc:08x} != {:08x}): data is corrupt",
                e.crc
            )));
        }
        Ok(out)
    }
}

/// CRC-32 (IEEE), as zip uses.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    !data.iter().fold(!0u32, |c, &b| {
        t[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8)
    })
}

/// Write a zip of stored (uncompressed) entries. Sizes above 4 GiB are refused rather than
/// written as zip64.
pub(crate) fn write_stored(fmt: &str, entries: &[(String, Vec<u8>)]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let off = out.len();
        if data.len() > u32::MAX as usize - 1 || off > u32::MAX as usize - 1 || name.len() > 65535 {
            return Err(Error::invalid(
                fmt,
                format!("entry '{name}' is too large for a zip32 archive"),
            ));
        }
        let crc = crc32(data);
        let common = |v: &mut Vec<u8>| {
            v.extend(20u16.to_le_bytes()); // version needed
            v.extend(0u16.to_le_bytes()); // flags
            v.extend(0u16.to_le_bytes()); // method: stored
            v.extend(0u16.to_le_bytes()); // time
            v.extend(0x21u16.to_le_bytes()); // date: 1980-01-01
            v.extend(crc.to_le_bytes());
            v.extend((data.len() as u32).to_le_bytes());
            v.extend((data.len() as u32).to_le_bytes());
            v.extend((name.len() as u16).to_le_bytes());
            v.extend(0u16.to_le_bytes()); // extra
        };
        out.extend(LFH_SIG.to_le_bytes());
        common(&mut out);
        out.extend(name.as_bytes());
        out.extend(data);
        central.extend(CDH_SIG.to_le_bytes());
        central.extend(20u16.to_le_bytes()); // version made by
        common(&mut central);
        central.extend([0u8; 10]); // comment len, disk, internal attrs, external attrs
        central.extend((off as u32).to_le_bytes());
        central.extend(name.as_bytes());
    }
    let cd_off = out.len();
    out.extend(&central);
    out.extend(EOCD_SIG.to_le_bytes());
    out.extend([0u8; 4]); // disk numbers
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend((cd_off as u32).to_le_bytes());
    out.extend(0u16.to_le_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_known_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn stored_round_trip() {
        let z = write_stored(
            "t",
            &[("a.npy".into(), b"hello".to_vec()), ("b".into(), vec![])],
        )
        .unwrap();
        let a = Archive::parse("t", &z).unwrap();
        assert_eq!(a.entries().len(), 2);
        assert_eq!(&*a.read(a.find("a.npy").unwrap()).unwrap(), b"hello");
        assert_eq!(&*a.read(a.find("b").unwrap()).unwrap(), b"");
    }
}
