//! A character-level language-modelling dataset: the vocabulary is the set of distinct
//! characters, and sample `i` is the window `x = text[i..i+block]`, `y = text[i+1..i+block+1]`.

use std::collections::HashMap;
use std::path::Path;

use super::{check_indices, Dataset};
use crate::{Error, Result, Tensor};

#[derive(Clone, Debug)]
pub struct CharDataset {
    vocab: Vec<char>,
    stoi: HashMap<char, u32>,
    data: Vec<u32>,
    block_size: usize,
}

impl CharDataset {
    /// Build the vocabulary (sorted distinct chars) and encode `text`.
    #[track_caller]
    pub fn from_text(text: &str, block_size: usize) -> Result<CharDataset> {
        let mut vocab: Vec<char> = text.chars().collect();
        vocab.sort_unstable();
        vocab.dedup();
        let stoi: HashMap<char, u32> = vocab
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i as u32))
            .collect();
        let data: Vec<u32> = text.chars().map(|c| stoi[&c]).collect();
        if block_size == 0 || data.len() <= block_size {
            return Err(Error::invalid(
                "CharDataset",
                format!(
                    "block size {block_size} needs a text longer than it (text has {} chars)",
                    data.len()
                ),
            ));
        }
        Ok(CharDataset {
            vocab,
            stoi,
            data,
            block_size,
        })
    }

    /// Read a UTF-8 text file (gzip-compressed when it starts with the gzip magic).
    #[track_caller]
    pub fn load(path: impl AsRef<Path>, block_size: usize) -> Result<CharDataset> {
        use std::io::Read;
        let path = path.as_ref();
        let bytes = std::fs::read(path)
            .map_err(|e| Error::io("CharDataset::load", format!("{}: {e}", path.display())))?;
        let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(&bytes[..])
                .read_to_end(&mut out)
                .map_err(|e| {
                    Error::format("CharDataset::load", format!("{}: {e}", path.display()))
                })?;
            out
        } else {
            bytes
        };
        let text = String::from_utf8(bytes).map_err(|e| {
            Error::format(
                "CharDataset::load",
                format!("{} is not UTF-8: {e}", path.display()),
            )
        })?;
        CharDataset::from_text(&text, block_size)
    }

    pub fn vocab(&self) -> &[char] {
        &self.vocab
    }
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Token ids of `s`; errors on a character outside the vocabulary.
    #[track_caller]
    pub fn encode(&self, s: &str) -> Result<Vec<usize>> {
        s.chars()
            .map(|c| {
                self.stoi.get(&c).map(|&i| i as usize).ok_or_else(|| {
                    Error::invalid(
                        "CharDataset::encode",
                        format!("{c:?} is not in the vocabulary"),
                    )
                })
            })
            .collect()
    }

    /// The text of token ids; errors on an id outside the vocabulary.
    #[track_caller]
    pub fn decode(&self, ids: &[usize]) -> Result<String> {
        ids.iter()
            .map(|&i| {
                self.vocab.get(i).copied().ok_or_else(|| {
                    Error::index(
                        "CharDataset::decode",
                        format!("id {i} out of range for vocabulary of {}", self.vocab.len()),
                    )
                })
            })
            .collect()
    }
}

impl Dataset for CharDataset {
    fn len(&self) -> usize {
        self.data.len() - self.block_size
    }
    /// `x` and `y` are i64 `[b, block_size]`, `y` shifted one character ahead.
    fn get_batch(&self, idx: &[usize]) -> Result<(Tensor, Tensor)> {
        check_indices("CharDataset", idx, self.len())?;
        let t = self.block_size;
        let mut x = Vec::with_capacity(idx.len() * t);
        let mut y = Vec::with_capacity(idx.len() * t);
        for &i in idx {
            x.extend(self.data[i..i + t].iter().map(|&v| v as i64));
            y.extend(self.data[i + 1..i + t + 1].iter().map(|&v| v as i64));
        }
        Ok((
            Tensor::from_vec(x, [idx.len(), t])?,
            Tensor::from_vec(y, [idx.len(), t])?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_and_vocab() {
        let ds = CharDataset::from_text("hello", 2).unwrap();
        assert_eq!(ds.vocab(), &['e', 'h', 'l', 'o']);
        assert_eq!(ds.len(), 3);
        let (x, y) = ds.get_batch(&[0, 2]).unwrap();
        // "he" -> "el", "ll" -> "lo"
        assert_eq!(x.to_vec::<i64>().unwrap(), vec![1, 0, 2, 2]);
        assert_eq!(y.to_vec::<i64>().unwrap(), vec![0, 2, 2, 3]);
        assert_eq!(ds.decode(&ds.encode("hole").unwrap()).unwrap(), "hole");
        assert!(ds.encode("z").is_err());
        assert!(ds.decode(&[4]).is_err());
        assert!(ds.get_batch(&[3]).is_err());
        assert!(CharDataset::from_text("ab", 2).is_err());
    }
}
