//! The page's models run natively, for the browser figures' comparison (web/e2e.mjs prints
//! the in-browser ones): ms per digit (one 28x28 image, as the page classifies) and greedy
//! characters per second (four at a time, as the page asks).
//!
//!     cargo run --release -p might-web --example native_speed [-- THREADS]

use std::time::Instant;

use might_web::{DigitClassifier, TextGenerator};

fn main() -> might::Result<()> {
    if let Some(n) = std::env::args().nth(1).and_then(|a| a.parse().ok()) {
        might::set_num_threads(n);
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../web/models/");
    let read = |f: &str| std::fs::read(format!("{dir}{f}")).expect("web/models");
    let clf = DigitClassifier::from_checkpoint(&read("mnist-cnn.safetensors"))?;
    let x: Vec<f32> = (0..784).map(|i| ((i * 37) % 11) as f32 / 10.0).collect();
    for _ in 0..20 {
        clf.probabilities(&x)?;
    }
    let n = 500;
    let t = Instant::now();
    for _ in 0..n {
        clf.probabilities(&x)?;
    }
    let ms = t.elapsed().as_secs_f64() * 1e3 / n as f64;
    let mut text = TextGenerator::from_checkpoint(&read("gpt.safetensors"))?;
    text.start("ROMEO:", 0.0, 0, 0)?;
    let t = Instant::now();
    let mut chars = 0;
    while chars < 400 {
        chars += text.next(4)?.chars().count();
    }
    let cps = chars as f64 / t.elapsed().as_secs_f64();
    println!(
        "native ({} threads): {ms:.3} ms per digit, {cps:.0} characters/s",
        might::get_num_threads()
    );
    Ok(())
}
