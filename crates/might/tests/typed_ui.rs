//! What must not build: each `typed_ui/*.rs` is a misuse of `might::typed`, and its `.stderr`
//! pins the message rustc prints for it. Regenerate after a toolchain or message change with
//! `TRYBUILD=overwrite cargo test -p might --test typed_ui`, then read the diff.
//!
//! `ok.rs` must build. Besides checking that correct typed code compiles, having a passing
//! case makes trybuild run `cargo build` instead of `cargo check` for every case: the conv,
//! pool, reshape and flatten size checks are `const { assert }` blocks evaluated at
//! monomorphization, which `cargo check` never reaches.
//!
//! Cost (2 cores): trybuild builds `might` and its dependencies again in its own target dir
//! (`target/tests/trybuild`, default dev profile, here without debug info). From a clean
//! target that is ~7 min once; after a change to `might` ~100 s (might itself); otherwise ~4 s.

#[test]
fn typed_misuse_is_a_compile_error() {
    // trybuild builds `might` again in its own target dir (target/tests/trybuild) with the
    // default dev profile; without debug info that build is faster and the messages are the
    // same. (This test is the only one in its binary, so setting the variable is race-free.)
    std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "0");
    let t = trybuild::TestCases::new();
    t.pass("tests/typed_ui/ok.rs");
    t.compile_fail("tests/typed_ui/matmul_inner_dims.rs");
    t.compile_fail("tests/typed_ui/bias_size.rs");
    t.compile_fail("tests/typed_ui/reshape_count.rs");
    t.compile_fail("tests/typed_ui/conv_output_size.rs");
    t.compile_fail("tests/typed_ui/conv_channels.rs");
    t.compile_fail("tests/typed_ui/flatten_count.rs");
    t.compile_fail("tests/typed_ui/linear_input.rs");
}
