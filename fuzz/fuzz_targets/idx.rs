//! IDX (MNIST) bytes, raw or gzip: `Ok` or a clean `Err`, never a panic or a huge allocation.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = might::data::idx::parse_idx(data) {
        let _ = a.into_u8();
    }
});
