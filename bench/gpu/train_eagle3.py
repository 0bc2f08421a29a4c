"""Trains an EAGLE-3 head for a real model, on text the model itself generates, and saves it in
the EAGLE / SpecForge layout ferrite loads (`--speculative eagle3 --draft-model OUT`).

One command does it all (on a GPU machine, or slowly on a CPU):

    python bench/gpu/train_eagle3.py --target MODEL.gguf --out eagle3-head [--device cuda]

1. Prompts: written here, three workloads (chat questions, code tasks, edits of given text or
   code), each a template filled from topic lists; `held_out_prompts()` are kept apart for
   benchmarks (bench/eagle3_acceptance.py reads them).
2. Data: the target answers each training prompt greedily (its chat template), up to
   `--new-tokens`; then one forward pass over prompt + answer gives, at every position, the
   residual stream at the input of the three layers the head reads (2, L/2, L - 3: what
   ferrite captures when the config names none) and the target's own next token (argmax).
3. The head: one Llama decoder layer whose attention reads [input_norm(embed(x)); hidden_norm(g)],
   g = fc(three target states) on the first step, the head's own pre-norm output on later steps;
   an LM head over a draft vocabulary (the most frequent target tokens of the data, `d2t` maps
   it back; initialised from the target's LM head rows), the target's embedding (not saved).
4. Training-time test: each position's chain is unrolled `--steps` draft steps, step j's query at
   p + j - 1 attending over the first-step keys up to p and its own chain's earlier keys, as
   the drafts run at inference; teacher-forced tokens, the label at every step the target's
   next token there; the steps' losses weighted 0.8^(j-1).

Needs torch, transformers and (for a .gguf target) gguf.
"""

import argparse
import json
import math
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

CHAT_TOPICS = [
    "photosynthesis", "the French revolution", "black holes", "compound interest", "volcanoes",
    "the water cycle", "machine learning", "the immune system", "jazz music", "climate change",
    "the Roman empire", "electric cars", "sleep", "coffee", "the moon landing", "democracy",
    "bees", "the internet", "earthquakes", "vitamins", "chess", "the stock market", "rainbows",
    "recycling", "dinosaurs", "the printing press", "solar panels", "meditation", "tides",
    "the human heart", "glaciers", "vaccines", "the Renaissance", "gravity", "coral reefs",
    "bread baking", "bicycles", "deserts", "the Olympic games", "memory",
]
CHAT_TEMPLATES = [
    "Explain {t} in simple terms.", "What are three interesting facts about {t}?",
    "Write a short paragraph about {t} for a ten-year-old.", "Why is {t} important?",
    "Give me a quick summary of {t}.", "What are common misconceptions about {t}?",
]
CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "computes the factorial of n",
    "returns the n-th Fibonacci number", "counts the vowels in a string",
    "finds the largest element of a list", "merges two sorted lists", "removes duplicates from a list",
    "checks whether a string is a palindrome", "converts Celsius to Fahrenheit",
    "sums the digits of an integer", "sorts a list with bubble sort", "flattens a nested list",
    "counts word frequencies in a text", "computes the greatest common divisor of two numbers",
    "reads a file and prints its line count", "validates an email address with a regex",
    "returns the transpose of a matrix", "implements binary search", "generates all primes below n",
]
CODE_LANGUAGES = ["Python", "JavaScript", "Rust", "C", "Go"]
EDIT_TEXTS = [
    "the meeting are moved to tuesday because many peoples can not come on monday",
    "I has been working on this project since three years and it go well",
    "def add(a, b):\n    return a - b",
    "for i in range(10) print(i)",
    "Our product is very good and very cheap and very fast and very reliable.",
    "The results was surprising, the team didnt expected it.",
    "function square(x) { return x * x }",
    "Please find attached the report that you asked me for it yesterday.",
    "x = [1, 2, 3]\nfor i in range(len(x)):\n    print(x[i])",
    "the quick brown fox jump over the lazy dog and run away quick",
    "SELECT name FROM users WHERE age > 30 ORDER BY",
    "if x = 5:\n    print('five')",
]
EDIT_TEMPLATES = [
    "Fix the grammar of this sentence: {t}", "Rewrite this more formally: {t}",
    "Find and fix the bug: {t}", "Make this shorter: {t}", "Improve this: {t}",
]


def workload_prompts():
    """(workload, prompt) pairs of all three workloads, in a fixed order."""
    chat = [("chat", t.format(t=topic)) for topic in CHAT_TOPICS for t in CHAT_TEMPLATES]
    code = [("code", f"Write a {lang} function that {task}.")
            for task in CODE_TASKS for lang in CODE_LANGUAGES]
    edits = [("edits", t.format(t=text)) for text in EDIT_TEXTS for t in EDIT_TEMPLATES]
    return chat + code + edits


def split_prompts(seed=0, held_out_per_workload=12):
    """Training prompts and held-out ones (the first `held_out_per_workload` of each workload
    after a seeded shuffle)."""
    prompts = workload_prompts()
    random.Random(seed).shuffle(prompts)
    held, train, count = [], [], {}
    for workload, prompt in prompts:
        if count.get(workload, 0) < held_out_per_workload:
            count[workload] = count.get(workload, 0) + 1
            held.append((workload, prompt))
        else:
            train.append((workload, prompt))
    return train, held


def held_out_prompts():
    return split_prompts()[1]


def load_target(path, device):
    p = Path(path)
    kwargs = {"dtype": torch.float32}
    if p.suffix == ".gguf":
        tok = AutoTokenizer.from_pretrained(p.parent, gguf_file=p.name)
        model = AutoModelForCausalLM.from_pretrained(p.parent, gguf_file=p.name, **kwargs)
    else:
        tok = AutoTokenizer.from_pretrained(p)
        model = AutoModelForCausalLM.from_pretrained(p, **kwargs)
    return tok, model.to(device).eval()


@torch.no_grad()
def generate_data(tok, model, prompts, new_tokens, batch, device):
    """Each prompt's ids followed by the target's greedy answer."""
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    out = []
    for i in range(0, len(prompts), batch):
        texts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                         add_generation_prompt=True)
                 for _, p in prompts[i:i + batch]]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        gen = model.generate(**enc, max_new_tokens=new_tokens, do_sample=False,
                             pad_token_id=tok.pad_token_id)
        for row, mask in zip(gen, enc["attention_mask"]):
            ids = row[int((mask == 0).sum()):].tolist()
            while ids and ids[-1] == tok.pad_token_id and len(ids) > int(mask.sum()):
                ids.pop()
            out.append(ids)
        print(f"  generated {min(i + batch, len(prompts))}/{len(prompts)}", flush=True)
    return out


@torch.no_grad()
def features(model, seqs, aux, device):
    """Per sequence: the three layers' inputs side by side [n, 3H] and the target's next token
    after each position [n]."""
    out = []
    for ids in seqs:
        x = torch.tensor([ids], device=device)
        r = model(input_ids=x, output_hidden_states=True)
        states = torch.cat([r.hidden_states[a][0] for a in aux], -1).float().cpu()
        out.append((torch.tensor(ids), states, r.logits[0].argmax(-1).cpu()))
    return out


class Head(torch.nn.Module):
    def __init__(self, cfg, embed, lm_rows):
        super().__init__()
        h, heads, kv, hd = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
        self.cfg = cfg
        self.embed = embed  # the target's, frozen
        self.fc = torch.nn.Linear(3 * h, h, bias=False)
        self.hidden_norm = torch.nn.RMSNorm(h, eps=cfg["eps"])
        self.input_norm = torch.nn.RMSNorm(h, eps=cfg["eps"])
        self.q = torch.nn.Linear(2 * h, heads * hd, bias=False)
        self.k = torch.nn.Linear(2 * h, kv * hd, bias=False)
        self.v = torch.nn.Linear(2 * h, kv * hd, bias=False)
        self.o = torch.nn.Linear(heads * hd, h, bias=False)
        self.post_norm = torch.nn.RMSNorm(h, eps=cfg["eps"])
        self.gate = torch.nn.Linear(h, cfg["inter"], bias=False)
        self.up = torch.nn.Linear(h, cfg["inter"], bias=False)
        self.down = torch.nn.Linear(cfg["inter"], h, bias=False)
        self.norm = torch.nn.RMSNorm(h, eps=cfg["eps"])
        self.lm_head = torch.nn.Linear(h, lm_rows.shape[0], bias=False)
        with torch.no_grad():
            self.lm_head.weight.copy_(lm_rows)
            for lin in [self.o, self.down]:
                lin.weight.mul_(0.1)
        half = hd // 2
        inv = 1.0 / cfg["rope_theta"] ** (torch.arange(half).float() / half)
        self.register_buffer("inv_freq", inv, persistent=False)

    def rope(self, t, positions):
        f = positions[:, None].float() * self.inv_freq[None]
        cos, sin = torch.cat([f.cos(), f.cos()], -1), torch.cat([f.sin(), f.sin()], -1)
        a, b = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
        return t * cos[:, None] + torch.cat([-b, a], -1) * sin[:, None]

    def qkv(self, tokens, g, positions):
        c = self.cfg
        x = torch.cat([self.input_norm(self.embed[tokens]), self.hidden_norm(g)], -1)
        n = len(tokens)
        q = self.rope(self.q(x).view(n, c["heads"], c["head_dim"]), positions)
        k = self.rope(self.k(x).view(n, c["kv_heads"], c["head_dim"]), positions)
        v = self.v(x).view(n, c["kv_heads"], c["head_dim"])
        rep = c["heads"] // c["kv_heads"]
        return q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)

    def finish(self, g, attn):
        h = g + self.o(attn)
        h2 = h + self.down(F.silu(self.gate(self.post_norm(h))) * self.up(self.post_norm(h)))
        return h2, self.lm_head(self.norm(h2))

    def unrolled(self, tokens, g1, steps):
        """Logits of `steps` draft steps of every chain of one sequence: step j's row q
        (chain start p = q - j + 1) attends over the first step's keys at positions <= p and
        its chain's keys of steps 2..j."""
        n, c = len(tokens), self.cfg
        scale = c["head_dim"] ** -0.5
        out, keys, g = [], [], g1
        for j in range(1, steps + 1):
            m = n - (j - 1)
            pos = torch.arange(j - 1, n, device=g1.device)
            q, k, v = self.qkv(tokens[j - 1:], g[:m], pos)
            keys.append((k, v))
            k1, v1 = keys[0]
            # First-step keys: row r (position r + j - 1, chain start r) sees keys 0..r.
            s1 = torch.einsum("rhd,khd->hrk", q, k1[:m]) * scale
            mask = torch.ones(m, m, dtype=torch.bool, device=g1.device).tril()
            s1 = s1.masked_fill(~mask, float("-inf"))
            diag = [torch.einsum("rhd,rhd->hr", q, keys[i][0][: m]) * scale
                    for i in range(1, j)]
            scores = torch.cat([s1] + [d[..., None] for d in diag], -1).softmax(-1)
            attn = torch.einsum("hrk,khd->rhd", scores[..., :m], v1[:m])
            for i in range(1, j):
                attn = attn + scores[..., m + i - 1].transpose(0, 1)[..., None] * keys[i][1][:m]
            h2, logits = self.finish(g[:m], attn.reshape(m, -1))
            out.append(logits)
            g = h2  # the next step's row r continues chain r
        return out


def train(head, data, draft_of, steps, epochs, lr, device, max_len):
    opt = torch.optim.AdamW([p for n, p in head.named_parameters()], lr=lr, weight_decay=0.0)
    total = epochs * len(data)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1.0, (i + 1) / 50) * 0.5 * (1 + math.cos(math.pi * i / total)))
    order = list(range(len(data)))
    for epoch in range(epochs):
        random.Random(epoch).shuffle(order)
        seen, correct, loss_sum, started = [0] * steps, [0] * steps, 0.0, time.time()
        for it, i in enumerate(order):
            ids, states, nxt = data[i]
            ids, states, nxt = ids[:max_len], states[:max_len], nxt[:max_len]
            n = len(ids) - 1
            tokens = ids[1:].to(device)                 # pair p: token x[p+1]
            g1 = head.fc(states[:n].to(device))         # ... and the target at p
            labels = draft_of[nxt[1:n + 1]].to(device)  # target's token after x[..p+1]
            logits = head.unrolled(tokens, g1, steps)
            loss = 0.0
            for j, l in enumerate(logits):
                lab = labels[j:]
                valid = lab >= 0
                if valid.any():
                    loss = loss + 0.8 ** j * F.cross_entropy(l[valid], lab[valid])
                    seen[j] += int(valid.sum())
                    correct[j] += int((l[valid].argmax(-1) == lab[valid]).sum())
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
            opt.step()
            sched.step()
            loss_sum += float(loss)
            if (it + 1) % 50 == 0 or it + 1 == len(order):
                acc = " ".join(f"{c / max(s, 1):.3f}" for c, s in zip(correct, seen))
                print(f"epoch {epoch} {it + 1}/{len(order)} loss {loss_sum / (it + 1):.3f} "
                      f"top-1 per step {acc} ({time.time() - started:.0f} s)", flush=True)


def save(head, out, target_cfg, cfg, aux, draft_ids):
    out.mkdir(parents=True, exist_ok=True)
    w = {
        "fc.weight": head.fc.weight,
        "midlayer.hidden_norm.weight": head.hidden_norm.weight,
        "midlayer.input_layernorm.weight": head.input_norm.weight,
        "midlayer.self_attn.q_proj.weight": head.q.weight,
        "midlayer.self_attn.k_proj.weight": head.k.weight,
        "midlayer.self_attn.v_proj.weight": head.v.weight,
        "midlayer.self_attn.o_proj.weight": head.o.weight,
        "midlayer.post_attention_layernorm.weight": head.post_norm.weight,
        "midlayer.mlp.gate_proj.weight": head.gate.weight,
        "midlayer.mlp.up_proj.weight": head.up.weight,
        "midlayer.mlp.down_proj.weight": head.down.weight,
        "norm.weight": head.norm.weight,
        "lm_head.weight": head.lm_head.weight,
    }
    w = {k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in w.items()}
    w["d2t"] = (draft_ids - torch.arange(len(draft_ids))).to(torch.int64)
    t2d = torch.zeros(target_cfg.vocab_size, dtype=torch.bool)
    t2d[draft_ids] = True
    w["t2d"] = t2d
    save_file(w, out / "model.safetensors")
    config = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
        "hidden_size": cfg["hidden"], "intermediate_size": cfg["inter"],
        "num_attention_heads": cfg["heads"], "num_key_value_heads": cfg["kv_heads"],
        "head_dim": cfg["head_dim"], "num_hidden_layers": 1, "rms_norm_eps": cfg["eps"],
        "rope_theta": cfg["rope_theta"], "max_position_embeddings": 8192,
        "vocab_size": target_cfg.vocab_size, "draft_vocab_size": len(draft_ids),
        "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        # EAGLE / SpecForge name the layers whose output is read: one below their inputs.
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [a - 1 for a in aux]},
    }
    (out / "config.json").write_text(json.dumps(config, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="the model: a .gguf file or an HF directory")
    ap.add_argument("--out", required=True, type=Path, help="directory the head is saved in")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--new-tokens", type=int, default=192, help="answer length per prompt")
    ap.add_argument("--gen-batch", type=int, default=32)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=3, help="draft steps unrolled in training")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--max-len", type=int, default=512, help="tokens per training sequence")
    ap.add_argument("--limit", type=int, default=0, help="use only this many prompts (smoke)")
    args = ap.parse_args()
    torch.manual_seed(0)
    started = time.time()
    tok, model = load_target(args.target, args.device)
    tc = model.config
    layers = tc.num_hidden_layers
    aux = [2, layers // 2, layers - 3]
    train_prompts, _ = split_prompts()
    if args.limit:
        train_prompts = train_prompts[: args.limit]
    print(f"{len(train_prompts)} training prompts; target {layers} layers, aux inputs {aux}")
    seqs = generate_data(tok, model, train_prompts, args.new_tokens, args.gen_batch, args.device)
    data = features(model, seqs, aux, args.device)
    tokens = sum(len(s) for s in seqs)
    print(f"data: {tokens} tokens ({time.time() - started:.0f} s)", flush=True)
    counts = torch.zeros(tc.vocab_size, dtype=torch.long)
    for _, _, nxt in data:
        counts += torch.bincount(nxt, minlength=tc.vocab_size)
    draft_ids = counts.argsort(descending=True)[: args.draft_vocab].sort().values
    draft_of = torch.full((tc.vocab_size,), -1, dtype=torch.long)
    draft_of[draft_ids] = torch.arange(len(draft_ids))
    covered = float(counts[draft_ids].sum()) / float(counts.sum())
    print(f"draft vocabulary {len(draft_ids)} covers {covered:.4f} of the labels")
    hd = getattr(tc, "head_dim", None) or tc.hidden_size // tc.num_attention_heads
    cfg = {"hidden": tc.hidden_size, "heads": tc.num_attention_heads,
           "kv_heads": tc.num_key_value_heads, "head_dim": hd, "inter": tc.intermediate_size,
           "eps": tc.rms_norm_eps, "rope_theta": float(getattr(tc, "rope_theta", 10000.0))}
    embed = model.get_input_embeddings().weight.detach().float()
    lm_rows = model.get_output_embeddings().weight.detach().float()[draft_ids.to(args.device)]
    head = Head(cfg, embed, lm_rows).to(args.device)
    train(head, data, draft_of, args.steps, args.epochs, args.lr, args.device, args.max_len)
    save(head, args.out, tc, cfg, aux, draft_ids)
    print(f"saved {args.out} ({time.time() - started:.0f} s)")


if __name__ == "__main__":
    main()
