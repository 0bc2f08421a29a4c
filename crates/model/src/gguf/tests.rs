use super::*;
use crate::config::{Arch, RopeStyle};
use crate::tensor_names::ExpertProj;
use crate::testing::{model_path, QWEN_05B, SMOLLM2};
use crate::weights::DType;

/// A hand-written GGUF v3 file: the oracle is the byte layout of the spec, not the parser.
struct Writer {
    kv: Vec<u8>,
    kv_count: u64,
    infos: Vec<u8>,
    tensor_count: u64,
}

impl Writer {
    fn new() -> Self {
        Writer {
            kv: vec![],
            kv_count: 0,
            infos: vec![],
            tensor_count: 0,
        }
    }
    fn string(buf: &mut Vec<u8>, s: &str) {
        buf.extend((s.len() as u64).to_le_bytes());
        buf.extend(s.as_bytes());
    }
    fn kv_raw(&mut self, key: &str, type_id: u32, payload: &[u8]) {
        Self::string(&mut self.kv, key);
        self.kv.extend(type_id.to_le_bytes());
        self.kv.extend(payload);
        self.kv_count += 1;
    }
    fn kv_u32(&mut self, key: &str, v: u32) {
        self.kv_raw(key, 4, &v.to_le_bytes());
    }
    fn kv_str(&mut self, key: &str, v: &str) {
        let mut p = vec![];
        Self::string(&mut p, v);
        self.kv_raw(key, 8, &p);
    }
    fn tensor(&mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) {
        Self::string(&mut self.infos, name);
        self.infos.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            self.infos.extend(d.to_le_bytes());
        }
        self.infos.extend(type_id.to_le_bytes());
        self.infos.extend(offset.to_le_bytes());
        self.tensor_count += 1;
    }
    fn finish(&self, alignment: usize, data: &[u8]) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend(self.tensor_count.to_le_bytes());
        out.extend(self.kv_count.to_le_bytes());
        out.extend(&self.kv);
        out.extend(&self.infos);
        while out.len() % alignment != 0 {
            out.push(0);
        }
        out.extend(data);
        out
    }
}

fn tiny_llama(alignment: Option<u32>) -> Writer {
    let mut w = Writer::new();
    w.kv_str("general.architecture", "llama");
    if let Some(a) = alignment {
        w.kv_u32("general.alignment", a);
    }
    w.kv_u32("llama.block_count", 1);
    w.kv_u32("llama.embedding_length", 32);
    w.kv_u32("llama.feed_forward_length", 64);
    w.kv_u32("llama.attention.head_count", 4);
    w.kv_u32("llama.attention.head_count_kv", 2);
    w.kv_raw(
        "llama.attention.layer_norm_rms_epsilon",
        6,
        &1e-5f32.to_le_bytes(),
    );
    w.kv_u32("llama.context_length", 128);
    // An array of two strings, and a bool.
    let mut arr = 8u32.to_le_bytes().to_vec();
    arr.extend(2u64.to_le_bytes());
    Writer::string(&mut arr, "a");
    Writer::string(&mut arr, "b");
    w.kv_raw("tokenizer.ggml.tokens", 9, &arr);
    w.kv_raw("tokenizer.ggml.add_bos_token", 7, &[1]);
    w
}

fn parse_bytes(bytes: &[u8]) -> Result<GgufFile, GgufError> {
    let mut map = memmap2::MmapMut::map_anon(bytes.len().max(1)).unwrap();
    map[..bytes.len()].copy_from_slice(bytes);
    let map = map.make_read_only().unwrap();
    // An anonymous map is page-sized; parse exactly the written bytes so truncation shows.
    let header = reader::parse(&map[..bytes.len()])?;
    Ok(GgufFile {
        header,
        map: Arc::new(map),
    })
}

#[test]
fn synthetic_file_parses_config_and_tensor_slices() {
    for alignment in [None, Some(64u32)] {
        let mut w = tiny_llama(alignment);
        // A 32x2 f32 matrix at 0 and a 32-element Q8_0 row (34 bytes) right after its 256 bytes.
        w.tensor("token_embd.weight", &[32, 2], 0, 0);
        w.tensor("blk.0.attn_q.weight", &[32, 1], 8, 256);
        let mut data: Vec<u8> = (0..64).flat_map(|i| (i as f32).to_le_bytes()).collect();
        data.extend([7u8; 34]);
        let bytes = w.finish(alignment.unwrap_or(32) as usize, &data);
        let file = parse_bytes(&bytes).unwrap();

        let cfg = file.config().unwrap();
        assert_eq!(cfg.arch, Arch::Llama);
        assert_eq!(
            (cfg.hidden_size, cfg.intermediate_size, cfg.num_layers),
            (32, 64, 1)
        );
        assert_eq!((cfg.num_heads, cfg.num_kv_heads, cfg.head_dim), (4, 2, 8));
        assert_eq!(cfg.vocab_size, 2);
        assert_eq!(cfg.rope_theta, 10_000.0);
        assert!(cfg.tie_word_embeddings && !cfg.qkv_bias);
        assert_eq!(
            file.metadata()
                .opt_bool("tokenizer.ggml.add_bos_token")
                .unwrap(),
            Some(true)
        );
        assert_eq!(
            file.metadata().str_array("tokenizer.ggml.tokens").unwrap(),
            vec!["a", "b"]
        );

        let weights = file.weights();
        let embd = weights.get("token_embd.weight").unwrap();
        assert_eq!((embd.dtype, embd.shape.clone()), (DType::F32, vec![2, 32]));
        assert_eq!(&embd.row_bytes(1)[..4], &32f32.to_le_bytes());
        let q = weights.get("blk.0.attn_q.weight").unwrap();
        assert_eq!((q.dtype, q.shape.clone()), (DType::Q8_0, vec![1, 32]));
        assert_eq!(q.storage.bytes(), &[7u8; 34]);
    }
}

#[test]
fn bad_files_are_rejected_with_a_reason() {
    let mut bytes = tiny_llama(None).finish(32, &[]);
    bytes[0] = b'X';
    assert!(matches!(parse_bytes(&bytes), Err(GgufError::BadMagic(_))));

    let bytes = tiny_llama(None).finish(32, &[]);
    let err = parse_bytes(&bytes[..bytes.len() - 40]).err().unwrap();
    assert!(matches!(err, GgufError::Truncated { .. }), "{err}");

    let mut w = tiny_llama(None);
    w.tensor("x.weight", &[32], 16, 0); // type 16 (IQ2_XXS) is not supported
    let err = parse_bytes(&w.finish(32, &[0; 64])).err().unwrap();
    assert!(
        matches!(err, GgufError::UnknownType { type_id: 16, .. }),
        "{err}"
    );

    let mut w = tiny_llama(None);
    w.tensor("x.weight", &[32, 4], 0, 0); // needs 512 bytes, file has 64
    let err = parse_bytes(&w.finish(32, &[0; 64])).err().unwrap();
    assert!(err.to_string().contains("x.weight"), "{err}");

    let mut w = Writer::new();
    w.kv_str("general.architecture", "llama");
    let err = parse_bytes(&w.finish(32, &[]))
        .unwrap()
        .config()
        .err()
        .unwrap();
    assert!(
        matches!(err, GgufError::MissingKey(ref k) if k == "llama.embedding_length"),
        "{err}"
    );
}

#[test]
fn smollm2_config_and_tensors() {
    let file = GgufFile::open(&model_path(SMOLLM2)).unwrap();
    let cfg = file.config().unwrap();
    assert_eq!(cfg.arch, Arch::Llama);
    assert_eq!(cfg.vocab_size, 49152);
    assert_eq!(
        (cfg.hidden_size, cfg.intermediate_size, cfg.num_layers),
        (576, 1536, 30)
    );
    assert_eq!((cfg.num_heads, cfg.num_kv_heads, cfg.head_dim), (9, 3, 64));
    assert_eq!(cfg.rope_theta, 100_000.0);
    assert_eq!(cfg.rope_style, RopeStyle::Interleaved);
    assert!((cfg.rms_norm_eps - 1e-5).abs() < 1e-9);
    assert_eq!(cfg.max_position_embeddings, 8192);
    assert!(cfg.tie_word_embeddings && !cfg.qkv_bias);

    // Offsets and types as the python `gguf` package reports them.
    let weights = file.weights();
    assert_eq!(weights.tensors.len(), 272);
    let embd = weights.get("token_embd.weight").unwrap();
    assert_eq!(
        (embd.dtype, embd.shape.clone()),
        (DType::Q8_0, vec![49152, 576])
    );
    assert!(matches!(
        embd.storage,
        Storage::Mapped {
            offset: 1785664,
            ..
        }
    ));
    let down = weights.get("blk.0.ffn_down.weight").unwrap();
    assert_eq!(
        (down.dtype, down.shape.clone()),
        (DType::Q4_1, vec![576, 1536])
    );
    assert!(matches!(
        down.storage,
        Storage::Mapped {
            offset: 31868992,
            ..
        }
    ));
    assert_eq!(
        weights.get("blk.29.attn_norm.weight").unwrap().shape,
        vec![576]
    );
}

#[test]
fn qwen_config_and_tensors() {
    let file = GgufFile::open(&model_path(QWEN_05B)).unwrap();
    let cfg = file.config().unwrap();
    assert_eq!(cfg.arch, Arch::Qwen2);
    assert_eq!(cfg.vocab_size, 151936);
    assert_eq!(
        (cfg.hidden_size, cfg.intermediate_size, cfg.num_layers),
        (896, 4864, 24)
    );
    assert_eq!((cfg.num_heads, cfg.num_kv_heads, cfg.head_dim), (14, 2, 64));
    assert_eq!(cfg.rope_theta, 1_000_000.0);
    assert_eq!(cfg.rope_style, RopeStyle::Halves);
    assert_eq!(cfg.max_position_embeddings, 32768);
    // This file carries its own output matrix.
    assert!(!cfg.tie_word_embeddings && cfg.qkv_bias);

    let weights = file.weights();
    assert_eq!(weights.tensors.len(), 291);
    let out = weights.get("output.weight").unwrap();
    assert_eq!(
        (out.dtype, out.shape.clone()),
        (DType::Q8_0, vec![151936, 896])
    );
    assert!(matches!(
        out.storage,
        Storage::Mapped {
            offset: 5947776,
            ..
        }
    ));
    let down = weights.get("blk.0.ffn_down.weight").unwrap();
    assert_eq!(
        (down.dtype, down.shape.clone()),
        (DType::Q6_K, vec![896, 4864])
    );
    assert!(matches!(
        down.storage,
        Storage::Mapped {
            offset: 244187008,
            ..
        }
    ));
    assert_eq!(weights.get("blk.0.attn_k.bias").unwrap().shape, vec![128]);
}

/// A Mixtral-style llama file: router and stacked experts, no expert width key (read from the
/// stack's dims), each expert's slice of the stack at its own offset.
#[test]
fn stacked_experts_configure_the_mixture_and_slice_per_expert() {
    let experts = 4u64;
    let (embd, router, stack) = (32 * 2 * 4, 32 * experts * 4, 32 * 64 * experts * 4);
    let build = |extra: &dyn Fn(&mut Writer)| {
        let mut w = tiny_llama(None);
        w.kv_u32("llama.expert_count", experts as u32);
        w.kv_u32("llama.expert_used_count", 2);
        extra(&mut w);
        w.tensor("token_embd.weight", &[32, 2], 0, 0);
        w.tensor("blk.0.ffn_gate_inp.weight", &[32, experts], 0, embd);
        w.tensor(
            "blk.0.ffn_gate_exps.weight",
            &[32, 64, experts],
            0,
            embd + router,
        );
        // Every element of expert e's matrix is e.
        let mut data = vec![0u8; (embd + router) as usize];
        for e in 0..experts {
            data.extend((0..32 * 64).flat_map(|_| (e as f32).to_le_bytes()));
        }
        assert_eq!(data.len() as u64, embd + router + stack);
        parse_bytes(&w.finish(32, &data)).unwrap()
    };
    let file = build(&|_| {});
    let moe = file.config().unwrap().moe.unwrap();
    assert_eq!(
        (
            moe.num_experts,
            moe.experts_per_token,
            moe.expert_intermediate_size
        ),
        (4, 2, 64)
    );
    assert!(moe.norm_topk_prob && moe.shared_expert_intermediate_size.is_none());
    assert_eq!(moe.sparse_layers, [true]);
    let weights = file.weights();
    let third = weights.expert(0, ExpertProj::Gate, 3).unwrap();
    assert_eq!(third.shape, [64, 32]);
    assert_eq!(&third.row_bytes(63)[124..], &3f32.to_le_bytes());
    assert_eq!(&third.storage.bytes()[..4], &3f32.to_le_bytes());
    assert!(weights.expert(0, ExpertProj::Gate, 4).is_err());
    assert!(weights.expert(0, ExpertProj::Up, 0).is_err(), "no up stack");

    let sigmoid = build(&|w| w.kv_u32("llama.expert_gating_func", 2));
    let err = sigmoid.config().err().unwrap();
    assert!(err.to_string().contains("expert_gating_func"), "{err}");
}
