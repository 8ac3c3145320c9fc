//! The browser demo's models, natively: the committed page models (web/models) load, the
//! drawing pipeline turns redrawn MNIST test digits into inputs the CNN recognises, the
//! streamed GPT sample equals the library's `generate` and the fixture the browser test
//! compares with, and bad inputs are errors.

use std::path::PathBuf;

use might::data::mnist::Mnist;
use might::data::Dataset;
use might::models::generate::{generate, SampleConfig};
use might::models::{gpt_from_metadata, Gpt};
use might::optim::load_checkpoint_from_bytes;
use might::{DType, Generator};
use might_web::{mnist_input, DigitClassifier, TextGenerator, SIDE};

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(p)
}

fn read(p: &str) -> Vec<u8> {
    std::fs::read(repo(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn argmax(v: &[f32]) -> usize {
    (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap()
}

/// Test digit `i` in [0, 1], and its label.
fn test_digit(test: &Mnist, i: usize) -> (Vec<f32>, usize) {
    let (x, _) = test.get_batch(&[i]).unwrap();
    (x.to_vec::<f32>().unwrap(), test.labels()[i] as usize)
}

#[test]
fn the_page_model_recognises_test_digits_as_given_and_as_redrawn() {
    let clf = DigitClassifier::from_checkpoint(&read("web/models/mnist-cnn.safetensors")).unwrap();
    assert_eq!(clf.classes().len(), 10);
    let test = Mnist::load(repo("data/mnist"), false).unwrap();
    let n = 100;
    let (mut as_given, mut redrawn) = (0, 0);
    for i in 0..n {
        let (px, label) = test_digit(&test, i);
        let p = clf.probabilities(&px).unwrap();
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-4);
        as_given += (argmax(&p) == label) as usize;
        // as a pen would draw it: ink or no ink, 9x larger, off-centre on a 300x260 canvas
        let (w, h, s, ox, oy) = (300, 260, 9, 41 + i % 17, 3 + i % 11);
        let mut canvas = vec![0f32; w * h];
        for y in 0..SIDE * s {
            for x in 0..SIDE * s {
                if px[(y / s) * SIDE + x / s] >= 0.5 {
                    canvas[(y + oy) * w + x + ox] = 1.0;
                }
            }
        }
        let input = mnist_input(&canvas, w, h);
        redrawn += (argmax(&clf.probabilities(&input).unwrap()) == label) as usize;
    }
    // the float16 export keeps the trained accuracy (98.9 % on the whole test set)
    assert!(as_given >= 97, "{as_given}/{n} test digits as given");
    assert!(
        redrawn >= 95,
        "{redrawn}/{n} test digits redrawn as strokes"
    );
}

#[test]
fn mnist_input_normalises_size_and_position() {
    // a filled 60x100 rectangle anywhere on the canvas: scaled to 12x20, centred by mass
    let (w, h) = (400, 300);
    let mut canvas = vec![0f32; w * h];
    for y in 150..250 {
        for x in 300..360 {
            canvas[y * w + x] = 1.0;
        }
    }
    let img = mnist_input(&canvas, w, h);
    let rows: Vec<usize> = (0..SIDE)
        .filter(|&y| img[y * SIDE..(y + 1) * SIDE].iter().any(|&v| v > 0.0))
        .collect();
    let cols: Vec<usize> = (0..SIDE)
        .filter(|&x| (0..SIDE).any(|y| img[y * SIDE + x] > 0.0))
        .collect();
    assert_eq!((rows.len(), cols.len()), (20, 12));
    assert_eq!((rows[0], cols[0]), (4, 8));
    assert!(img.iter().all(|&v| v == 0.0 || (v - 1.0).abs() < 1e-6));
    // nothing drawn, or nothing to draw on: an empty image, no panic
    assert!(mnist_input(&vec![0.0; 100], 10, 10)
        .iter()
        .all(|&v| v == 0.0));
    assert_eq!(mnist_input(&[], 0, 0).len(), SIDE * SIDE);
    assert_eq!(mnist_input(&[1.0; 3], 10, 10).len(), SIDE * SIDE);
}

#[test]
fn streamed_text_matches_generate_and_the_browser_fixture() {
    let bytes = read("web/models/gpt.safetensors");
    let mut text = TextGenerator::from_checkpoint(&bytes).unwrap();
    // greedy, four characters at a time as the page asks: the fixture the browser test uses
    text.start("ROMEO:", 0.0, 0, 0).unwrap();
    let mut got = String::from("ROMEO:");
    for _ in 0..50 {
        got += &text.next(4).unwrap();
    }
    let want = String::from_utf8(read("web/models/gpt-greedy.txt")).unwrap();
    assert_eq!(got, want);
    // sampled: the same draws as the library's generate with the same seed
    text.start("JULIET:", 0.8, 20, 7).unwrap();
    let streamed = text.next(120).unwrap();
    let mut ck = load_checkpoint_from_bytes(&bytes).unwrap();
    for (_, t) in ck.model.iter_mut() {
        *t = t.to_dtype(DType::F32).unwrap();
    }
    let (cfg, vocab) = gpt_from_metadata(&ck.extra).unwrap();
    let gpt = Gpt::from_tensors(cfg, &ck.model).unwrap();
    let sc = SampleConfig {
        temperature: 0.8,
        top_k: Some(20),
        top_p: None,
    };
    let ids = generate(
        &gpt,
        &vocab.encode("JULIET:").unwrap(),
        120,
        &sc,
        &mut Generator::new(7),
    )
    .unwrap();
    assert_eq!(streamed, vocab.decode(&ids));
    assert_eq!(streamed.chars().count(), 120);
}

#[test]
fn bad_files_and_calls_are_errors() {
    let cnn = read("web/models/mnist-cnn.safetensors");
    let gpt = read("web/models/gpt.safetensors");
    assert!(DigitClassifier::from_checkpoint(b"not a checkpoint").is_err());
    assert!(DigitClassifier::from_checkpoint(&cnn[..cnn.len() / 2]).is_err());
    let e = DigitClassifier::from_checkpoint(&gpt).err().unwrap();
    assert!(e.to_string().contains("chw"), "{e}");
    assert!(TextGenerator::from_checkpoint(&cnn).is_err());
    let clf = DigitClassifier::from_checkpoint(&cnn).unwrap();
    let e = clf.probabilities(&[0.0; 100]).unwrap_err();
    assert!(e.to_string().contains("784"), "{e}");
    let mut text = TextGenerator::from_checkpoint(&gpt).unwrap();
    assert!(text.next(3).is_err(), "next before start");
    let e = text.start("ROMEO€", 0.8, 0, 0).unwrap_err();
    assert!(e.to_string().contains("vocabulary"), "{e}");
    assert!(text.start("", 0.8, 0, 0).is_err());
    assert!(text.start("A", -1.0, 0, 0).is_err());
    assert!(text.vocabulary().contains('R'));
}
