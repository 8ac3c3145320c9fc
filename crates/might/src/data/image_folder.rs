//! `ImageFolder`: a classification dataset laid out as `root/<class>/<image>.png|jpg`
//! (torchvision's `ImageFolder`). Classes are the sub-folder names in sorted order; images are
//! decoded once (in parallel) and kept as u8 pixels.

use std::path::{Path, PathBuf};

use super::transforms::{Pipeline, Transform};
use super::{gather_images, gather_labels, Dataset};
use crate::{Device, Error, Result, Tensor};

/// How to turn files into samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImageFolderOptions {
    /// Decode to one grey channel instead of RGB.
    pub grayscale: bool,
    /// Resize every image to `(height, width)`; without it all images must share one size.
    pub size: Option<(usize, usize)>,
}

#[derive(Clone, Debug)]
pub struct ImageFolder {
    classes: Vec<String>,
    images: Vec<u8>,
    labels: Vec<u8>,
    chw: [usize; 3],
    transforms: Pipeline,
}

fn is_image(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
}

/// Decode one image file to planar u8 `[c, h, w]` (c = 1 grey or 3 RGB), resized when
/// `size` is given.
#[track_caller]
pub fn load_image(
    path: impl AsRef<Path>,
    grayscale: bool,
    size: Option<(usize, usize)>,
) -> Result<(Vec<u8>, [usize; 3])> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|e| Error::io("load_image", format!("{}: {e}", path.display())))?;
    decode_image(&bytes, grayscale, size).map_err(|e| {
        Error::new(
            e.kind,
            "load_image",
            format!("{}: {}", path.display(), e.msg),
        )
    })
}

/// [`load_image`] on the bytes of a png or jpeg file. The decoder's own limits apply (it
/// refuses images that would need more than 512 MiB), and the pixels must fit the memory
/// budget.
#[track_caller]
pub fn decode_image(
    bytes: &[u8],
    grayscale: bool,
    size: Option<(usize, usize)>,
) -> Result<(Vec<u8>, [usize; 3])> {
    let img = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| Error::io("decode_image", e.to_string()))?
        .decode()
        .map_err(|e| Error::format("decode_image", e.to_string()))?;
    if let Some((h, w)) = size {
        let what = format_args!("an image resized to {h}x{w}");
        crate::limits::check_bytes("decode_image", &what, h as u128 * w as u128, 3)?;
    }
    let img = match size {
        Some((h, w)) if (img.height() as usize, img.width() as usize) != (h, w) => {
            img.resize_exact(w as u32, h as u32, image::imageops::FilterType::Triangle)
        }
        _ => img,
    };
    let (w, h) = (img.width() as usize, img.height() as usize);
    if grayscale {
        Ok((img.to_luma8().into_raw(), [1, h, w]))
    } else {
        let rgb = img.to_rgb8().into_raw();
        let mut planar = vec![0u8; 3 * h * w];
        for (i, px) in rgb.chunks_exact(3).enumerate() {
            for c in 0..3 {
                planar[c * h * w + i] = px[c];
            }
        }
        Ok((planar, [3, h, w]))
    }
}

impl ImageFolder {
    /// Scan `root/<class>/*` and decode every png/jpeg image.
    #[track_caller]
    pub fn load(root: impl AsRef<Path>, opts: &ImageFolderOptions) -> Result<ImageFolder> {
        let root = root.as_ref();
        let read_dir = |d: &Path| {
            std::fs::read_dir(d)
                .map_err(|e| Error::io("ImageFolder::load", format!("{}: {e}", d.display())))
        };
        let mut classes: Vec<(String, PathBuf)> = read_dir(root)?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .collect();
        classes.sort();
        if classes.is_empty() || classes.len() > 256 {
            return Err(Error::format(
                "ImageFolder::load",
                format!(
                    "{} has {} class folders (expected 1 to 256)",
                    root.display(),
                    classes.len()
                ),
            ));
        }
        let mut files: Vec<(PathBuf, u8)> = Vec::new();
        for (label, (_, dir)) in classes.iter().enumerate() {
            let mut f: Vec<PathBuf> = read_dir(dir)?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file() && is_image(p))
                .collect();
            f.sort();
            files.extend(f.into_iter().map(|p| (p, label as u8)));
        }
        if files.is_empty() {
            return Err(Error::format(
                "ImageFolder::load",
                format!("no png/jpeg images under {}", root.display()),
            ));
        }
        // decode on as many threads as the CPU kernels use (`set_num_threads`)
        let decode = || -> Vec<Result<(Vec<u8>, [usize; 3])>> {
            use rayon::prelude::*;
            files
                .par_iter()
                .map(|(p, _)| load_image(p, opts.grayscale, opts.size))
                .collect()
        };
        let workers = rayon::ThreadPoolBuilder::new()
            .num_threads(Device::Cpu.num_threads())
            .build();
        let decoded = match workers {
            Ok(pool) => pool.install(decode),
            Err(_) => decode(),
        };
        let mut chw = None;
        let mut images = Vec::new();
        for (d, (p, _)) in decoded.into_iter().zip(&files) {
            let (px, s) = d?;
            match chw {
                None => {
                    chw = Some(s);
                    images.reserve(files.len() * px.len());
                }
                Some(c) if c != s => {
                    return Err(Error::shape(
                        "ImageFolder::load",
                        format!(
                            "{} is {:?} but earlier images are {c:?} (set a size to resize)",
                            p.display(),
                            s
                        ),
                    ))
                }
                _ => {}
            }
            images.extend_from_slice(&px);
        }
        Ok(ImageFolder {
            classes: classes.into_iter().map(|(n, _)| n).collect(),
            images,
            labels: files.iter().map(|(_, l)| *l).collect(),
            chw: chw.unwrap_or([0, 0, 0]),
            transforms: Pipeline::default(),
        })
    }

    /// Use these transforms (random ones draw from a generator seeded with `seed`).
    pub fn with_transforms(mut self, transforms: Vec<Transform>, seed: u64) -> ImageFolder {
        self.transforms = Pipeline::new(transforms, seed);
        self
    }

    pub fn classes(&self) -> &[String] {
        &self.classes
    }
    pub fn image_shape(&self) -> [usize; 3] {
        self.chw
    }
    pub fn labels(&self) -> &[u8] {
        &self.labels
    }
}

impl Dataset for ImageFolder {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn get_batch(&self, idx: &[usize]) -> Result<(Tensor, Tensor)> {
        let x = gather_images("ImageFolder", &self.images, self.chw, idx, &self.transforms)?;
        Ok((x, gather_labels(&self.labels, idx)))
    }
}
