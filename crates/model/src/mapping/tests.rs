use super::*;

#[test]
fn smaps_field_reads_the_entry_that_holds_the_address() {
    let smaps = "\
55d0c0000000-55d0c0200000 r--p 00000000 fe:00 12 /usr/bin/x
Size:               2048 kB
FilePmdMapped:         0 kB
7f0000000000-7f0000800000 r--s 00000000 fe:00 34 /models/m.gguf
Size:               8192 kB
FilePmdMapped:      4096 kB
VmFlags: rd sh mr mw me ms hg
";
    assert_eq!(
        smaps_field(smaps, 0x7f0000400000, "FilePmdMapped:"),
        Some(4096)
    );
    assert_eq!(
        smaps_field(smaps, 0x55d0c0000010, "FilePmdMapped:"),
        Some(0)
    );
    assert_eq!(smaps_field(smaps, 0x7f0000800000, "FilePmdMapped:"), None);
    assert_eq!(smaps_field(smaps, 0x7f0000000000, "Size:"), Some(8192));
}

/// `FilePmdMapped` of the whole process, from smaps_rollup (not the per-mapping parser).
#[cfg(target_os = "linux")]
fn process_pmd_mapped_kib() -> u64 {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    rollup
        .lines()
        .find_map(|l| l.strip_prefix("FilePmdMapped:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn huge_mappings_keep_the_file_bytes() {
    // 12 MiB of a pattern no page repeats, written with write(): the page cache holds it in
    // whatever folios the file system chose, so the probe may find 2 MiB or re-read.
    let dir = std::env::temp_dir().join(format!("ferrite-mapping-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("weights.bin");
    let bytes: Vec<u8> = (0..12u64 << 20)
        .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
        .collect();
    std::fs::write(&path, &bytes).unwrap();

    for pages in [MapPages::Plain, MapPages::Huge] {
        let file = File::open(&path).unwrap();
        let map = map_file(&path, &file, pages).unwrap();
        assert!(
            map[..] == bytes[..],
            "{pages:?}: the mapped bytes differ from the file"
        );
    }
    #[cfg(target_os = "linux")]
    {
        let file = File::open(&path).unwrap();
        let map = unsafe { Mmap::map(&file) }.unwrap();
        let outcome = settle_huge(&map, &file, &path);
        eprintln!("settle_huge on a fresh 12 MiB file: {outcome:?}");
        assert!(map[..] == bytes[..], "{outcome:?}: the bytes changed");
        if matches!(outcome, HugeOutcome::AlreadyHuge | HugeOutcome::Reread) {
            assert!(
                process_pmd_mapped_kib() >= 2048,
                "{outcome:?}, but smaps_rollup shows no 2 MiB file mapping"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
