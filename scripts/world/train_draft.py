# Trains a draft revision from a Draft Studio pre-tokenized export (issue 47, item 2): the world's draft
# (scripts/world/make-world.sh) from its starting weights, on the export's rows exactly as exported, for a
# fixed budget of optimizer steps, seeded and deterministic on CPU; writes an HF folder vLLM serves as a
# `draft_model` (DRAFT_DIR=OUT scripts/world/serve-world.sh PORT draft) with revision.json, its lineage.
#
# It stands in for SpecForge and speculators, which train EAGLE-3 heads on a GPU: here the draft is a small
# causal LM with the target's tokenizer, trained with plain next-token cross-entropy. The data path is the
# same (export -> trainer -> served draft -> evaluation): the rows are read as the trainers read them
# (`input_ids` and `loss_mask` used as written; no re-tokenizing, no re-templating).
#
# Label convention: loss_mask[t] = 1 makes input_ids[t] a target, predicted from positions < t (the logits at
# position t - 1, given input_ids[0..t-1]); loss_mask[t] = 0 tokens are context only. This is the convention
# of SpecForge's and speculators' pre-tokenized rows (the mask marks the assistant's tokens themselves, not
# the positions that predict them). A label at position 0 has nothing before it and is not trained.
#
# Refuses: a folder without train.jsonl or manifest.json; a train.jsonl whose sha256 differs from the
# manifest's; rows without `input_ids` or `loss_mask`, with lengths that differ, masks other than 0/1, ids
# outside the draft's vocabulary, or no label; an export with no row to train. validation.jsonl, when
# present, is only evaluated (the loss on its labels before and after), never trained on.
#
# Deterministic: one torch thread, deterministic algorithms, a seeded order of batches; the same export,
# starting weights, steps, seed and settings give byte-identical weights (revision.json records their sha256).
#
#   usage: train_draft.py EXPORT_DIR OUT_DIR [--steps N] [--seed S] [--start DIR] [--lr X] [--batch-tokens N]
#          (scripts/world/train-draft.sh runs it with the real-vLLM venv's python)
import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_world as MW  # noqa: E402  (the world's training loop; importing it builds nothing)

DEFAULT_START = os.path.expanduser("~/.cache/draft-studio/world/draft")
# files copied from the starting draft as they are (the architecture is unchanged: config.json too, so that the
# revision's config is byte-identical to the served starting draft's; only the weights are new)
COPIED = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
          "vocab.json", "merges.txt", "chat_template.jinja")


class Refused(Exception):
    pass


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Train the world's draft on a Draft Studio pre-tokenized export.")
    p.add_argument("export_dir", help="the export's folder (train.jsonl, manifest.json, optionally validation.jsonl)")
    p.add_argument("out_dir", help="the new draft revision's folder (must not exist, or be empty)")
    p.add_argument("--steps", type=int, default=200,
                   help="optimizer steps, the fixed budget (200: about 10-20 s on one core here, whatever the export's "
                        "size; on the world's 70-row export that is ~45 passes, and held-out loss stopped improving "
                        "after ~100-200 steps)")
    p.add_argument("--seed", type=int, default=47)
    p.add_argument("--start", default=DEFAULT_START, help="the starting weights (an HF folder)")
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (AdamW, warm-up then cosine to a tenth)")
    p.add_argument("--batch-tokens", type=int, default=2048, help="padded tokens per step (length-bucketed batches)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 keeps it deterministic and polite)")
    return p.parse_args(argv)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weights_hash(folder):
    """sha256 over the folder's config.json and weight files (name, then bytes), in name order."""
    names = sorted(n for n in os.listdir(folder) if n == "config.json" or n.endswith((".safetensors", ".bin")))
    if not any(n != "config.json" for n in names):
        raise Refused(f"{folder}: no weights (*.safetensors)")
    h = hashlib.sha256()
    for n in names:
        h.update(n.encode() + b"\0")
        with open(os.path.join(folder, n), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def category_of(row):
    """The row's category, for the report only: metadata.category, else the world's prompt id (world-CAT-NNNN)."""
    meta = row.get("metadata") or {}
    if isinstance(meta, dict) and isinstance(meta.get("category"), str):
        return meta["category"]
    m = re.search(r"world-([a-z_]+)-\d+$", str(row.get("id", "")))
    return m.group(1) if m else "(none)"


def read_rows(path, vocab):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise Refused(f"{path}:{n}: not JSON ({e})")
            rid = row.get("id", f"line {n}") if isinstance(row, dict) else f"line {n}"
            where = f"{path}:{n} (row {rid})"
            if not isinstance(row, dict) or "input_ids" not in row or "loss_mask" not in row:
                missing = [k for k in ("input_ids", "loss_mask") if not isinstance(row, dict) or k not in row]
                raise Refused(f"{where}: no {' and no '.join(missing)}: this trainer reads pre-tokenized exports "
                              f"(Draft Studio: layout `tokenized`, file JSONL), not conversations")
            ids, mask = row["input_ids"], row["loss_mask"]
            if not isinstance(ids, list) or not isinstance(mask, list):
                raise Refused(f"{where}: input_ids and loss_mask must be lists")
            if len(ids) != len(mask):
                raise Refused(f"{where}: {len(ids)} input_ids but {len(mask)} loss_mask values")
            if not ids:
                raise Refused(f"{where}: empty row")
            bad = next((x for x in ids if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < vocab), None)
            if bad is not None:
                raise Refused(f"{where}: token id {bad!r} outside the draft's vocabulary (0..{vocab - 1}): "
                              f"was this export tokenized with another tokenizer?")
            badm = next((x for x in mask if x not in (0, 1) or isinstance(x, bool)), None)
            if badm is not None:
                raise Refused(f"{where}: loss_mask value {badm!r} (expected 0 or 1)")
            if not any(mask[1:]):
                raise Refused(f"{where}: no label (loss_mask has no 1 after position 0)")
            rows.append({"id": rid, "category": category_of(row), "ids": ids, "mask": mask})
    return rows


def read_export(export_dir, vocab):
    train_path = os.path.join(export_dir, "train.jsonl")
    man_path = os.path.join(export_dir, "manifest.json")
    if not os.path.isdir(export_dir):
        raise Refused(f"{export_dir}: no such folder")
    if not os.path.exists(train_path):
        has = [n for n in sorted(os.listdir(export_dir)) if n.startswith("train")]
        raise Refused(f"{export_dir}: no train.jsonl" + (f" (has {', '.join(has)}: export as JSONL, layout `tokenized`)"
                                                         if has else ""))
    if not os.path.exists(man_path):
        raise Refused(f"{export_dir}: no manifest.json (not a Draft Studio export folder, or not a finished one)")
    manifest = json.load(open(man_path))
    files = {f.get("name"): f for f in manifest.get("files") or []}
    digest = sha256_file(train_path)
    if "train.jsonl" not in files or not files["train.jsonl"].get("sha256"):
        raise Refused(f"{man_path}: lists no sha256 for train.jsonl")
    if files["train.jsonl"]["sha256"] != digest:
        raise Refused(f"{train_path}: sha256 {digest} differs from the manifest's {files['train.jsonl']['sha256']} "
                      f"(the file changed after the export)")
    train = read_rows(train_path, vocab)
    if not train:
        raise Refused(f"{train_path}: no rows")
    if files["train.jsonl"].get("rows") not in (None, len(train)):
        raise Refused(f"{train_path}: {len(train)} rows, the manifest says {files['train.jsonl']['rows']}")
    val, val_sha = [], None
    val_path = os.path.join(export_dir, "validation.jsonl")
    if os.path.exists(val_path):
        val_sha = sha256_file(val_path)
        if "validation.jsonl" in files and files["validation.jsonl"].get("sha256") not in (None, val_sha):
            raise Refused(f"{val_path}: sha256 {val_sha} differs from the manifest's")
        val = read_rows(val_path, vocab)
    return manifest, digest, train, val, val_sha


def masked_loss(model, rows):
    """Mean next-token cross-entropy on the label tokens (same convention as training), overall and per category."""
    import torch
    import torch.nn.functional as F
    by = {}
    with torch.no_grad():
        for x in rows:
            ids = torch.tensor([x["ids"]])
            m = torch.tensor(x["mask"], dtype=torch.bool)[1:]
            logits = model(input_ids=ids).logits[0, :-1][m]
            y = ids[0, 1:][m]
            tot = F.cross_entropy(logits.float(), y, reduction="sum").item()
            hit = int((logits.argmax(-1) == y).sum())
            for key in ("all", x["category"]):
                s = by.setdefault(key, [0.0, 0, 0])
                s[0] += tot; s[1] += int(m.sum()); s[2] += hit
    return {k: {"loss": round(s[0] / s[1], 4), "argmax_hit": round(s[2] / s[1], 4), "labels": s[1]}
            for k, s in by.items()}


def main(argv=None):
    a = parse_args(argv)
    t_start = time.time()
    start = os.path.abspath(os.path.expanduser(a.start))
    export_dir = os.path.abspath(a.export_dir)
    out = os.path.abspath(a.out_dir)
    if a.steps < 1:
        raise Refused("--steps must be at least 1")
    if not os.path.exists(os.path.join(start, "config.json")):
        raise Refused(f"{start}: no starting draft (config.json); build the world with scripts/world/make-world.sh "
                      f"or pass --start")
    if os.path.exists(out) and os.listdir(out):
        raise Refused(f"{out}: exists and is not empty (a revision is never overwritten; pick a new folder)")
    start_cfg = json.load(open(os.path.join(start, "config.json")))
    vocab = int(start_cfg["vocab_size"])
    manifest, train_sha, rows, val, val_sha = read_export(export_dir, vocab)
    start_hash = weights_hash(start)

    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    pad_id = start_cfg.get("pad_token_id")
    pad_id = 0 if pad_id is None else int(pad_id)

    model = AutoModelForCausalLM.from_pretrained(start, dtype=torch.float32)
    model.eval()
    labels = sum(sum(x["mask"][1:]) for x in rows)
    cats = {}
    for x in rows:
        cats[x["category"]] = cats.get(x["category"], 0) + 1
    MW.log(f"export {manifest.get('export_id')} ({export_dir}): {len(rows)} rows, {sum(len(x['ids']) for x in rows)} "
           f"tokens, {labels} labels; by category {cats}" + (f"; validation {len(val)} rows" if val else ""))
    MW.log(f"start {start} (weights sha256 {start_hash[:16]}…); {a.steps} steps, seed {a.seed}, lr {a.lr}, "
           f"{a.batch_tokens} padded tokens a step, {a.threads} torch thread(s)")
    before = masked_loss(model, rows)
    val_before = masked_loss(model, val) if val else None
    MW.log(f"  before: loss on the export's labels {before['all']['loss']} (argmax hit {before['all']['argmax_hit']})")

    stats = {}
    ema, seconds = MW.train(model, rows, a.steps, a.batch_tokens, a.lr, a.seed, "draft", pad_id,
                            labels=lambda x: (x["ids"], x["mask"]), stats=stats)
    after = masked_loss(model, rows)
    val_after = masked_loss(model, val) if val else None
    MW.log(f"  after:  loss on the export's labels {after['all']['loss']} (argmax hit {after['all']['argmax_hit']})")

    # write to a sibling temporary folder, then rename: a revision folder is complete or absent
    parent = os.path.dirname(out) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".draft-", dir=parent)
    os.chmod(tmp, 0o755)
    try:
        model.to(torch.bfloat16).save_pretrained(tmp, safe_serialization=True)
        for name in COPIED:
            if os.path.exists(os.path.join(start, name)):
                shutil.copyfile(os.path.join(start, name), os.path.join(tmp, name))
        weights = {n: sha256_file(os.path.join(tmp, n)) for n in sorted(os.listdir(tmp)) if n.endswith(".safetensors")}
        last = stats["losses"][-min(10, len(stats["losses"])):]
        revision = {
            "kind": "draft_revision",
            "trainer": "scripts/world/train_draft.py (next-token cross-entropy on loss_mask = 1 tokens; a stand-in "
                       "for SpecForge/speculators EAGLE-3 training)",
            "export": {"dir": export_dir, "export_id": manifest.get("export_id"),
                       "train_jsonl_sha256": train_sha, "validation_jsonl_sha256": val_sha,
                       "rows": len(rows), "tokens": sum(len(x["ids"]) for x in rows), "labels": labels,
                       "rows_by_category": cats, "format": (manifest.get("spec") or {}).get("format")},
            "start": {"dir": start, "weights_sha256": start_hash},
            "settings": {"steps": a.steps, "seed": a.seed, "lr": a.lr, "batch_tokens": a.batch_tokens,
                         "threads": a.threads, "optimizer": "AdamW(betas=(0.9, 0.98), weight_decay=0.01), "
                         "clip 1.0, warm-up steps/20 then cosine to lr/10",
                         "label_convention": "loss_mask[t] = 1: input_ids[t] predicted from positions < t"},
            "seen": {"rows": stats["rows_seen"], "label_tokens": stats["label_tokens_seen"],
                     "epochs": round(stats["label_tokens_seen"] / max(1, labels), 2)},
            "final_training_loss": {"mean_last_steps": round(sum(last) / len(last), 4), "last_steps": len(last),
                                    "moving_average": round(ema, 4)},
            "loss_on_export_labels": {"before": before, "after": after},
            "loss_on_validation_labels": {"before": val_before, "after": val_after} if val else None,
            "weights_sha256": weights,
            "train_seconds": round(seconds, 1),
            "wall_seconds": round(time.time() - t_start, 1),
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__},
        }
        with open(os.path.join(tmp, "revision.json"), "w") as f:
            json.dump(revision, f, indent=1)
            f.write("\n")
        if os.path.exists(out):
            os.rmdir(out)  # empty (checked above)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    MW.log(f"draft revision written to {out} in {revision['wall_seconds']} s "
           f"(weights {next(iter(weights.values()))[:16]}…); serve it: DRAFT_DIR={out} scripts/world/serve-world.sh PORT draft")
    print(json.dumps({k: revision[k] for k in ("export", "start", "settings", "seen", "final_training_loss",
                                                "weights_sha256", "train_seconds", "wall_seconds")}))


if __name__ == "__main__":
    try:
        main()
    except Refused as e:
        print(f"train_draft: refused: {e}", file=sys.stderr)
        sys.exit(2)
