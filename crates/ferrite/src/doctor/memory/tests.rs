use super::*;
use crate::doctor::report::Status;

fn need() -> Need {
    Need {
        weights: 100 << 20,
        kv_per_token: 1 << 10,
        state: 0,
        tokens: 8192,
        reserve: 0,
    }
}

fn budget(bytes: u64, free: Option<u64>) -> Budget {
    Budget {
        bytes,
        free,
        what: "--memory".into(),
    }
}

#[test]
fn the_total_is_weights_kv_state_and_reserve() {
    let n = Need {
        state: 5,
        reserve: 7,
        ..need()
    };
    assert_eq!(n.total(), (100 << 20) + 8192 * 1024 + 5 + 7);
}

#[test]
fn a_model_that_fits_is_ok_and_shows_the_parts() {
    let c = check(&need(), &budget(1 << 30, None));
    assert_eq!(c.status, Status::Ok);
    assert!(
        c.message
            .contains("weights 100.0 MiB + K/V of 8192 tokens 8.0 MiB"),
        "{}",
        c.message
    );
}

#[test]
fn too_large_is_an_error_that_says_which_context_fits() {
    // 104 MiB: the weights and 4 MiB of K/V, 4096 tokens.
    let c = check(&need(), &budget(104 << 20, None));
    assert_eq!(c.status, Status::Error);
    assert!(c.message.starts_with("too large"), "{}", c.message);
    assert!(c.fix.unwrap().contains("--max-model-len 4096"));
    let c = check(&need(), &budget(50 << 20, None));
    assert!(c.fix.unwrap().contains("the weights alone do not fit"));
}

#[test]
fn fitting_the_device_but_not_what_is_free_is_a_warning() {
    let c = check(&need(), &budget(1 << 30, Some(50 << 20)));
    assert_eq!(c.status, Status::Warning);
    assert!(c.message.contains("only 50.0 MiB is free"), "{}", c.message);
}

#[test]
fn meminfo_is_read_in_bytes() {
    let text = "MemTotal:       16384 kB\nMemFree:  100 kB\nMemAvailable:    8192 kB\n";
    assert_eq!(meminfo(text), Some((16384 * 1024, Some(8192 * 1024))));
    assert_eq!(meminfo("MemFree: 1 kB\n"), None);
}

#[test]
fn sizes_read_as_people_write_them() {
    assert_eq!(human(3 << 29), "1.50 GiB");
    assert_eq!(human(96 << 20), "96.0 MiB");
}

#[test]
fn cuda_widens_what_its_kernels_do_not_read() {
    use ferrite_model::weights::Storage;
    use std::sync::Arc;
    let tensor = |dtype: DType, shape: Vec<usize>, bytes: usize| WeightTensor {
        dtype,
        shape,
        storage: Storage::Owned(Arc::new(vec![0; bytes])),
    };
    let f32_matrix = tensor(DType::F32, vec![4, 256], 4 * 256 * 4);
    assert_eq!(device_bytes(&f32_matrix, Device::Cpu), 4096);
    assert_eq!(device_bytes(&f32_matrix, Device::Cuda), 2048);
    let norm = tensor(DType::F32, vec![256], 1024);
    assert_eq!(device_bytes(&norm, Device::Cuda), 1024);
    let q4k = tensor(DType::Q4_K, vec![4, 256], 4 * 144);
    assert_eq!(device_bytes(&q4k, Device::Cuda), 4 * 144);
}
