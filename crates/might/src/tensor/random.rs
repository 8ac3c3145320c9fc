//! A small, seedable, reproducible random generator (xoshiro256++ seeded by SplitMix64).
//! Results are identical on every platform and thread count for a given seed.

use std::sync::Mutex;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generator {
    s: [u64; 4],
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Generator {
    pub fn new(seed: u64) -> Self {
        let mut st = seed;
        Generator {
            s: [
                splitmix(&mut st),
                splitmix(&mut st),
                splitmix(&mut st),
                splitmix(&mut st),
            ],
        }
    }

    /// The full internal state (for checkpoints).
    pub fn state(&self) -> [u64; 4] {
        self.s
    }
    pub fn from_state(s: [u64; 4]) -> Self {
        Generator { s }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, 1) with 24 random bits.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// Standard normal (Box-Muller).
    pub fn next_normal(&mut self) -> f64 {
        loop {
            let u1 = self.next_f64();
            if u1 > 0.0 {
                let u2 = self.next_f64();
                return (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            }
        }
    }

    /// Uniform integer in [0, n) without modulo bias; `n = 0` stands for 2^64 (any `u64`),
    /// the modular reading of an empty bound, rather than a division by zero.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return self.next_u64();
        }
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let v = self.next_u64();
            if v < zone {
                return v % n;
            }
        }
    }

    /// A random permutation of 0..n (Fisher-Yates).
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.below(i as u64 + 1) as usize;
            p.swap(i, j);
        }
        p
    }
}

static GLOBAL: Mutex<Option<Generator>> = Mutex::new(None);

const DEFAULT_SEED: u64 = 0x0005_EED0_FA11;

/// Seed the global generator used by `rand`, `randn`, `rand_int`, layer initialisation and
/// dropout (like `torch.manual_seed`).
pub fn manual_seed(seed: u64) {
    *GLOBAL.lock().unwrap() = Some(Generator::new(seed));
}

/// Run `f` with the global generator.
pub fn with_global<R>(f: impl FnOnce(&mut Generator) -> R) -> R {
    // (a panic elsewhere while it was held leaves a generator that is still valid)
    let mut g = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(|| Generator::new(DEFAULT_SEED)))
}

/// Snapshot / restore of the global generator (checkpoints).
pub fn global_state() -> [u64; 4] {
    with_global(|g| g.state())
}
pub fn set_global_state(s: [u64; 4]) {
    *GLOBAL.lock().unwrap() = Some(Generator::from_state(s));
}
