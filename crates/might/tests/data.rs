//! Datasets and the data loader on small synthetic files written by the tests.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use might::data::idx::write_idx_u8;
use might::data::{Cifar10, DataLoader, Dataset, Mnist, TensorDataset, Transform};
use might::{ErrorKind, Tensor};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("might-data-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// n images of 2x3 where pixel j of image i is (i * 10 + j), labels i % 10.
fn write_mnist(dir: &std::path::Path, prefix: &str, n: usize, gz: bool) {
    let ext = if gz { ".gz" } else { "" };
    let px: Vec<u8> = (0..n)
        .flat_map(|i| (0..6).map(move |j| (i * 10 + j) as u8))
        .collect();
    let lab: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
    write_idx_u8(
        dir.join(format!("{prefix}-images-idx3-ubyte{ext}")),
        &[n, 2, 3],
        &px,
    )
    .unwrap();
    write_idx_u8(
        dir.join(format!("{prefix}-labels-idx1-ubyte{ext}")),
        &[n],
        &lab,
    )
    .unwrap();
}

#[test]
fn mnist_loads_and_scales() {
    let d = tmpdir("mnist");
    write_mnist(&d, "train", 12, true);
    write_mnist(&d, "t10k", 5, false);
    let tr = Mnist::load(&d, true).unwrap();
    let te = Mnist::load(&d, false).unwrap();
    assert_eq!((tr.len(), te.len()), (12, 5));
    assert_eq!(tr.image_shape(), [1, 2, 3]);
    let (x, y) = tr.get_batch(&[3, 0]).unwrap();
    assert_eq!(x.dims(), &[2, 1, 2, 3]);
    assert_eq!(x.dtype(), might::DType::F32);
    let xv = x.to_vec::<f32>().unwrap();
    for j in 0..6 {
        assert!((xv[j] - (30 + j) as f32 / 255.0).abs() < 1e-7);
        assert!((xv[6 + j] - j as f32 / 255.0).abs() < 1e-7);
    }
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![3, 0]);
    assert_eq!(tr.get_batch(&[12]).unwrap_err().kind, ErrorKind::Index);

    // Normalisation is fused: (x/255 - 0.5) / 0.5.
    let n = tr.with_transforms(
        vec![Transform::Normalize {
            mean: vec![0.5],
            std: vec![0.5],
        }],
        0,
    );
    let v = n.get_batch(&[1]).unwrap().0.to_vec::<f32>().unwrap();
    assert!((v[2] - ((12.0 / 255.0) - 0.5) / 0.5).abs() < 1e-6);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn mnist_malformed_files_error() {
    let d = tmpdir("mnist-bad");
    // Missing directory and missing files.
    assert_eq!(
        Mnist::load(d.join("nope"), true).unwrap_err().kind,
        ErrorKind::Io
    );
    assert_eq!(Mnist::load(&d, true).unwrap_err().kind, ErrorKind::Io);
    // Label count that does not match the images.
    write_idx_u8(d.join("train-images-idx3-ubyte"), &[4, 2, 2], &[0; 16]).unwrap();
    write_idx_u8(d.join("train-labels-idx1-ubyte"), &[3], &[0; 3]).unwrap();
    assert_eq!(Mnist::load(&d, true).unwrap_err().kind, ErrorKind::Format);
    // Truncated image data.
    let mut bytes = std::fs::read(d.join("train-images-idx3-ubyte")).unwrap();
    bytes.truncate(bytes.len() - 3);
    std::fs::write(d.join("train-images-idx3-ubyte"), &bytes).unwrap();
    write_idx_u8(d.join("train-labels-idx1-ubyte"), &[4], &[0; 4]).unwrap();
    let e = Mnist::load(&d, true).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Format);
    assert!(e.msg.contains("truncated"), "{}", e.msg);
    // Garbage that is not gzip nor IDX.
    std::fs::write(d.join("train-images-idx3-ubyte"), b"hello world").unwrap();
    assert_eq!(Mnist::load(&d, true).unwrap_err().kind, ErrorKind::Format);
    // Corrupt gzip.
    std::fs::remove_file(d.join("train-images-idx3-ubyte")).unwrap();
    std::fs::write(
        d.join("train-images-idx3-ubyte.gz"),
        [0x1f, 0x8b, 8, 0, 1, 2, 3],
    )
    .unwrap();
    assert_eq!(Mnist::load(&d, true).unwrap_err().kind, ErrorKind::Format);
    std::fs::remove_dir_all(&d).ok();
}

fn cifar_records(n: usize, label0: u8) -> Vec<u8> {
    let mut b = Vec::new();
    for i in 0..n {
        b.push((label0 as usize + i) as u8 % 10);
        b.extend((0..3072).map(|j| ((i + j) % 256) as u8));
    }
    b
}

#[test]
fn cifar_binary_loads() {
    let d = tmpdir("cifar");
    for i in 1..=5 {
        std::fs::write(d.join(format!("data_batch_{i}.bin")), cifar_records(2, i)).unwrap();
    }
    std::fs::write(d.join("test_batch.bin"), cifar_records(3, 0)).unwrap();
    let tr = Cifar10::load(&d, true).unwrap();
    let te = Cifar10::load(&d, false).unwrap();
    assert_eq!((tr.len(), te.len()), (10, 3));
    assert_eq!(tr.labels(), &[1, 2, 2, 3, 3, 4, 4, 5, 5, 6]);
    let (x, y) = te.get_batch(&[2]).unwrap();
    assert_eq!(x.dims(), &[1, 3, 32, 32]);
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![2]);
    let v = x.to_vec::<f32>().unwrap();
    // Planar layout: element 1024 is the first green pixel = byte (2 + 1024) % 256.
    assert!((v[1024] - ((2 + 1024) % 256) as f32 / 255.0).abs() < 1e-7);

    // Augmentation is reproducible for a seed and actually changes pixels.
    let aug = || {
        Cifar10::load(&d, false).unwrap().with_transforms(
            vec![
                Transform::RandomCrop { padding: 4 },
                Transform::RandomHorizontalFlip,
            ],
            7,
        )
    };
    let a = aug()
        .get_batch(&[0, 1, 2])
        .unwrap()
        .0
        .to_vec::<f32>()
        .unwrap();
    let b = aug()
        .get_batch(&[0, 1, 2])
        .unwrap()
        .0
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(a, b);
    let plain = te.get_batch(&[0, 1, 2]).unwrap().0.to_vec::<f32>().unwrap();
    assert_ne!(a, plain);

    // Malformed: a partial record and an out-of-range label.
    std::fs::write(d.join("test_batch.bin"), &cifar_records(1, 0)[..3000]).unwrap();
    assert_eq!(
        Cifar10::load(&d, false).unwrap_err().kind,
        ErrorKind::Format
    );
    let mut bad = cifar_records(1, 0);
    bad[0] = 10;
    std::fs::write(d.join("test_batch.bin"), bad).unwrap();
    assert_eq!(
        Cifar10::load(&d, false).unwrap_err().kind,
        ErrorKind::Format
    );
    std::fs::remove_file(d.join("data_batch_3.bin")).unwrap();
    assert_eq!(Cifar10::load(&d, true).unwrap_err().kind, ErrorKind::Io);
    std::fs::remove_dir_all(&d).ok();
}

fn range_dataset(n: usize) -> Arc<dyn Dataset> {
    let x = Tensor::from_vec((0..n).map(|v| v as f32).collect::<Vec<_>>(), [n, 1]).unwrap();
    let y = Tensor::new(&(0..n as i64).collect::<Vec<_>>());
    Arc::new(TensorDataset::new(x, y).unwrap())
}

fn epoch_ids(loader: &DataLoader) -> Vec<Vec<i64>> {
    loader
        .iter()
        .map(|b| b.unwrap().1.to_vec::<i64>().unwrap())
        .collect()
}

#[test]
fn loader_batches_shuffle_and_drop_last() {
    let ds = range_dataset(10);
    let l = DataLoader::new(ds.clone(), 4, false, false, 0);
    assert_eq!(l.len(), 3);
    assert_eq!(
        epoch_ids(&l),
        vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]
    );
    let l = DataLoader::new(ds.clone(), 4, false, true, 0);
    assert_eq!(l.len(), 2);
    assert_eq!(epoch_ids(&l).concat(), (0..8).collect::<Vec<_>>());

    let l = DataLoader::new(ds.clone(), 3, true, false, 42);
    let e0 = epoch_ids(&l);
    let e1 = epoch_ids(&l);
    // Every sample exactly once per epoch, in a different order each epoch.
    for e in [&e0, &e1] {
        let all: HashSet<i64> = e.concat().into_iter().collect();
        assert_eq!(all.len(), 10);
    }
    assert_ne!(e0, e1);
    assert_ne!(e0.concat(), (0..10).collect::<Vec<_>>());
    // Same seed, same epochs: same batches (also without the prefetch thread).
    let l2 = DataLoader::new(ds.clone(), 3, true, false, 42).with_prefetch(0);
    assert_eq!(epoch_ids(&l2), e0);
    l2.set_epoch(1);
    assert_eq!(epoch_ids(&l2), e1);
    // Another seed: another order.
    let l3 = DataLoader::new(ds, 3, true, false, 43);
    assert_ne!(epoch_ids(&l3), e0);
}

#[test]
fn loader_inputs_match_targets_and_errors_surface() {
    let ds = range_dataset(7);
    let l = DataLoader::new(ds.clone(), 2, true, false, 1);
    for b in &l {
        let (x, y) = b.unwrap();
        let xs: Vec<i64> = x
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&v| v as i64)
            .collect();
        assert_eq!(xs, y.to_vec::<i64>().unwrap());
    }
    // Dropping an iterator early stops the worker cleanly.
    let mut it = l.iter();
    assert!(it.next().unwrap().is_ok());
    drop(it);
    // A zero batch size is an error, not a panic or an endless loop.
    let z = DataLoader::new(ds, 0, false, false, 0);
    let got: Vec<_> = z.iter().collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].as_ref().unwrap_err().kind, ErrorKind::Invalid);
}

#[cfg(feature = "image")]
#[test]
fn image_folder_loads_png_classes() {
    use might::data::image_folder::{ImageFolder, ImageFolderOptions};
    let d = tmpdir("imgfolder");
    for (ci, class) in ["cat", "dog"].iter().enumerate() {
        std::fs::create_dir_all(d.join(class)).unwrap();
        for k in 0..2u8 {
            let img = image::RgbImage::from_fn(4, 3, |x, y| {
                image::Rgb([ci as u8 * 100 + k, x as u8 * 10, y as u8 * 20])
            });
            img.save(d.join(class).join(format!("{k}.png"))).unwrap();
        }
    }
    std::fs::write(d.join("dog").join("notes.txt"), "ignored").unwrap();
    let ds = ImageFolder::load(&d, &ImageFolderOptions::default()).unwrap();
    assert_eq!(ds.classes(), &["cat".to_string(), "dog".to_string()]);
    assert_eq!(ds.len(), 4);
    assert_eq!(ds.image_shape(), [3, 3, 4]);
    let (x, y) = ds.get_batch(&[3]).unwrap();
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![1]);
    let v = x.to_vec::<f32>().unwrap();
    // Red plane is 101, green of pixel (x=2, y=1) is 20, blue of (x=0, y=2) is 40.
    assert!((v[0] - 101.0 / 255.0).abs() < 1e-6);
    assert!((v[12 + 4 + 2] - 20.0 / 255.0).abs() < 1e-6);
    assert!((v[24 + 8] - 40.0 / 255.0).abs() < 1e-6);
    // A corrupt image is a format error.
    std::fs::write(d.join("cat").join("bad.png"), b"not a png").unwrap();
    assert_eq!(
        ImageFolder::load(&d, &ImageFolderOptions::default())
            .unwrap_err()
            .kind,
        ErrorKind::Format
    );
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn idx_parser_rejects_hostile_headers() {
    use might::data::idx::{encode_idx_u8, parse_idx};
    let data: Vec<u8> = (0..24).collect();
    let a = parse_idx(&encode_idx_u8(&[2, 3, 4], &data)).unwrap();
    assert_eq!((a.dims.clone(), a.numel()), (vec![2, 3, 4], 24));
    assert_eq!(a.into_u8().unwrap(), data);
    // Huge dims with no data behind them: an error, not a giant allocation.
    let mut h = vec![0, 0, 0x08, 3];
    for _ in 0..3 {
        h.extend_from_slice(&u32::MAX.to_be_bytes());
    }
    assert_eq!(parse_idx(&h).unwrap_err().kind, ErrorKind::Format);
    assert!(parse_idx(&[0, 0]).is_err());
    assert!(parse_idx(&[1, 0, 8, 1, 0, 0, 0, 1, 5]).is_err()); // bad magic
    assert!(parse_idx(&[0, 0, 0x42, 1, 0, 0, 0, 1, 5]).is_err()); // unknown type
    assert!(parse_idx(&[0, 0, 8, 2, 0, 0, 0, 1]).is_err()); // truncated header
    assert!(parse_idx(&[0, 0, 8, 0]).is_err()); // zero dims
    let e = parse_idx(&[0, 0, 8, 1, 0, 0, 0, 3, 5, 6]).unwrap_err();
    assert!(e.msg.contains("truncated"), "{}", e.msg);
    // A float IDX file parses but is not u8 data.
    let f = parse_idx(&[0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 128, 63]).unwrap();
    assert_eq!(f.into_u8().unwrap_err().kind, ErrorKind::DType);
}

#[test]
fn flip_and_crop_keep_pixels_from_the_image() {
    // 64 copies of one 3x4x4 image whose pixel values are all distinct.
    let img: Vec<u8> = (0..48).map(|v| v as u8 + 1).collect();
    let n = 64;
    let ds = Cifar10::from_raw(
        (0..n)
            .flat_map(|_| {
                let mut full = vec![0u8; 3072];
                for c in 0..3 {
                    for y in 0..4 {
                        for x in 0..4 {
                            full[c * 1024 + y * 32 + x] = img[c * 16 + y * 4 + x];
                        }
                    }
                }
                full
            })
            .collect(),
        vec![0; n],
    )
    .unwrap();
    let flip = ds
        .clone()
        .with_transforms(vec![Transform::RandomHorizontalFlip], 3);
    let idx: Vec<usize> = (0..n).collect();
    let v = flip.get_batch(&idx).unwrap().0.to_vec::<f32>().unwrap();
    let (mut same, mut mirrored) = (0, 0);
    for s in v.chunks_exact(3072) {
        // Pixel (0, 0) of channel 0 either stays at x = 0 or moves to x = 31.
        if s[0] > 0.0 {
            same += 1;
            assert_eq!(s[31], 0.0);
        } else {
            mirrored += 1;
            assert!((s[31] - 1.0 / 255.0).abs() < 1e-7);
            assert!((s[30] - 2.0 / 255.0).abs() < 1e-7);
        }
    }
    assert!(same > 10 && mirrored > 10, "{same} / {mirrored}");

    let crop = ds.with_transforms(vec![Transform::RandomCrop { padding: 2 }], 5);
    let v = crop.get_batch(&idx).unwrap().0.to_vec::<f32>().unwrap();
    let mut offsets = HashSet::new();
    for s in v.chunks_exact(3072) {
        // Find where image pixel value 1 (channel 0, (0, 0)) landed: a shift of at most 2.
        let pos = s[..1024]
            .iter()
            .position(|&p| (p - 1.0 / 255.0).abs() < 1e-7);
        if let Some(p) = pos {
            let (y, x) = (p / 32, p % 32);
            assert!(y <= 2 && x <= 2, "moved to ({y}, {x})");
            offsets.insert((y, x));
        }
        // Every value is 0 (padding/background) or one of the image's values.
        assert!(s
            .iter()
            .all(|&p| p == 0.0 || (1.0 / 255.0..=48.5 / 255.0).contains(&p)));
    }
    assert!(offsets.len() > 3, "{offsets:?}");

    // With Normalize, the crop's padding is a normalised 0 pixel ((0 - 0.5) / 0.25 = -2), and
    // image pixels are normalised the same way wherever they land.
    let norm = Transform::Normalize {
        mean: vec![0.5],
        std: vec![0.25],
    };
    let ds = crop.with_transforms(vec![norm, Transform::RandomCrop { padding: 2 }], 5);
    let w = ds.get_batch(&idx).unwrap().0.to_vec::<f32>().unwrap();
    for (a, b) in w.iter().zip(&v) {
        assert!((a - (b - 0.5) / 0.25).abs() < 1e-5, "{a} vs {b}");
    }
    assert!(w.contains(&-2.0));
}

#[test]
fn char_dataset_windows_and_vocab() {
    use might::data::CharDataset;
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
    assert_eq!(ds.get_batch(&[3]).unwrap_err().kind, ErrorKind::Index);
    assert!(CharDataset::from_text("ab", 2).is_err());
    // Gzip-compressed text files load too.
    let d = tmpdir("text");
    let p = d.join("t.txt.gz");
    std::fs::write(&p, flate2_free_gzip(b"abcabc")).unwrap();
    let ds = CharDataset::load(&p, 3).unwrap();
    assert_eq!(ds.vocab_size(), 3);
    assert_eq!(ds.len(), 3);
    std::fs::remove_dir_all(&d).ok();
}

/// A gzip file with one stored (uncompressed) deflate block, built by hand so the test
/// needs no compression crate.
fn flate2_free_gzip(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
    out.push(1); // final stored block
    let len = data.len() as u16;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// `with_shard` (PyTorch's DistributedSampler): the ranks' shares of an epoch never overlap,
/// cover it (padded to a multiple of the world by repeating its start), and batch k of all
/// ranks together is batch k of one loader with a world-times larger batch.
#[test]
fn shards_split_each_epoch_without_overlap() {
    let ds = || -> Arc<dyn Dataset> {
        let x = Tensor::arange(0.0, 10.0, 1.0, might::DType::F32).unwrap();
        let y = Tensor::arange(0.0, 10.0, 1.0, might::DType::F32).unwrap();
        Arc::new(TensorDataset::new(x, y).unwrap())
    };
    for epoch in 0..3 {
        let whole = DataLoader::new(ds(), 4, true, false, 7).epoch_batches(epoch);
        let shards: Vec<Vec<Vec<usize>>> = (0..2)
            .map(|r| {
                DataLoader::new(ds(), 2, true, false, 7)
                    .with_shard(r, 2)
                    .epoch_batches(epoch)
            })
            .collect();
        assert_eq!(shards[0].len(), 3);
        for (k, batch) in whole.iter().enumerate() {
            let mut both: Vec<usize> = shards[0][k].iter().chain(&shards[1][k]).copied().collect();
            let mut want = batch.clone();
            both.sort();
            want.sort();
            assert_eq!(both, want, "epoch {epoch} batch {k}");
        }
        let a: HashSet<usize> = shards[0].concat().into_iter().collect();
        let b: HashSet<usize> = shards[1].concat().into_iter().collect();
        assert!(a.is_disjoint(&b));
        assert_eq!(a.len() + b.len(), 10);
    }
    // 10 samples over 3 ranks: 4 each, the first two repeated, every sample present
    let parts: Vec<Vec<usize>> = (0..3)
        .map(|r| {
            DataLoader::new(ds(), 8, true, false, 1)
                .with_shard(r, 3)
                .epoch_order(0)
        })
        .collect();
    assert!(parts.iter().all(|p| p.len() == 4));
    let all: HashSet<usize> = parts.concat().into_iter().collect();
    assert_eq!(all.len(), 10);
    let outside = DataLoader::new(ds(), 2, false, false, 0).with_shard(5, 2);
    assert!(outside.is_empty());
}
