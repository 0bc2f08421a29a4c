//! How weight files are mapped into memory.
//!
//! Every weight file is mapped read-only: tensors are views of the page cache, a load costs no
//! copy, and processes serving the same file share one copy. A CPU decode step reads every
//! weight once, so its speed is the rate at which memory streams them. In 4 KiB pages every
//! 4 KiB costs a TLB entry and the hardware prefetchers stop at each page's end; in 2 MiB
//! pages (transparent huge pages) the stream runs faster where it is scattered. Measured on
//! this project's 2-core Zen 4 machine (2026-12-05, docs/performance.md): a plain read of
//! 512 MiB 30.5 -> 35.5 GB/s on two threads; int8 decode of a Q4_K_M mixture of experts, whose
//! token reads 8 of 64 experts' 0.3 MB matrices per layer, 86.8 -> 95.1 tok/s; a dense 1.5B
//! the same within noise.
//!
//! Linux maps a file in 2 MiB pages where its page cache holds 2 MiB folios, which it allocates
//! when a mapping advised `MADV_HUGEPAGE` faults in pages not cached yet (on file systems with
//! large folios). A file already cached in 4 KiB pages (just downloaded or copied) stays in
//! them, so [`MapPages::Huge`] probes one 2 MiB span: if it comes out in small pages, the span
//! is dropped from the cache and read again; if that gives a 2 MiB page, the whole file is
//! dropped and read again (once: the 2 MiB folios stay cached for later starts), else nothing
//! more is done. What the kernel mapped is read from `/proc/self/smaps` (`FilePmdMapped`).

use std::fs::File;
use std::io;
use std::path::Path;

use memmap2::Mmap;

/// The pages a weight file is mapped in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapPages {
    /// A plain mapping (4 KiB pages, unless the page cache already holds 2 MiB folios).
    #[default]
    Plain,
    /// 2 MiB pages where the kernel provides them (for weights the CPU streams every step).
    Huge,
}

/// What a [`MapPages::Huge`] mapping came out as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HugeOutcome {
    /// The file's cached pages were already 2 MiB (or were read in as such).
    AlreadyHuge,
    /// The file was cached in 4 KiB pages; it was dropped from the cache and read again.
    Reread,
    /// The mapping stays in 4 KiB pages, for this reason.
    Unavailable(&'static str),
}

/// Maps `file` (opened from `path`) read-only, in the pages `pages` asks for.
pub fn map_file(path: &Path, file: &File, pages: MapPages) -> io::Result<Mmap> {
    // SAFETY: a read-only map; like every mmap-based loader we rely on the weight file not
    // being truncated or rewritten while it is served.
    let map = unsafe { Mmap::map(file) }?;
    if pages == MapPages::Huge {
        let started = std::time::Instant::now();
        let outcome = settle_huge(&map, file, path);
        tracing::info!(
            file = %path.display(),
            ?outcome,
            seconds = started.elapsed().as_secs_f64(),
            "weights mapped for 2 MiB pages"
        );
    }
    Ok(map)
}

const HUGE_PAGE: usize = 2 << 20;
/// 2 MiB spans of a file probed for how the page cache holds it.
const PROBES: usize = 16;
/// Bytes read in per progress update when a file is read again.
#[cfg(target_os = "linux")]
const POPULATE_STEP: usize = 64 << 20;

#[cfg(not(target_os = "linux"))]
fn settle_huge(_map: &Mmap, _file: &File, _path: &Path) -> HugeOutcome {
    HugeOutcome::Unavailable("huge pages for mapped files are Linux-only here")
}

#[cfg(target_os = "linux")]
fn settle_huge(map: &Mmap, file: &File, path: &Path) -> HugeOutcome {
    use memmap2::{Advice, UncheckedAdvice};

    if std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[never]"))
    {
        return HugeOutcome::Unavailable("transparent huge pages are disabled (never)");
    }
    let base = map.as_ptr() as usize;
    // The 2 MiB spans of the map at 2 MiB-aligned addresses. A 2 MiB page needs the address
    // and the file offset aligned alike; Linux aligns a large file mapping, and where it did
    // not, every probe below comes back small and nothing is read again.
    let first = base.next_multiple_of(HUGE_PAGE) - base;
    let spans = map.len().saturating_sub(first) / HUGE_PAGE;
    if spans == 0 {
        return HugeOutcome::Unavailable("no aligned 2 MiB span in the file");
    }
    if map.advise(Advice::HugePage).is_err() {
        return HugeOutcome::Unavailable("madvise(MADV_HUGEPAGE) was refused");
    }
    // A sample of spans spread over the file: where the page cache holds the file, reads ramp
    // up from small folios at its start, so one probe at the start would mislead.
    let sample: Vec<usize> = (0..PROBES.min(spans))
        .map(|i| first + (i * spans / PROBES.min(spans)) * HUGE_PAGE)
        .collect();
    let huge_spans = |offsets: &[usize]| -> Option<usize> {
        offsets.iter().for_each(|&at| touch(map, at));
        pmd_mapped_kib(base).map(|kib| (kib / (HUGE_PAGE as u64 >> 10)) as usize)
    };
    match huge_spans(&sample) {
        None => return HugeOutcome::Unavailable("/proc/self/smaps is unreadable"),
        Some(huge) if 2 * huge >= sample.len() => return HugeOutcome::AlreadyHuge,
        Some(_) => {}
    }
    // Mostly small pages: does a span read again come back in a 2 MiB page?
    let probe = sample[sample.len() / 2];
    // SAFETY (all three): a read-only shared file mapping; dropped pages are read from the
    // file again on the next access, with the same bytes.
    let _ = unsafe { map.unchecked_advise(UncheckedAdvice::DontNeed) };
    drop_cached(file, probe, HUGE_PAGE);
    if huge_spans(&[probe]).unwrap_or(0) == 0 {
        return HugeOutcome::Unavailable(
            "the file's pages stay 4 KiB when read again (no large folios on this file \
             system, or another process holds them)",
        );
    }
    tracing::info!(
        file = %path.display(),
        gib = map.len() as f64 / (1u64 << 30) as f64,
        "the weights are cached in 4 KiB pages: reading them again into 2 MiB pages"
    );
    let _ = unsafe { map.unchecked_advise(UncheckedAdvice::DontNeed) };
    drop_cached(file, 0, 0);
    // Read it all now, not during the first request, in steps that show progress.
    use hf_hub::api::Progress;
    let mut progress = crate::progress::FileProgress::reading();
    progress.init(map.len(), &path.display().to_string());
    for start in (0..map.len()).step_by(POPULATE_STEP) {
        let len = POPULATE_STEP.min(map.len() - start);
        let _ = map.advise_range(Advice::PopulateRead, start, len);
        progress.update(len);
    }
    progress.finish();
    HugeOutcome::Reread
}

/// Faults in the page at `offset`.
#[cfg(target_os = "linux")]
fn touch(map: &Mmap, offset: usize) {
    // SAFETY: `offset` is inside the map.
    unsafe { std::ptr::read_volatile(map.as_ptr().add(offset)) };
}

/// Drops the file's clean, unmapped cached pages in `offset..offset + len` (0 = to the end).
#[cfg(target_os = "linux")]
fn drop_cached(file: &File, offset: usize, len: usize) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on an open descriptor; it only advises the page cache.
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        )
    };
}

/// `FilePmdMapped` (KiB of the file mapped in 2 MiB pages) of this process's mapping that
/// contains `address`, from `/proc/self/smaps`.
#[cfg(target_os = "linux")]
fn pmd_mapped_kib(address: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    smaps_field(&smaps, address, "FilePmdMapped:")
}

/// The `field` of the smaps entry whose address range contains `address`.
fn smaps_field(smaps: &str, address: usize, field: &str) -> Option<u64> {
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((start, end)) = range.split_once('-') {
                if let (Ok(start), Ok(end)) = (
                    usize::from_str_radix(start, 16),
                    usize::from_str_radix(end, 16),
                ) {
                    inside = (start..end).contains(&address);
                    continue;
                }
            }
        }
        if inside {
            if let Some(rest) = line.strip_prefix(field) {
                return rest.trim().trim_end_matches("kB").trim().parse().ok();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
