//! PNG / JPEG bytes through the image decoder the ImageFolder dataset uses, gray and RGB,
//! with and without a resize: `Ok` or a clean `Err`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let size = data.first().map(|&b| (1 + (b as usize & 63), 1 + (b as usize >> 2)));
    let _ = might::data::image_folder::decode_image(data, false, None);
    let _ = might::data::image_folder::decode_image(data, true, size);
});
