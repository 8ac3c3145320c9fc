//! Output that never panics. `println!`/`print!`/`eprintln!` in this crate are the macros of
//! `main.rs`, which write through these functions: a closed stdout (`might … | head -1`)
//! does not panic, it sets a flag the long commands check to stop quietly (after saving what
//! they finished), as Unix tools do.

use std::io::{ErrorKind, IsTerminal, Write};
use std::sync::atomic::{AtomicU8, Ordering};

/// 0: stdout open; 1: closed by the reader (broken pipe); 2: another write error.
static STDOUT: AtomicU8 = AtomicU8::new(0);

fn write_out(s: &str) {
    if STDOUT.load(Ordering::Relaxed) != 0 {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        let code = if e.kind() == ErrorKind::BrokenPipe {
            1
        } else {
            2
        };
        STDOUT.store(code, Ordering::Relaxed);
        if code == 2 {
            err(&format!("error: writing to stdout: {e}\n"));
        }
    }
}

/// Print `s` on stdout (no newline added).
pub fn out(s: &str) {
    write_out(s)
}

/// Print a line on stdout.
pub fn out_line(s: &str) {
    let mut line = String::with_capacity(s.len() + 1);
    line.push_str(s);
    line.push('\n');
    write_out(&line)
}

/// Print on stderr, ignoring errors (a closed stderr is no reason to stop).
pub fn err(s: &str) {
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}

pub fn err_line(s: &str) {
    err(&format!("{s}\n"))
}

/// Whether stdout can no longer be written (its reader went away or the write failed).
pub fn stdout_closed() -> bool {
    STDOUT.load(Ordering::Relaxed) != 0
}

/// Whether the last stdout write failed for another reason than a closed pipe (exit 1).
pub fn stdout_failed() -> bool {
    STDOUT.load(Ordering::Relaxed) == 2
}

/// Whether stderr is a terminal (the progress bar shows; else plain progress lines).
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}
