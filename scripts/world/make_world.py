# Builds "a world with structure" for testing Draft Studio against the real vLLM CPU server (issue 47,
# item 1): synthetic conversations in six categories of very different predictability (world_data.py),
# a byte-level BPE tokenizer trained on them with the Hermes markers and the published Qwen3 chat
# template, a 2-layer Qwen2 target (hidden 256) trained on the assistant spans, a 1-layer draft
# (hidden 128, same tokenizer) trained on only some categories so that it starts weak on the others,
# and the prompt sets as JSONL datasets Draft Studio imports. Seeded; idempotent (a finished world
# with the same settings is kept). Run with the real-vLLM venv's python (torch, transformers,
# tokenizers, safetensors); scripts/world/make-world.sh does that.
#   usage: make_world.py [--out DIR] [--seed N] [--target-steps N] [--draft-steps N] [--threads N] [--force]
import argparse
import hashlib
import json
import math
import os
import random
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import world_data as W  # noqa: E402

TEMPLATE = os.path.join(ROOT, "engine/tests/fixtures/templates/qwen3/chat_template.jinja")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]            # special: skipped in decoded text
MARKERS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]  # kept
# Qwen2's own pre-tokenizer split (digits one by one, newlines grouped), then byte-level
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
               r"|\s+(?!\S)|\s+")


def log(*a):
    print(*a, flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default=os.path.expanduser("~/.cache/draft-studio/world"))
    p.add_argument("--seed", type=int, default=47)
    p.add_argument("--train-per-category", type=int, default=6000)
    p.add_argument("--prompts-per-category", type=int, default=150, help="rows per category in prompts.jsonl")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--target-steps", type=int, default=2000)
    p.add_argument("--draft-steps", type=int, default=600)
    p.add_argument("--target-lr", type=float, default=3e-3)
    p.add_argument("--draft-lr", type=float, default=4e-3)
    p.add_argument("--batch-tokens", type=int, default=2048, help="padded tokens per training step")
    p.add_argument("--draft-categories", default="sequence,arithmetic,records,chat",
                   help="the categories the starting draft is trained on (it starts weak on the others)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (1: on a busy 2-core machine a second thread made training slower here)")
    p.add_argument("--force", action="store_true", help="rebuild even if a finished world with these settings exists")
    return p.parse_args()


# --------------------------------------------------------------------------------------------------------------
def build_conversations(seed, per_category):
    r = random.Random(seed)
    convs = []
    for cat in W.CATEGORIES:
        n = per_category
        for _ in range(n):
            thinking = r.random() < 0.8
            anyway = cat not in ("tools",) and r.random() < 0.15
            convs.append(W.conversation(r, cat, thinking=thinking, offer_tools_anyway=anyway))
    r.shuffle(convs)
    return convs


def render(template, conv):
    from transformers.utils.chat_template_utils import render_jinja_template
    tools = conv["tools"]
    prompt = render_jinja_template([conv["messages"]], tools=tools, chat_template=template,
                                   add_generation_prompt=True, enable_thinking=conv["thinking"])[0][0]
    full = render_jinja_template([conv["messages"] + [conv["assistant"]]], tools=tools,
                                 chat_template=template, enable_thinking=conv["thinking"])[0][0]
    assert full.startswith(prompt), (prompt[-80:], full[len(prompt) - 80:len(prompt) + 40])
    completion = full[len(prompt):]
    assert completion.endswith("<|im_end|>\n")
    return prompt, completion[:-1]  # the completion ends at <|im_end|> (the model's eos)


def train_tokenizer(texts, vocab, out):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIAL + MARKERS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    data = json.loads(tok.to_str())
    for t in data["added_tokens"]:
        t["special"] = t["content"] in SPECIAL  # <think>, <tool_call>, …: added tokens kept in decoded text (as Qwen3)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(data, f, ensure_ascii=False)
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    ids = {s: tok.token_to_id(s) for s in SPECIAL + MARKERS}
    template = open(TEMPLATE).read()
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
           "bos_token": None, "unk_token": None, "model_max_length": 4096, "clean_up_tokenization_spaces": False,
           "chat_template": template,
           "added_tokens_decoder": {str(i): {"content": s, "special": s in SPECIAL, "lstrip": False, "rstrip": False,
                                             "normalized": False, "single_word": False} for s, i in ids.items()}}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1, ensure_ascii=False)
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, f)
    return tok, ids


def encode_all(tok, template, convs):
    rows = []
    for c in convs:
        prompt, completion = render(template, c)
        p = tok.encode(prompt).ids
        q = tok.encode(completion).ids
        rows.append((c["category"], p, q))
    return rows


# --------------------------------------------------------------------------------------------------------------
def make_model(kind, vocab, ids):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    if kind == "target":
        c = Qwen2Config(vocab_size=vocab, hidden_size=256, intermediate_size=512, head_dim=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2)
    else:
        c = Qwen2Config(vocab_size=vocab, hidden_size=128, intermediate_size=384, head_dim=64, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1)
    c.max_position_embeddings = 4096
    c.rope_theta = 10000.0
    c.eos_token_id = ids["<|im_end|>"]
    c.bos_token_id = ids["<|endoftext|>"]
    c.pad_token_id = ids["<|endoftext|>"]
    c.tie_word_embeddings = True
    c.torch_dtype = "bfloat16"
    c._attn_implementation = "sdpa"
    return Qwen2ForCausalLM(c)


def completion_labels(row):
    """A (category, prompt ids, completion ids) row as (ids, labels): the completion tokens are the labels."""
    _, p, q = row
    return p + q, [0] * len(p) + [1] * len(q)


def batches(seqs, batch_tokens, r):
    """Length-bucketed batches of row indices (seqs: each row's (ids, labels)): about batch_tokens padded tokens
    each, in a shuffled order."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i][0]))
    out, cur, longest = [], [], 0
    for i in order:
        n = len(seqs[i][0])
        if cur and max(longest, n) * (len(cur) + 1) > batch_tokens:
            out.append(cur); cur, longest = [], 0
        cur.append(i); longest = max(longest, n)
    if cur:
        out.append(cur)
    r.shuffle(out)
    return out


def train(model, rows, steps, batch_tokens, lr, seed, label, pad_id, labels=completion_labels, stats=None):
    """Next-token cross-entropy on the label tokens only, for a fixed number of AdamW steps (warm-up, then a
    cosine to a tenth of lr), seeded. labels(row) gives a row's (ids, label mask): label[t] = 1 makes ids[t] a
    target, predicted from the positions before t (the logits at t - 1); a label at position 0 has nothing
    before it and is not trained. stats (a dict), when given, receives the rows and label tokens seen and
    each step's loss. Returns (the loss's moving average at the end, seconds)."""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(seed)
    seqs = [labels(x) for x in rows]
    r = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps)))))
    model.train()
    queue, t0, ema, done_tokens, done_rows = [], time.time(), None, 0, 0
    for step in range(steps):
        if not queue:
            queue = batches(seqs, batch_tokens, r)
        b = queue.pop()
        longest = max(len(seqs[i][0]) for i in b)
        x = torch.full((len(b), longest), pad_id, dtype=torch.long)
        lab = torch.zeros((len(b), longest), dtype=torch.bool)
        for j, i in enumerate(b):
            seq, mask = seqs[i]
            x[j, :len(seq)] = torch.tensor(seq)
            lab[j, :len(seq)] = torch.tensor(mask, dtype=torch.bool)
        m = lab[:, 1:]  # the hidden state at t - 1 predicts the label at t
        hidden = model.model(input_ids=x).last_hidden_state
        h = hidden[:, :-1][m]
        y = x[:, 1:][m]
        loss = F.cross_entropy(model.lm_head(h).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(); sched.step()
        done_tokens += int(m.sum()); done_rows += len(b)
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if stats is not None:
            stats.setdefault("losses", []).append(loss.item())
            stats["rows_seen"], stats["label_tokens_seen"] = done_rows, done_tokens
        if step % 100 == 0 or step == steps - 1:
            log(f"  {label} step {step + 1}/{steps}  loss {ema:.3f}  {time.time() - t0:.0f} s  "
                f"{done_tokens / max(1e-9, time.time() - t0):.0f} trained tokens/s")
    model.eval()
    return ema, time.time() - t0


def per_category_loss(model, rows, cats, pad_id, limit=64):
    import torch
    import torch.nn.functional as F
    res = {}
    with torch.no_grad():
        for cat in cats:
            sel = [x for x in rows if x[0] == cat][:limit]
            tot, n, hit = 0.0, 0, 0
            for _, p, q in sel:
                x = torch.tensor([p + q])
                logits = model(input_ids=x).logits[0, len(p) - 1:-1]
                y = torch.tensor(q)
                tot += F.cross_entropy(logits.float(), y, reduction="sum").item(); n += len(q)
                hit += int((logits.argmax(-1) == y).sum())
            res[cat] = {"loss": round(tot / max(1, n), 3), "argmax_hit": round(hit / max(1, n), 3)}
    return res


def save_model(model, out, tok_dir, ids):
    import torch
    os.makedirs(out, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(tok_dir, name), os.path.join(out, name))
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": ids["<|im_end|>"], "bos_token_id": ids["<|endoftext|>"],
                   "pad_token_id": ids["<|endoftext|>"]}, f, indent=1)


def write_prompts(path, seed, per_category):
    """The held-out-ready prompt set: drawn from another stream than the training conversations."""
    r = random.Random(seed * 1000 + 1)
    counts = {}
    with open(path, "w") as f:
        for cat in W.CATEGORIES:
            for i in range(per_category):
                c = W.conversation(r, cat)
                row = {"id": f"world-{cat}-{i:04d}", "category": cat, "messages": c["messages"]}
                if c["tools"]:
                    row["tools"] = c["tools"]
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                counts[cat] = counts.get(cat, 0) + 1
    return counts


# --------------------------------------------------------------------------------------------------------------
def main():
    a = parse_args()
    settings = {k: v for k, v in vars(a).items() if k not in ("out", "threads", "force")}
    src = "".join(open(os.path.join(HERE, n)).read() for n in ("make_world.py", "world_data.py"))
    key = hashlib.sha256((json.dumps(settings, sort_keys=True) + src).encode()).hexdigest()[:16]
    manifest_path = os.path.join(a.out, "manifest.json")
    if not a.force and os.path.exists(manifest_path):
        m = json.load(open(manifest_path))
        if m.get("key") == key:
            log(f"world already built in {a.out} (seed {a.seed}, key {key}); --force rebuilds it")
            print(json.dumps(m, indent=1))
            return
    import torch
    torch.set_num_threads(a.threads)
    t_all = time.time()
    os.makedirs(a.out, exist_ok=True)
    template = open(TEMPLATE).read()

    log(f"1/5 conversations (seed {a.seed}, {a.train_per_category} per category)")
    convs = build_conversations(a.seed, a.train_per_category)
    rendered = [render(template, c) for c in convs[:6000]]
    log(f"2/5 tokenizer (byte-level BPE, vocab {a.vocab}, Qwen2 split, Hermes markers, Qwen3 template)")
    tok_dir = os.path.join(a.out, "tokenizer")
    tok, ids = train_tokenizer([p + q for p, q in rendered], a.vocab, tok_dir)
    vocab = tok.get_vocab_size()
    rows = encode_all(tok, template, convs)
    held = len(rows) // 50
    val, rows = rows[:held], rows[held:]
    lens = sorted(len(p) + len(q) for _, p, q in rows)
    stats = {cat: {"rows": sum(1 for x in rows if x[0] == cat),
                   "mean_prompt_tokens": round(sum(len(p) for c, p, _ in rows if c == cat) / max(1, sum(1 for x in rows if x[0] == cat)), 1),
                   "mean_completion_tokens": round(sum(len(q) for c, _, q in rows if c == cat) / max(1, sum(1 for x in rows if x[0] == cat)), 1)}
             for cat in W.CATEGORIES}
    log(f"   vocab {vocab}; {len(rows)} training conversations, median {lens[len(lens) // 2]} tokens, "
        f"longest {lens[-1]}; ids {ids}")
    for cat, s in stats.items():
        log(f"   {cat:<11} {s}")

    log(f"3/5 target: Qwen2, 2 layers, hidden 256 ({a.target_steps} steps, {a.threads} threads)")
    torch.manual_seed(a.seed)
    target = make_model("target", vocab, ids)
    n_target = sum(p.numel() for p in target.parameters())
    t_loss, t_time = train(target, rows, a.target_steps, a.batch_tokens, a.target_lr, a.seed, "target", ids["<|endoftext|>"])
    target_eval = per_category_loss(target, val, W.CATEGORIES, ids["<|endoftext|>"])
    log(f"   target trained in {t_time:.0f} s; held-out per category: {target_eval}")

    seen = [c for c in a.draft_categories.split(",") if c]
    log(f"4/5 draft: Qwen2, 1 layer, hidden 128, trained on {', '.join(seen)} only ({a.draft_steps} steps)")
    torch.manual_seed(a.seed + 1)
    draft = make_model("draft", vocab, ids)
    n_draft = sum(p.numel() for p in draft.parameters())
    d_loss, d_time = train(draft, [x for x in rows if x[0] in seen], a.draft_steps, a.batch_tokens, a.draft_lr, a.seed + 1,
                           "draft", ids["<|endoftext|>"])
    draft_eval = per_category_loss(draft, val, W.CATEGORIES, ids["<|endoftext|>"])
    log(f"   draft trained in {d_time:.0f} s; held-out per category: {draft_eval}")

    log("5/5 saving the models and the prompt sets")
    save_model(target, os.path.join(a.out, "target"), tok_dir, ids)
    save_model(draft, os.path.join(a.out, "draft"), tok_dir, ids)
    ds = os.path.join(a.out, "datasets")
    os.makedirs(ds, exist_ok=True)
    counts = write_prompts(os.path.join(ds, "prompts.jsonl"), a.seed, a.prompts_per_category)
    manifest = {"key": key, "seed": a.seed, "settings": settings, "vocab": vocab, "token_ids": ids,
                "target": {"dir": os.path.join(a.out, "target"), "params": n_target, "train_seconds": round(t_time),
                           "final_loss": round(t_loss, 3), "held_out": target_eval},
                "draft": {"dir": os.path.join(a.out, "draft"), "params": n_draft, "train_seconds": round(d_time),
                          "trained_on": seen, "final_loss": round(d_loss, 3), "held_out": draft_eval},
                "training_rows": stats, "prompts": {"path": os.path.join(ds, "prompts.jsonl"), "rows": counts},
                "total_seconds": round(time.time() - t_all)}
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
    log(f"world built in {manifest['total_seconds']} s: {a.out}")
    print(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main()
