//! Sizes like `1GiB`, `512MiB`, `2GB` or plain bytes, for `--kv-cache-memory`.

pub fn parse_byte_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{s}` is not a size (try 1GiB or 536870912)"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(format!(
                "unknown size unit `{other}` (use B, KB, MB, GB, KiB, MiB, GiB)"
            ))
        }
    };
    Ok((value * scale) as usize)
}

#[cfg(test)]
mod tests {
    use super::parse_byte_size;

    #[test]
    fn units() {
        assert_eq!(parse_byte_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_byte_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_byte_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_byte_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_byte_size("4096"), Ok(4096));
        assert!(parse_byte_size("lots").is_err());
        assert!(parse_byte_size("3PB").is_err());
    }
}
