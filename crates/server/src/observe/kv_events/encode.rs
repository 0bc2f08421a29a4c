//! vLLM's wire format of a batch of KV-cache events: msgpack, every struct an array (msgspec's
//! `array_like`), each event tagged by its class name in front:
//!
//! ```text
//! batch:            [ts: float64 (unix seconds), [event, ...], data_parallel_rank: 0]
//! BlockStored:      ["BlockStored", [hash, ...], parent_hash | nil, [token_id, ...],
//!                    block_size, lora_id: nil, medium: nil, lora_name: nil]
//! BlockRemoved:     ["BlockRemoved", [hash, ...], medium: nil]
//! AllBlocksCleared: ["AllBlocksCleared"]
//! ```
//!
//! Hashes are unsigned 64-bit integers (vLLM sends integers or bytes; llm-d reads both).
//! `medium` is nil (the replica's one KV tier), as are the LoRA fields (no adapters).

use ferrite_engine::kv::KvEvent;
use rmp::encode;

/// Writing to a `Vec` cannot fail; the errors are only the writer trait's.
type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

pub fn encode_batch(ts: f64, events: &[KvEvent], data_parallel_rank: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + events.len() * 32);
    // Writing to a Vec cannot fail.
    let _ = write_batch(&mut out, ts, events, data_parallel_rank);
    out
}

fn write_batch(out: &mut Vec<u8>, ts: f64, events: &[KvEvent], rank: u32) -> Result<()> {
    encode::write_array_len(out, 3)?;
    encode::write_f64(out, ts)?;
    encode::write_array_len(out, events.len() as u32)?;
    for event in events {
        write_event(out, event)?;
    }
    encode::write_uint(out, u64::from(rank))?;
    Ok(())
}

fn write_event(out: &mut Vec<u8>, event: &KvEvent) -> Result<()> {
    match event {
        KvEvent::BlockStored {
            block_hashes,
            parent_block_hash,
            token_ids,
            block_size,
        } => {
            encode::write_array_len(out, 8)?;
            encode::write_str(out, "BlockStored")?;
            write_uints(out, block_hashes.iter().copied())?;
            match parent_block_hash {
                Some(parent) => encode::write_uint(out, *parent).map(drop)?,
                None => encode::write_nil(out)?,
            }
            write_uints(out, token_ids.iter().map(|&t| u64::from(t)))?;
            encode::write_uint(out, *block_size as u64)?;
            for _lora_id_medium_lora_name in 0..3 {
                encode::write_nil(out)?;
            }
        }
        KvEvent::BlockRemoved { block_hashes } => {
            encode::write_array_len(out, 3)?;
            encode::write_str(out, "BlockRemoved")?;
            write_uints(out, block_hashes.iter().copied())?;
            encode::write_nil(out)?;
        }
        KvEvent::AllBlocksCleared => {
            encode::write_array_len(out, 1)?;
            encode::write_str(out, "AllBlocksCleared")?;
        }
    }
    Ok(())
}

fn write_uints(out: &mut Vec<u8>, values: impl ExactSizeIterator<Item = u64>) -> Result<()> {
    encode::write_array_len(out, values.len() as u32)?;
    for v in values {
        encode::write_uint(out, v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_vllms_array_layout_byte_for_byte() {
        let events = [
            KvEvent::BlockStored {
                block_hashes: vec![1, u64::MAX],
                parent_block_hash: None,
                token_ids: vec![7, 300],
                block_size: 1,
            },
            KvEvent::BlockRemoved {
                block_hashes: vec![5],
            },
            KvEvent::AllBlocksCleared,
        ];
        let bytes = encode_batch(1.5, &events, 0);
        let mut expected = vec![0x93, 0xcb];
        expected.extend_from_slice(&1.5f64.to_be_bytes());
        expected.push(0x93);
        // ["BlockStored", [1, 2^64-1], nil, [7, 300], 1, nil, nil, nil]
        expected.extend_from_slice(&[0x98, 0xab]);
        expected.extend_from_slice(b"BlockStored");
        expected.extend_from_slice(&[0x92, 0x01, 0xcf]);
        expected.extend_from_slice(&u64::MAX.to_be_bytes());
        expected.extend_from_slice(&[0xc0, 0x92, 0x07, 0xcd, 0x01, 0x2c, 0x01, 0xc0, 0xc0, 0xc0]);
        // ["BlockRemoved", [5], nil]
        expected.extend_from_slice(&[0x93, 0xac]);
        expected.extend_from_slice(b"BlockRemoved");
        expected.extend_from_slice(&[0x91, 0x05, 0xc0]);
        // ["AllBlocksCleared"]
        expected.extend_from_slice(&[0x91, 0xb0]);
        expected.extend_from_slice(b"AllBlocksCleared");
        // data_parallel_rank
        expected.push(0x00);
        assert_eq!(bytes, expected);
    }
}
