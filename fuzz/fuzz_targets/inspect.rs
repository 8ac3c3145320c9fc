//! Format sniffing + header-only listing (`might inspect`): any bytes give `Ok` or a clean
//! `Err`; and whatever `inspect` accepts, the full loader must not panic on either.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if might::io::inspect_bytes(data).is_ok() {
        let _ = might::io::safetensors::load_from_bytes(data);
        let _ = might::io::npy::load_from_bytes(data);
        let _ = might::io::npz::load_from_bytes(data);
        let _ = might::io::pt::load_from_bytes(data);
    }
});
