//! Per-device settings: the process-wide setters are the CPU device's, read back through
//! `Device` and through the free functions alike. (One test: the settings are global.)

use might::{Device, MatmulPrecision, Result, Tensor};

#[test]
fn cpu_settings_hang_off_the_device() -> Result<()> {
    let cpu = Device::Cpu;
    let threads = cpu.num_threads();
    assert!(threads >= 1);
    cpu.set_num_threads(3);
    assert_eq!(might::get_num_threads(), 3);
    might::set_num_threads(2);
    assert_eq!(cpu.num_threads(), 2);
    cpu.set_num_threads(0); // at least one thread
    assert_eq!(cpu.num_threads(), 1);
    cpu.set_num_threads(threads);

    assert_eq!(
        cpu.matmul_precision(),
        might::get_float32_matmul_precision()
    );
    cpu.set_matmul_precision(MatmulPrecision::Medium);
    assert_eq!(
        might::get_float32_matmul_precision(),
        MatmulPrecision::Medium
    );
    might::set_float32_matmul_precision(MatmulPrecision::Highest);
    assert_eq!(cpu.matmul_precision(), MatmulPrecision::Highest);

    // the buffer cache: freed outputs are kept for reuse, until emptied or capped
    cpu.set_cache_limit(64 << 20);
    drop(Tensor::ones([1 << 16], might::DType::F32)?.exp()?);
    assert!(cpu.cached_bytes() > 0, "a freed buffer is cached");
    assert_eq!(cpu.cached_bytes(), might::buffer_cache_bytes());
    cpu.empty_cache();
    assert_eq!(cpu.cached_bytes(), 0);
    cpu.set_cache_limit(0);
    drop(Tensor::ones([1 << 16], might::DType::F32)?.exp()?);
    assert_eq!(cpu.cached_bytes(), 0, "a zero cap disables the cache");
    Ok(())
}
