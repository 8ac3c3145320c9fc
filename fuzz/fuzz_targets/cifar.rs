//! CIFAR-10 binary records (label byte + 3072 pixels each), then one batch through the
//! dataset: `Ok` or a clean `Err`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use might::data::Dataset;

fuzz_target!(|data: &[u8]| {
    if let Ok(ds) = might::data::Cifar10::from_records(data) {
        if !ds.is_empty() {
            let _ = ds.get_batch(&[0, ds.len() - 1]);
        }
    }
});
