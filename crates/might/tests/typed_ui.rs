//! What must not build: each `typed_ui/*.rs` is a misuse of `might::typed`, and its `.stderr`
//! pins the message rustc prints for it. Regenerate after a toolchain or message change with
//! `TRYBUILD=overwrite cargo test -p might --test typed_ui`, then read the diff.
//!
//! `ok.rs` must build. Besides checking that correct typed code compiles, having a passing
//! case makes trybuild run `cargo build` instead of `cargo check` for every case: the conv,
//! pool, reshape and flatten size checks are `const { assert }` blocks evaluated at
//! monomorphization, which `cargo check` never reaches.

#[test]
fn typed_misuse_is_a_compile_error() {
    let t = trybuild::TestCases::new();
    t.pass("tests/typed_ui/ok.rs");
    t.compile_fail("tests/typed_ui/matmul_inner_dims.rs");
    t.compile_fail("tests/typed_ui/bias_size.rs");
    t.compile_fail("tests/typed_ui/reshape_count.rs");
    t.compile_fail("tests/typed_ui/conv_output_size.rs");
    t.compile_fail("tests/typed_ui/conv_channels.rs");
    t.compile_fail("tests/typed_ui/flatten_count.rs");
}
