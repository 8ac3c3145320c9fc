//! Checks of flag values made before any work: thread counts, learning rates, and the memory
//! a model, a batch or an output would need against the budget (`might::limits`).

use std::time::{Duration, Instant};

use might::limits::{human_bytes, memory_limit};

use crate::train::{CliError, Res};

/// The environment variable that lets `--threads` exceed the machine's cores.
pub const FORCE_THREADS_ENV: &str = "MIGHT_FORCE_THREADS";

/// Apply `--threads`: 0 is an error; more than the available cores is capped with a warning
/// (oversubscribed kernel threads spin against each other: 64 threads on 2 cores run ~900x
/// slower) unless `MIGHT_FORCE_THREADS=1`.
pub fn apply_threads(threads: Option<usize>) -> Res<()> {
    let Some(t) = threads else {
        return Ok(());
    };
    if t == 0 {
        return Err(CliError("--threads must be at least 1, got 0".into()));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let forced = std::env::var(FORCE_THREADS_ENV).is_ok_and(|v| v == "1");
    let t = if t > cores && !forced {
        eprintln!(
            "warning: --threads {t} is more than the {cores} available cores; using {cores} (set {FORCE_THREADS_ENV}=1 to force)"
        );
        cores
    } else {
        t
    };
    might::set_num_threads(t);
    Ok(())
}

/// A positive finite number for `flag`.
pub fn positive(flag: &str, v: f64) -> Res<()> {
    if v > 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(CliError(format!(
            "{flag} must be a positive finite number, got {v}"
        )))
    }
}

/// A finite number in `[lo, hi)` (or `[lo, hi]` with `closed`) for `flag`.
pub fn in_range(flag: &str, v: f64, lo: f64, hi: f64, closed: bool) -> Res<()> {
    let ok = v.is_finite() && v >= lo && if closed { v <= hi } else { v < hi };
    if ok {
        Ok(())
    } else {
        Err(CliError(format!(
            "{flag} must be in [{lo}, {hi}{}, got {v}",
            if closed { "]" } else { ")" }
        )))
    }
}

/// Refuse a plan that needs `bytes` (`what`, caused by `flags`) when it exceeds the budget.
pub fn fits(flags: &str, what: &str, bytes: u128) -> Res<()> {
    let limit = memory_limit() as u128;
    if bytes > limit {
        return Err(CliError(format!(
            "{flags}: {what} would need {}, more than the {} memory budget (available memory, or --memory-limit)",
            human_bytes(bytes),
            human_bytes(limit)
        )));
    }
    Ok(())
}

/// `--memory-limit`: `4G`, `512M`, `1.5GiB`, `2000000` (bytes).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: f64 = n
        .parse()
        .map_err(|_| format!("expected a size such as 4G or 512M, got {s:?}"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0f64.powi(4),
        u => return Err(format!("unknown unit {u:?} (use K, M, G or T)")),
    };
    let b = n * mult;
    if !(b.is_finite() && b >= 1.0 && b < u64::MAX as f64) {
        return Err(format!("expected a positive size, got {s:?}"));
    }
    Ok(b as u64)
}

/// Plain progress lines on stderr every `every` seconds when stderr is not a terminal (logs,
/// CI, `nohup`): the progress bar only draws on a terminal.
pub struct Ticker {
    every: Option<Duration>,
    last: Instant,
}

impl Ticker {
    pub fn new(every_secs: f64) -> Ticker {
        let plain = !crate::term::stderr_is_terminal();
        Ticker {
            every: plain.then(|| Duration::from_secs_f64(every_secs)),
            last: Instant::now(),
        }
    }
    /// A ticker that never prints.
    pub fn off() -> Ticker {
        Ticker {
            every: None,
            last: Instant::now(),
        }
    }
    /// Print `line()` when the interval has passed since the last line.
    pub fn tick(&mut self, line: impl FnOnce() -> String) {
        if let Some(every) = self.every {
            if self.last.elapsed() >= every {
                self.last = Instant::now();
                eprintln!("{}", line());
            }
        }
    }
}
