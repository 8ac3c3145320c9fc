use might::{DType, MatmulPrecision, Tensor};
use std::time::Instant;
fn t(f: &dyn Fn()) -> f64 {
    f(); f();
    let mut v = vec![];
    for _ in 0..7 { let t0 = Instant::now(); for _ in 0..5 { f(); } v.push(t0.elapsed().as_secs_f64() / 5.0); }
    v.sort_by(f64::total_cmp); v[3]
}
fn main() {
    let th: usize = std::env::var("T").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    might::set_num_threads(th);
    // (m, k, n, transpose a, transpose b)
    let shapes = [(1024,1024,1024,false,false),(2048,2048,2048,false,false),(1024,128,384,false,true),(1024,128,512,false,true),(1024,512,128,false,true),(1024,384,128,false,false),(1024,128,512,false,false),(384,1024,128,true,false),(512,1024,128,true,false),(128,1024,512,true,false),(1024,128,65,false,true),(64,784,128,false,true),(4096,768,3072,false,false)];
    for (m,k,n,ta,tb) in shapes {
        let a = if ta { Tensor::randn([k,m], DType::F32).unwrap().t().unwrap() } else { Tensor::randn([m,k], DType::F32).unwrap() };
        let b = if tb { Tensor::randn([n,k], DType::F32).unwrap().t().unwrap() } else { Tensor::randn([k,n], DType::F32).unwrap() };
        let mut r = vec![];
        for p in [MatmulPrecision::Highest, MatmulPrecision::Medium] {
            might::set_float32_matmul_precision(p);
            let s = t(&|| { a.matmul(&b).unwrap(); });
            r.push(2.0*(m*k*n) as f64/s/1e9);
        }
        println!("{m}x{k}x{n} ta={ta} tb={tb}: f32 {:.1}  bf16 {:.1} GFLOP/s", r[0], r[1]);
    }
}
