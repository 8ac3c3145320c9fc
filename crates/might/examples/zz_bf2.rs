use might::{DType, MatmulPrecision, Tensor};
fn main() {
    might::set_num_threads(1);
    might::set_float32_matmul_precision(MatmulPrecision::Medium);
    let a = Tensor::randn([1024,1024], DType::F32).unwrap();
    let b = Tensor::randn([1024,1024], DType::F32).unwrap();
    for _ in 0..100 { a.matmul(&b).unwrap(); }
}
