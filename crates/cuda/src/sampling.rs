//! The per-row parameters of the sampling kernel (kernels/sampling.cu), laid out as its
//! `SampleParams` struct.

use ferrite_engine::DeviceSampling;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SampleParams {
    pub temperature: f32,
    pub top_p: f32,
    pub min_p: f32,
    /// 0 disables top-k.
    pub top_k: i32,
    pub seed: u64,
    pub counter: u64,
}

impl From<DeviceSampling> for SampleParams {
    fn from(s: DeviceSampling) -> Self {
        SampleParams {
            temperature: s.temperature,
            top_p: s.top_p,
            min_p: s.min_p,
            top_k: s.top_k.min(i32::MAX as u32) as i32,
            seed: s.seed,
            counter: s.counter,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_cuda_struct() {
        // float, float, float, int, u64, u64: 32 bytes, the u64s 8-aligned at 16 and 24.
        assert_eq!(std::mem::size_of::<SampleParams>(), 32);
        assert_eq!(std::mem::align_of::<SampleParams>(), 8);
        let p = SampleParams {
            seed: 1,
            ..Default::default()
        };
        let base = &p as *const _ as usize;
        assert_eq!(&p.top_k as *const _ as usize - base, 12);
        assert_eq!(&p.seed as *const _ as usize - base, 16);
        assert_eq!(&p.counter as *const _ as usize - base, 24);
    }
}
