//! Any bytes must give `Ok` or a clean `Err`. The input is used twice: as a whole archive, and
//! as a `data.pkl` pickle wrapped in a valid archive (so the pickle VM is reached directly).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = might::io::pt::load_from_bytes(data);
    let entries = vec![
        ("archive/data.pkl".to_string(), data.to_vec()),
        ("archive/data/0".to_string(), vec![0u8; 64]),
    ];
    if let Ok(zip) = might::io::write_zip_stored(&entries) {
        let _ = might::io::pt::load_from_bytes(&zip);
    }
});
