#!/usr/bin/env python3
"""Checks that SpecForge's own data code turns our export into exactly our token ids and loss masks.

Runs SpecForge's dataset-building code for one route over a conversations export (the same functions
with the same arguments its entry points pass) and compares every resulting row, by id, with our
pre-tokenized export of the same samples. Prints one line per row and, for a difference, the first
differing position with the decoded tokens around it. Exits 1 on any difference, dropped or extra
row; 2 when SpecForge refuses the input.

Routes (SpecForge a6b6b02):
  offline              scripts/prepare_hidden_states.py: its parse_args() parses the flags below,
                       Dataset.from_generator(safe_conversations_generator), load_tokenizer(),
                       build_eagle3_dataset(..., loss_mask_filter=<capture plan>), as main() does.
  online               `specforge train` with data.train_data_path: training/assembly.py
                       _load_text_tokenizer() and prepare_prompt_tasks() -> load_dataset("json") ->
                       build_eagle3_dataset(..., minimum_valid_tokens=<eagle3: 1>), as _prepare_prompts() does.
  online-pretokenized  `specforge train` with data.prompts_path = our pre-tokenized file:
                       prepare_prompt_tasks() on --tokenized (--conversations is not used).

build_eagle3_dataset drops the id column and shuffles (seed 42); rows are matched back to ids with
the same permutation (datasets' shuffle depends only on the row count and the seed), after the rows
SpecForge skips (empty conversations) and filters (too few supervised tokens) are accounted for.

Needs only SpecForge's source (no sglang): run it with the venv scripts/trainers/specforge-env.sh makes.
  usage: specforge_check.py --specforge DIR --model DIR --route offline|online|online-pretokenized
             --conversations FILE.jsonl --tokenized FILE.jsonl --chat-template NAME
             [--is-preformatted] [--train-only-last-turn] [--max-length N] [--num-proc N] ...
"""
import argparse
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import warnings
from types import SimpleNamespace


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--specforge", required=True, help="extracted SpecForge source tree")
    p.add_argument("--model", required=True, help="target model / tokenizer folder")
    p.add_argument("--route", required=True, choices=["offline", "online", "online-pretokenized"])
    p.add_argument("--conversations", help="our conversations export (JSONL)")
    p.add_argument("--tokenized", required=True, help="our pre-tokenized export of the same samples (JSONL)")
    p.add_argument("--chat-template", default="llama3",
                   help="SpecForge template name: --chat-template / data.chat_template (default llama3, as both)")
    p.add_argument("--is-preformatted", action="store_true", help="--is-preformatted / data.is_preformatted")
    p.add_argument("--train-only-last-turn", action="store_true",
                   help="data.train_only_last_turn (online only: prepare_hidden_states.py has no such flag)")
    p.add_argument("--max-length", type=int, default=2048, help="--max-length / data.max_length (default 2048)")
    p.add_argument("--num-samples", type=int, default=None, help="offline --num-samples")
    p.add_argument("--num-proc", type=int, default=1,
                   help="--build-dataset-num-proc / data.build_dataset_num_proc: only shards the work "
                        "(SpecForge's default is 8; 1 here to spare the CPU)")
    p.add_argument("--strategy", default="eagle3",
                   help="--strategy / training.strategy: selects the minimum-token rule and loss-mask filter")
    p.add_argument("--draft-model-config", default=None, help="offline --draft-model-config")
    p.add_argument("--cache-dir", default=None,
                   help="datasets/processed cache (default: a fresh temporary dir, so no stale cache is read)")
    p.add_argument("--register-template", metavar="NAME=JSON", default=None,
                   help="experiment only: register ChatTemplate(**JSON) as NAME before running; the stock "
                        "entry points cannot do this without a wrapper")
    p.add_argument("--context", type=int, default=6, help="tokens shown either side of a difference")
    p.add_argument("--quiet", action="store_true", help="print only differing rows and the summary")
    p.add_argument("--masks", choices=["exact", "report"], default="exact",
                   help="exact: a loss_mask difference fails the check; report: ids must be equal and every row "
                        "present, and mask differences are printed and tallied by token (the conversation routes "
                        "supervise the think block by SpecForge's own rule)")
    return p.parse_args()


def load_jsonl(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                rows.append((n, json.loads(line)))
    return rows


def flat(seq):
    if hasattr(seq, "tolist"):
        seq = seq.tolist()
    seq = list(seq)
    if len(seq) == 1 and isinstance(seq[0], (list, tuple)):
        seq = list(seq[0])
    return [int(x) for x in seq]


def shuffled_order(n, seed=42):
    """The permutation build_eagle3_dataset's dataset.shuffle(seed=42) applies to n rows."""
    from datasets import Dataset
    return Dataset.from_dict({"i": list(range(n))}).shuffle(seed=seed)["i"]


def align(kept_ids, produced, unfiltered):
    """Map produced rows (in order) to ids. kept_ids: ids of the rows fed to SpecForge's tokenizer, in
    output order. When a filter removed rows, `unfiltered()` gives the rows before it (same order),
    and the produced rows are matched to them as an order-preserving subsequence."""
    if len(produced) == len(kept_ids):
        return dict(zip(kept_ids, produced))
    before = unfiltered()
    if len(before) != len(kept_ids):
        raise SystemExit(f"cannot align: {len(kept_ids)} rows expected before filters, {len(before)} found")
    out, j = {}, 0
    for rid, row in zip(kept_ids, before):
        if j < len(produced) and produced[j] == row:
            out[rid] = produced[j]
            j += 1
    if j != len(produced):
        raise SystemExit("cannot align filtered rows with the unfiltered ones")
    return out


# ---------------------------------------------------------------- routes

def run_offline(a, tmp):
    """scripts/prepare_hidden_states.py main(), data part (lines 806-858 at a6b6b02)."""
    spec = importlib.util.spec_from_file_location(
        "prepare_hidden_states", os.path.join(a.specforge, "scripts", "prepare_hidden_states.py"))
    phs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(phs)  # imports sglang only lazily (offline_capture), not at module level
    if a.train_only_last_turn:
        raise SystemExit("prepare_hidden_states.py has no --train-only-last-turn flag (offline always "
                         "supervises every assistant span)")
    argv = ["prepare_hidden_states.py", "--target-model-path", a.model, "--data-path", a.conversations,
            "--chat-template", a.chat_template, "--max-length", str(a.max_length),
            "--build-dataset-num-proc", str(a.num_proc), "--strategy", a.strategy,
            "--cache-dir", tmp, "--output-path", os.path.join(tmp, "hidden_states")]
    if a.is_preformatted:
        argv.append("--is-preformatted")
    if a.num_samples is not None:
        argv += ["--num-samples", str(a.num_samples)]
    if a.draft_model_config:
        argv += ["--draft-model-config", a.draft_model_config]
    saved, sys.argv = sys.argv, argv
    try:
        args = phs.parse_args()
    finally:
        sys.argv = saved
    print("prepare_hidden_states.py " + " ".join(argv[1:]))

    from transformers import AutoConfig
    target_config = AutoConfig.from_pretrained(args.target_model_path, cache_dir=args.cache_dir,
                                               trust_remote_code=args.trust_remote_code)
    try:
        plan = phs.resolve_offline_capture_plan(args, target_config)
    except ValueError as e:
        # Capture layers depend on the target's depth (a 2-layer test model has no valid EAGLE3 layers)
        # and do not touch ids or masks; the plan's loss_mask_filter is the algorithm's own
        # (application/composition.py resolve_offline_capture: model_provider.loss_mask_filter).
        from specforge.algorithms.builtin import builtin_algorithm_registry
        flt = builtin_algorithm_registry().resolve(args.strategy).providers.model.loss_mask_filter
        print(f"note: capture plan not resolvable for this model ({e}); using {args.strategy}'s "
              f"loss_mask_filter directly")
        plan = SimpleNamespace(strategy=args.strategy, loss_mask_filter=flt)
    print(f"capture plan: strategy {plan.strategy}, loss_mask_filter {plan.loss_mask_filter}")

    dataset = phs.Dataset.from_generator(
        generator=phs.safe_conversations_generator,
        gen_kwargs={"file_path": args.data_path},
        cache_dir=os.path.join(tmp, "hf_dataset"),  # the script: <repo>/cache/hf_dataset
        num_proc=min(args.build_dataset_num_proc, 32),
    )
    if args.num_samples is not None and plan.loss_mask_filter is None:
        dataset = dataset.select(range(args.num_samples))
    tokenizer = phs.load_tokenizer(args.target_model_path, trust_remote_code=args.trust_remote_code)
    cache_params_string = (f"{args.data_path}-{args.max_length}-{args.chat_template}-{args.target_model_path}"
                           f"-{args.num_samples}-{args.is_preformatted}")
    cache_key = hashlib.md5(cache_params_string.encode()).hexdigest()

    def build(loss_mask_filter):
        return phs.build_eagle3_dataset(
            dataset=dataset, tokenizer=tokenizer, chat_template=args.chat_template,
            max_length=args.max_length, cache_dir=os.path.join(args.cache_dir, "processed_dataset"),
            cache_key=cache_key if loss_mask_filter is plan.loss_mask_filter else cache_key + "-unfiltered",
            is_preformatted=args.is_preformatted, num_proc=args.build_dataset_num_proc,
            loss_mask_filter=loss_mask_filter)

    eagle3_dataset = build(plan.loss_mask_filter)
    if plan.loss_mask_filter is not None and args.num_samples is not None:
        eagle3_dataset = eagle3_dataset.select(range(min(args.num_samples, len(eagle3_dataset))))
    rows = lambda d: [(flat(r["input_ids"]), flat(r["loss_mask"])) for r in d]
    produced = rows(eagle3_dataset)

    # Which file lines safe_conversations_generator yielded (it drops "id"): the same skip rules.
    src = []
    for _, rec in load_jsonl(args.data_path):
        conv = rec.get("conversations", []) if isinstance(rec, dict) else None
        if conv is None and isinstance(rec, dict):
            conv = []
        if not isinstance(conv, list):
            continue
        src.append((rec.get("id"), [m for m in conv if isinstance(m, dict)]))
    if len(src) != len(dataset) and args.num_samples is None:
        raise SystemExit(f"cannot map rows: generator yielded {len(dataset)}, expected {len(src)}")
    src = src[:len(dataset)]
    kept = [src[i][0] for i in shuffled_order(len(src)) if src[i][1]]  # `if not source: continue`
    return align(kept, produced, lambda: rows(build(None))), tokenizer


def run_online(a, tmp):
    """specforge/training/assembly.py _prepare_prompts() -> data/prompt_builder.py prepare_prompt_tasks()."""
    from specforge.algorithms.builtin import builtin_algorithm_registry
    from specforge.data import prompt_builder
    from specforge.training.assembly import _load_text_tokenizer

    model_provider = builtin_algorithm_registry().resolve(a.strategy).providers.model
    cfg = SimpleNamespace(model=SimpleNamespace(input_modality="text", target_model_path=a.model, cache_dir=None,
                                                trust_remote_code=False, tokenizer_pad_token_id=None))
    tokenizer = _load_text_tokenizer(cfg)
    min_loss_tokens = model_provider.minimum_loss_tokens(cfg, None)
    loss_mask_filter = model_provider.loss_mask_filter
    path = a.tokenized if a.route == "online-pretokenized" else a.conversations
    print(f"prepare_prompt_tasks({path}, chat_template={a.chat_template}, max_length={a.max_length}, "
          f"is_preformatted={a.is_preformatted}, train_only_last_turn={a.train_only_last_turn}, "
          f"min_loss_tokens={min_loss_tokens}, loss_mask_filter={loss_mask_filter})")

    def prepare(min_tokens, key):
        return prompt_builder.prepare_prompt_tasks(
            path, tokenizer, chat_template=a.chat_template, max_length=a.max_length,
            is_preformatted=a.is_preformatted, train_only_last_turn=a.train_only_last_turn,
            cache_dir=os.path.join(tmp, "processed_dataset"), cache_key=key, num_proc=a.num_proc,
            min_loss_tokens=min_tokens, max_prompts=None, loss_mask_filter=loss_mask_filter)

    tasks = prepare(min_loss_tokens, "check")
    produced = [(flat(t["payload"]["input_ids"]), flat(t["payload"]["loss_mask"])) for t in tasks]
    records = load_jsonl(path)
    if a.route == "online-pretokenized":
        # _materialize_prompt_tasks: file order, rows with too few supervised tokens skipped.
        kept = []
        for n, rec in records:
            if prompt_builder._prompt_from_record(rec, source=f"{path}:{n}", max_length=a.max_length,
                                                  min_loss_tokens=min_loss_tokens) is not None:
                kept.append(rec.get("id"))
        return align(kept, produced, lambda: []), tokenizer
    col = "text" if a.is_preformatted else "conversations"
    kept = [records[i][1].get("id") for i in shuffled_order(len(records)) if records[i][1].get(col)]

    def unfiltered():
        from datasets import load_dataset
        from specforge.data.preprocessing import build_eagle3_dataset
        d = build_eagle3_dataset(
            dataset=load_dataset("json", data_files=path, split="train"), tokenizer=tokenizer,
            chat_template=a.chat_template, max_length=a.max_length, num_proc=a.num_proc,
            cache_dir=None, cache_key=None, is_preformatted=a.is_preformatted,
            train_only_last_turn=a.train_only_last_turn, minimum_valid_tokens=None, loss_mask_filter=None)
        return [(flat(r["input_ids"]), flat(r["loss_mask"])) for r in d]
    return align(kept, produced, unfiltered), tokenizer


# ---------------------------------------------------------------- comparison

def show(tokenizer, ids, mask, lo, hi, at):
    parts = []
    for k in range(lo, min(hi, len(ids))):
        s = json.dumps(tokenizer.decode([ids[k]]), ensure_ascii=False)
        parts.append(("»" if k == at else "") + f"{s}{'*' if mask[k] else ''}")
    return " ".join(parts)


def compare(rid, ours, theirs, tokenizer, ctx):
    oi, om = ours
    ti, tm = theirs
    if oi == ti and om == tm:
        return None
    lines = []
    if oi != ti:
        k = next((i for i, (x, y) in enumerate(zip(oi, ti)) if x != y), min(len(oi), len(ti)))
        lines.append(f"input_ids differ at {k} (ours {len(oi)} tokens, SpecForge {len(ti)})")
    else:
        k = next(i for i, (x, y) in enumerate(zip(om, tm)) if x != y)
        extra = [i for i in range(len(om)) if tm[i] and not om[i]]
        missing = [i for i in range(len(om)) if om[i] and not tm[i]]
        lines.append(f"loss_mask differs at {k}: SpecForge supervises {len(extra)} tokens we do not, "
                     f"leaves out {len(missing)} we supervise (ours {sum(om)}, SpecForge {sum(tm)} supervised)")
        for name, idx in (("SpecForge only", extra), ("ours only", missing)):
            if idx:
                toks = [tokenizer.decode([oi[i]]) for i in idx]
                shown = json.dumps("".join(toks[:60]), ensure_ascii=False)
                lines.append(f"  {name}: positions {idx[:12]}{' …' if len(idx) > 12 else ''} = {shown}")
    lo, hi = max(0, k - ctx), k + ctx + 1
    lines.append(f"  ours:      {show(tokenizer, oi, om, lo, hi, k)}")
    lines.append(f"  SpecForge: {show(tokenizer, ti, tm, lo, hi, k)}")
    lines.append("  (» first difference, * supervised)")
    return lines


def main():
    a = parse_args()
    a.specforge = os.path.abspath(a.specforge)
    sys.path.insert(0, a.specforge)
    if a.route != "online-pretokenized" and not a.conversations:
        raise SystemExit("--conversations is required for this route")
    tmp = a.cache_dir or tempfile.mkdtemp(prefix="specforge-check-")
    os.environ.setdefault("HF_DATASETS_CACHE", os.path.join(tmp, "hf_datasets"))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("once")
    if a.register_template:
        from specforge.data.template import TEMPLATE_REGISTRY, ChatTemplate
        name, spec = a.register_template.split("=", 1)
        TEMPLATE_REGISTRY.register(name, ChatTemplate(**json.loads(spec)), override=True)
        print(f"registered template {name}: {spec}")

    try:
        produced, tokenizer = (run_offline if a.route == "offline" else run_online)(a, tmp)
    except Exception as e:  # noqa: BLE001 - any refusal by SpecForge is a result
        import traceback
        traceback.print_exc()
        print(f"REFUSED: SpecForge's loader raised {type(e).__name__}: {e}")
        sys.exit(2)

    ours = {}
    for _, rec in load_jsonl(a.tokenized):
        ours[rec["id"]] = (flat(rec["input_ids"]), flat(rec["loss_mask"]))
    same = differ = dropped = mask_only = 0
    tally = {}  # decoded token -> [SpecForge only, ours only]
    for rid, row in ours.items():
        if rid not in produced:
            dropped += 1
            print(f"DROPPED  {rid}: SpecForge produced no row for it")
            continue
        diff = compare(rid, row, produced[rid], tokenizer, a.context)
        if diff is None:
            same += 1
            if not a.quiet:
                print(f"SAME     {rid} ({len(row[0])} tokens, {sum(row[1])} supervised)")
        elif a.masks == "report" and row[0] == produced[rid][0]:
            mask_only += 1
            (oi, om), tm = row, produced[rid][1]
            for i, (x, y) in enumerate(zip(om, tm)):
                if x != y:
                    tally.setdefault(tokenizer.decode([oi[i]]), [0, 0])[0 if y else 1] += 1
            print(f"MASK     {rid}: " + diff[0])
            for line in diff[1:]:
                print("         " + line)
        else:
            differ += 1
            print(f"DIFFERS  {rid}: " + diff[0])
            for line in diff[1:]:
                print("         " + line)
    extra = [rid for rid in produced if rid not in ours]
    for rid in extra:
        print(f"EXTRA    {rid}: SpecForge produced a row we did not export")
    if tally:
        print("\nloss_mask differences by token (SpecForge only / ours only):")
        for token, (theirs_only, ours_only) in sorted(tally.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {json.dumps(token, ensure_ascii=False):>16}  {theirs_only:5d} / {ours_only:5d}")
    mask_note = f", {mask_only} with equal ids and a different mask" if a.masks == "report" else ""
    print(f"\n{a.route} / {a.chat_template}{' preformatted' if a.is_preformatted else ''}"
          f"{' last-turn' if a.train_only_last_turn else ''}: {same} same, {differ} differ{mask_note}, "
          f"{dropped} dropped, {len(extra)} extra, of {len(ours)}")
    sys.exit(0 if differ == dropped == len(extra) == 0 else 1)


if __name__ == "__main__":
    main()
