//! Minimal ZIP reader (stored and deflate entries, zip64) and stored-only writer: enough for
//! `.npz` and PyTorch's `torch.save` archives. Every size and offset read from the archive is
//! checked against the archive's length before use; deflate output is capped by the size
//! the directory declares (and by deflate's maximum ratio), so a zip bomb cannot allocate.

use crate::{Error, Result};
use std::borrow::Cow;

const EOCD_SIG: u32 = 0x0605_4b50;
const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
const ZIP64_EOCD_SIG: u32 = 0x0606_4b50;
const CDH_SIG: u32 = 0x0201_4b50;
const LFH_SIG: u32 = 0x0403_4b50;
/// Deflate cannot expand more than ~1032:1.
const MAX_DEFLATE_RATIO: u64 = 1032;

#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) name: String,
    method: u16,
    crc: u32,
    csize: u64,
    pub(crate) usize: u64,
    header_offset: u64,
}

pub(crate) struct Archive<'a> {
    fmt: &'static str,
    bytes: &'a [u8],
    entries: Vec<Entry>,
}

fn u16_at(b: &[u8], p: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(p..p.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(b: &[u8], p: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(p..p.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(b: &[u8], p: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(p..p.checked_add(8)?)?.try_into().ok()?,
    ))
}

impl<'a> Archive<'a> {
    pub(crate) fn parse(fmt: &'static str, bytes: &'a [u8]) -> Result<Archive<'a>> {
        let bad = |m: &str| Error::format(fmt, format!("bad zip archive: {m}"));
        if bytes.len() < 22 {
            return Err(bad("truncated (shorter than an end-of-directory record)"));
        }
        // The end-of-central-directory record sits in the last 22 + 65535 bytes.
        let lo = bytes.len().saturating_sub(22 + 65535);
        let eocd = (lo..=bytes.len() - 22)
            .rev()
            .find(|&p| u32_at(bytes, p) == Some(EOCD_SIG))
            .ok_or_else(|| bad("no end-of-central-directory record (truncated or not a zip)"))?;
        let mut count = u16_at(bytes, eocd + 10).unwrap_or(0) as u64;
        let mut cd_size = u32_at(bytes, eocd + 12).unwrap_or(0) as u64;
        let mut cd_off = u32_at(bytes, eocd + 16).unwrap_or(0) as u64;
        if count == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_off == 0xFFFF_FFFF {
            let loc = eocd
                .checked_sub(20)
                .filter(|&p| u32_at(bytes, p) == Some(ZIP64_LOCATOR_SIG))
                .ok_or_else(|| bad("zip64 sizes without a zip64 locator"))?;
            let rec = u64_at(bytes, loc + 8).ok_or_else(|| bad("truncated zip64 locator"))?;
            let rec = usize::try_from(rec)
                .ok()
                .filter(|&r| u32_at(bytes, r) == Some(ZIP64_EOCD_SIG))
                .ok_or_else(|| bad("zip64 end record out of range"))?;
            count = u64_at(bytes, rec + 32).ok_or_else(|| bad("truncated zip64 end record"))?;
            cd_size = u64_at(bytes, rec + 40).ok_or_else(|| bad("truncated zip64 end record"))?;
            cd_off = u64_at(bytes, rec + 48).ok_or_else(|| bad("truncated zip64 end record"))?;
        }
        let cd_end = cd_off
            .checked_add(cd_size)
            .filter(|&e| e <= bytes.len() as u64)
            .ok_or_else(|| {
                bad(&format!(
                    "central directory [{cd_off}, +{cd_size}) is outside the {}-byte file",
                    bytes.len()
                ))
            })?;
        // Each directory record is at least 46 bytes: bound the count before allocating.
        if count > cd_size / 46 {
            return Err(bad(&format!(
                "{count} entries cannot fit in a {cd_size}-byte central directory"
            )));
        }
        let cd = &bytes[cd_off as usize..cd_end as usize];
        let mut entries = Vec::with_capacity(count as usize);
        let mut p = 0usize;
        for i in 0..count {
            let trunc = || bad(&format!("central directory entry {i} is truncated"));
            if u32_at(cd, p) != Some(CDH_SIG) {
                return Err(bad(&format!(
                    "central directory entry {i} has a bad signature"
                )));
            }
            let flags = u16_at(cd, p + 8).ok_or_else(trunc)?;
            let method = u16_at(cd, p + 10).ok_or_else(trunc)?;
            let crc = u32_at(cd, p + 16).ok_or_else(trunc)?;
            let mut csize = u32_at(cd, p + 20).ok_or_else(trunc)? as u64;
            let mut usize_ = u32_at(cd, p + 24).ok_or_else(trunc)? as u64;
            let name_len = u16_at(cd, p + 28).ok_or_else(trunc)? as usize;
            let extra_len = u16_at(cd, p + 30).ok_or_else(trunc)? as usize;
            let comment_len = u16_at(cd, p + 32).ok_or_else(trunc)? as usize;
            let mut header_offset = u32_at(cd, p + 42).ok_or_else(trunc)? as u64;
            let name = cd.get(p + 46..p + 46 + name_len).ok_or_else(trunc)?;
            let extra = cd
                .get(p + 46 + name_len..p + 46 + name_len + extra_len)
                .ok_or_else(trunc)?;
            if flags & 1 != 0 {
                return Err(bad("encrypted entries are not supported"));
            }
            // zip64 extended information: the fields that overflowed 32 bits, in order.
            let mut q = 0;
            while q + 4 <= extra.len() {
                let id = u16_at(extra, q).unwrap_or(0);
                let len = u16_at(extra, q + 2).unwrap_or(0) as usize;
                let body = extra.get(q + 4..q + 4 + len).ok_or_else(trunc)?;
                if id == 1 {
                    let mut r = 0;
                    for field in [&mut usize_, &mut csize, &mut header_offset] {
                        if *field == 0xFFFF_FFFF {
                            *field = u64_at(body, r).ok_or_else(trunc)?;
                            r += 8;
                        }
                    }
                }
                q += 4 + len;
            }
            let name = String::from_utf8_lossy(name).into_owned();
            entries.push(Entry {
                name,
                method,
                crc,
                csize,
                usize: usize_,
                header_offset,
            });
            p += 46 + name_len + extra_len + comment_len;
        }
        Ok(Archive {
            fmt,
            bytes,
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
        let b = self.bytes;
        let off = usize::try_from(e.header_offset)
            .ok()
            .filter(|&o| u32_at(b, o) == Some(LFH_SIG))
            .ok_or_else(|| {
                bad(format!(
                    "local header offset {} is invalid",
                    e.header_offset
                ))
            })?;
        let name_len = u16_at(b, off + 26).ok_or_else(|| bad("truncated local header".into()))?;
        let extra_len = u16_at(b, off + 28).ok_or_else(|| bad("truncated local header".into()))?;
        let start = off + 30 + name_len as usize + extra_len as usize;
        let data = usize::try_from(e.csize)
            .ok()
            .and_then(|n| b.get(start..start.checked_add(n)?))
            .ok_or_else(|| {
                bad(format!(
                    "{} compressed bytes at offset {start} run past the end of the {}-byte file",
                    e.csize,
                    b.len()
                ))
            })?;
        let out: Cow<'a, [u8]> = match e.method {
            0 => {
                if e.csize != e.usize {
                    return Err(bad("stored entry with different sizes".into()));
                }
                Cow::Borrowed(data)
            }
            8 => {
                if e.usize > e.csize.saturating_mul(MAX_DEFLATE_RATIO) + 1024 {
                    return Err(bad(format!(
                        "declares {} bytes from {} compressed, more than deflate can produce",
                        e.usize, e.csize
                    )));
                }
                let limit = usize::try_from(e.usize).map_err(|_| bad("entry too large".into()))?;
                let v = miniz_oxide::inflate::decompress_to_vec_with_limit(data, limit)
                    .map_err(|err| bad(format!("deflate data is corrupt ({:?})", err.status)))?;
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
                    "compression method {m} is not supported (only stored and deflate)"
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
