//! Any bytes must give `Ok` or a clean `Err`: no panic, no huge allocation.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = might::io::npy::load_from_bytes(data);
});
