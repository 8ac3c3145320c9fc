//! A module's state_dict survives a safetensors round trip into a fresh module, and strict
//! loading reports every problem at once.

use might::io::safetensors;
use might::nn::load_state_dict;
use might::nn::{Linear, Module, ReLU, Sequential};
use might::{DType, Tensor};

fn mlp() -> Sequential {
    Sequential::new()
        .add(Linear::new(4, 3, true).unwrap())
        .add(ReLU)
        .add(Linear::new(3, 2, true).unwrap())
}

#[test]
fn module_round_trip_through_safetensors() {
    might::manual_seed(1);
    let a = mlp();
    might::manual_seed(2);
    let b = mlp();
    let x = Tensor::randn([5, 4], DType::F32).unwrap();
    let ya = a.forward(&x).unwrap().to_vec::<f32>().unwrap();
    assert_ne!(ya, b.forward(&x).unwrap().to_vec::<f32>().unwrap());
    let names: Vec<String> = a.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
    let bytes = safetensors::save_to_bytes(&a.state_dict(), None).unwrap();
    let loaded = safetensors::load_from_bytes(&bytes).unwrap();
    let report = load_state_dict(&b, &loaded, true).unwrap();
    assert!(report.missing.is_empty() && report.unexpected.is_empty());
    assert_eq!(ya, b.forward(&x).unwrap().to_vec::<f32>().unwrap());

    // strict: one error naming the missing key, the unexpected key and the shape mismatch
    let mut bad: Vec<(String, Tensor)> =
        loaded.into_iter().filter(|(n, _)| n != "0.bias").collect();
    bad.push((
        "extra.weight".into(),
        Tensor::zeros([1], DType::F32).unwrap(),
    ));
    bad.retain(|(n, _)| n != "2.weight");
    bad.push((
        "2.weight".into(),
        Tensor::zeros([9, 9], DType::F32).unwrap(),
    ));
    let e = load_state_dict(&b, &bad, true).unwrap_err().to_string();
    assert!(
        e.contains("0.bias") && e.contains("extra.weight") && e.contains("2.weight"),
        "{e}"
    );
    // non-strict returns the lists
    let r = load_state_dict(&b, &bad[..2], false).unwrap();
    assert!(r.missing.contains(&"0.bias".to_string()));
}
