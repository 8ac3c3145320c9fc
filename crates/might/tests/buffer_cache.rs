//! The buffer cache (its own test binary: it changes process-wide cache settings, so no other
//! test may run beside it).

use might::{DType, Result, Tensor};

/// The buffer cache reuses a freed float buffer for the next output of the same length, keeps
/// it only while enabled, and gives everything back on `empty_cache`.
#[test]
fn buffer_cache_reuses_and_can_be_disabled() -> Result<()> {
    let n = 99_991; // a length no other test uses
    let x = Tensor::ones([n], DType::F32)?;
    let y = x.mul_scalar(2.0)?; // asks the cache for an n-float buffer (a miss)
    drop(y); // kept: a kernel asked for this length
    assert!(might::buffer_cache_bytes() >= n * 4);
    let z = x.mul_scalar(3.0)?; // reuses it: stale contents fully overwritten
    assert!(z.to_vec::<f32>()?.iter().all(|&v| v == 3.0));
    might::set_buffer_cache_limit(0); // disabled: frees what it holds and keeps nothing
    drop(z);
    assert_eq!(might::buffer_cache_bytes(), 0);
    might::set_buffer_cache_limit(512 << 20);
    might::empty_cache();
    Ok(())
}
