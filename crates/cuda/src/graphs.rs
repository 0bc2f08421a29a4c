//! CUDA graphs of the decode step: one per batch size of a ladder (1, 2, 4, 8, then steps of
//! 8 up to max_num_seqs, capped by --cuda-graph-max-bs). A decode batch is padded up to the
//! next captured size and replayed: one launch instead of hundreds.

use std::time::Instant;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaStream};

/// The captured sizes for `max_num_seqs` sequences, none above `max_bs`.
pub fn ladder(max_num_seqs: usize, max_bs: usize) -> Vec<usize> {
    let top = max_num_seqs.min(max_bs);
    let mut sizes: Vec<usize> = [1, 2, 4, 8].into_iter().filter(|&s| s <= top).collect();
    sizes.extend((16..=top).step_by(8));
    if top > 0 && sizes.last() != Some(&top) {
        sizes.push(top);
    }
    sizes
}

pub struct DecodeGraphs {
    /// Ascending batch size.
    graphs: Vec<(usize, CudaGraph)>,
}

/// What capturing took, for the start-up log.
#[derive(Debug, Clone, Copy)]
pub struct CaptureReport {
    pub graphs: usize,
    pub seconds: f64,
    pub bytes: usize,
}

impl DecodeGraphs {
    pub fn none() -> Self {
        DecodeGraphs { graphs: Vec::new() }
    }

    /// Captures `body(bs, true)` for every size of `sizes`. `body` enqueues a whole padded
    /// decode step of `bs` sequences on `stream` (and, when not capturing, first uploads its
    /// metadata); it runs once eagerly, `body(bs, false)`, so that libraries finish their lazy
    /// set-up (module loads, allocations) outside the capture.
    pub fn capture(
        stream: &std::sync::Arc<CudaStream>,
        sizes: &[usize],
        free_memory: impl Fn() -> usize,
        mut body: impl FnMut(usize, bool) -> anyhow::Result<()>,
    ) -> anyhow::Result<(DecodeGraphs, CaptureReport)> {
        let started = Instant::now();
        let free_before = free_memory();
        let mut graphs = Vec::with_capacity(sizes.len());
        for &bs in sizes {
            body(bs, false)?;
            stream.synchronize()?;
            stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
            let captured = body(bs, true);
            let graph = stream.end_capture(CUgraphInstantiate_flags(0));
            captured.map_err(|e| anyhow::anyhow!("capturing the decode step of {bs}: {e}"))?;
            let graph = graph?
                .ok_or_else(|| anyhow::anyhow!("capture of batch size {bs} recorded nothing"))?;
            graph.upload()?;
            graphs.push((bs, graph));
        }
        stream.synchronize()?;
        let report = CaptureReport {
            graphs: graphs.len(),
            seconds: started.elapsed().as_secs_f64(),
            bytes: free_before.saturating_sub(free_memory()),
        };
        Ok((DecodeGraphs { graphs }, report))
    }

    /// The smallest captured size that holds `n` sequences.
    pub fn size_for(&self, n: usize) -> Option<usize> {
        self.graphs.iter().map(|(bs, _)| *bs).find(|&bs| bs >= n)
    }

    pub fn launch(&self, bs: usize) -> anyhow::Result<()> {
        let (_, graph) = self
            .graphs
            .iter()
            .find(|(size, _)| *size == bs)
            .ok_or_else(|| anyhow::anyhow!("no graph of batch size {bs}"))?;
        Ok(graph.launch()?)
    }

    pub fn sizes(&self) -> Vec<usize> {
        self.graphs.iter().map(|(bs, _)| *bs).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::ladder;

    #[test]
    fn ladder_doubles_to_8_then_steps_by_8_and_respects_both_caps() {
        assert_eq!(
            ladder(64, 512),
            vec![1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
        );
        assert_eq!(ladder(256, 32), vec![1, 2, 4, 8, 16, 24, 32]);
        assert_eq!(ladder(3, 512), vec![1, 2, 3]);
        assert_eq!(ladder(20, 512), vec![1, 2, 4, 8, 16, 20]);
        assert!(ladder(0, 512).is_empty());
    }
}
