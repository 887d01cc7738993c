"""Checks that speculators' own data preprocessing (speculators 0.9.0 from PyPI) builds, from a
Draft Studio conversations export, exactly the token ids and loss masks of our pre-tokenized export
of the same samples. Run it with the python that scripts/trainers/speculators-env.sh prints.

What it runs is what `speculators prepare-data --data FILE.jsonl --render-endpoint URL` runs,
minus its shuffles and token-frequency pass:
  speculators.data_generation.preprocessing.load_raw_dataset(FILE)        (the CLI's loader)
  speculators.data_generation.preprocessing.load_processor(MODEL)
  speculators.data_generation.preprocessing.build_speculator_training_dataset(
      dataset, processor, max_length=SEQ, num_proc=1, render_endpoint=URL)
once per conversation (`dataset.select([i])`, so the Arrow schema is the whole file's and every
output row is attributable to its conversation) and, unless --no-whole-pass, once over the whole
file, whose output must be those per-conversation rows concatenated in file order.

speculators fans a conversation out to one row per assistant turn (message index > 0), in turn
order. Our rows are matched to conversation i by id: `<conversation id>` or
`<conversation id>_turn<k>` (k = 0-based among that conversation's rows), sorted by k. A
conversation with several speculators rows but a single row of ours (a per-conversation row) is
compared with the last speculators row, its loss mask with the union of every turn's mask. Without
an `id` in the tokenized file, rows are matched by position against speculators' rows in order.

Without --render-endpoint it starts `vllm launch render MODEL` (vLLM's GPU-less render server)
on 127.0.0.1:--port itself, with --max-model-len = --seq-length (speculators sends
truncate_prompt_tokens=--seq-length, which vLLM refuses above the server's max model length), and
stops it on exit.

Exit status: 0 when every row matches; 1 on any difference, dropped or extra row; 2 on usage or
setup errors.
  usage: speculators_check.py --conversations C.jsonl --tokenized T.jsonl --model DIR
             [--render-endpoint http://127.0.0.1:PORT | --vllm PATH --port PORT] [--seq-length N]
"""

import argparse
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SPECULATORS_VERSION = "0.9.0"
PREPROCESSING_LOGGER = "speculators.data_generation.preprocessing"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conversations", required=True, help="our conversations export (JSONL)")
    p.add_argument("--tokenized", required=True, help="our pre-tokenized export of the same samples (JSONL)")
    p.add_argument("--model", required=True, help="target model directory (tokenizer + chat template)")
    p.add_argument("--render-endpoint", help="base URL of a running vLLM server or `vllm launch render`; "
                   "started here when absent")
    p.add_argument("--vllm", help="vllm executable for the render server (default: ~/.cache/real-vllm/venv/bin/vllm, "
                   "else `python -m vllm.entrypoints.cli.main`)")
    p.add_argument("--port", type=int, default=8131, help="port for the render server started here")
    p.add_argument("--seq-length", type=int, default=4096,
                   help="speculators' --seq-length (max_length); must not exceed the render server's max model length")
    p.add_argument("--context", type=int, default=6, help="tokens shown either side of a difference")
    p.add_argument("--no-whole-pass", action="store_true", help="skip the pass over the whole file")
    p.add_argument("--render-log", default=None, help="log file of the render server started here")
    p.add_argument("--render-arg", action="append", default=[],
                   help="extra flag for the render server started here (repeatable; use --render-arg=--flag)")
    p.add_argument("--no-tool-parser", action="store_true",
                   help="start the render server without --enable-auto-tool-choice --tool-call-parser hermes")
    p.add_argument("--show-supervised", action="store_true", help="print each row's supervised text")
    return p.parse_args()


def read_jsonl(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{n}: not JSON: {e}")
    return rows


# ---------------------------------------------------------------- render server


def health(endpoint, timeout=2.0):
    try:
        with urllib.request.urlopen(f"{endpoint.rstrip('/')}/health", timeout=timeout) as r:
            return r.status == 200
    except Exception:
        return False


class RenderServer:
    """`vllm launch render MODEL` in its own process group, stopped on exit."""

    def __init__(self, args):
        self.proc = None
        self.args = args

    def start(self):
        a = self.args
        endpoint = f"http://127.0.0.1:{a.port}"
        if health(endpoint):
            raise SystemExit(f"something already answers on {endpoint}; pass it as --render-endpoint or pick --port")
        if a.vllm:
            cmd = [a.vllm]
        elif (Path.home() / ".cache/real-vllm/venv/bin/vllm").exists():
            cmd = [str(Path.home() / ".cache/real-vllm/venv/bin/vllm")]
        else:
            cmd = [sys.executable, "-m", "vllm.entrypoints.cli.main"]
        cmd += ["launch", "render", a.model, "--host", "127.0.0.1", "--port", str(a.port),
                "--max-model-len", str(a.seq_length)]
        if not a.no_tool_parser:
            # Without these vLLM answers 400 to any request with `tools` ("auto" tool choice requires
            # --enable-auto-tool-choice and --tool-call-parser), and speculators drops the row.
            cmd += ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
        cmd += a.render_arg
        log_path = a.render_log or f"/tmp/speculators-check-render-{a.port}.log"
        env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_TARGET_DEVICE="cpu")
        print(f"starting render server: {' '.join(cmd)}  (log: {log_path})", flush=True)
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        for _ in range(300):
            if health(endpoint):
                return endpoint
            if self.proc.poll() is not None:
                raise SystemExit(f"render server exited with {self.proc.returncode}; see {log_path}")
            time.sleep(1)
        self.stop()
        raise SystemExit(f"render server did not become healthy in 300 s; see {log_path}")

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # our own child's group (start_new_session)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass
        self.proc = None


# ---------------------------------------------------------------- speculators


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage().strip())


def speculators_rows(dataset, processor, endpoint, seq_length):
    from speculators.data_generation.preprocessing import build_speculator_training_dataset

    out = build_speculator_training_dataset(dataset, processor, max_length=seq_length, num_proc=1,
                                            render_endpoint=endpoint)
    return [(row["input_ids"].tolist(), row["loss_mask"].tolist()) for row in out]


# ---------------------------------------------------------------- comparison


def decode_window(tok, ids, mask, at, context):
    lo, hi = max(0, at - context), min(len(ids), at + context + 1)
    parts = []
    for i in range(lo, hi):
        piece = tok.decode([ids[i]])
        mark = ">>" if i == at else ""
        parts.append(f"{mark}{i}:{ids[i]}{'*' if mask[i] else ''}={piece!r}")
    return " ".join(parts)


def compare(tok, ours, theirs, context):
    """Returns a list of difference lines (empty when equal)."""
    (ids_o, mask_o), (ids_t, mask_t) = ours, theirs
    diffs = []
    if ids_o != ids_t:
        at = next((i for i, (a, b) in enumerate(zip(ids_o, ids_t)) if a != b), min(len(ids_o), len(ids_t)))
        diffs.append(f"input_ids differ at position {at} (ours {len(ids_o)} tokens, speculators {len(ids_t)})")
        if at < len(ids_o):
            diffs.append("  ours:        " + decode_window(tok, ids_o, mask_o, at, context))
        if at < len(ids_t):
            diffs.append("  speculators: " + decode_window(tok, ids_t, mask_t, at, context))
        if at >= len(ids_o) or at >= len(ids_t):
            longer, name = (ids_o, "ours") if len(ids_o) > len(ids_t) else (ids_t, "speculators")
            diffs.append(f"  {name} continues with {tok.decode(longer[at:at + 2 * context])!r}")
        return diffs
    if mask_o != mask_t:
        at = next(i for i, (a, b) in enumerate(zip(mask_o, mask_t)) if a != b)
        n_o, n_t = sum(mask_o), sum(mask_t)
        diffs.append(f"loss_mask differs at position {at} (supervised: ours {n_o}, speculators {n_t}); "
                     "* marks a supervised token")
        diffs.append("  ours:        " + decode_window(tok, ids_o, mask_o, at, context))
        diffs.append("  speculators: " + decode_window(tok, ids_t, mask_t, at, context))
    return diffs


def supervised_text(tok, ids, mask):
    """The supervised stretches, decoded, joined with ' | '."""
    spans, cur = [], []
    for t, m in zip(ids, mask):
        if m:
            cur.append(t)
        elif cur:
            spans.append(cur)
            cur = []
    if cur:
        spans.append(cur)
    return " | ".join(tok.decode(s) for s in spans)


def union_of_turns(rows):
    """The mask of one row supervising every turn: the last row's ids, each turn's mask OR-ed in.
    Requires every earlier row to be a prefix of the last (history renders unchanged)."""
    ids, mask = rows[-1][0], list(rows[-1][1])
    for r_ids, r_mask in rows[:-1]:
        if ids[: len(r_ids)] != r_ids:
            return None
        for i, m in enumerate(r_mask):
            mask[i] |= m
    return ids, mask


def group_ours(conv_ids, tokenized):
    """conversation id -> [(k, row)], plus rows that match no conversation."""
    groups = {cid: [] for cid in conv_ids}
    unmatched = []
    for row in tokenized:
        rid = str(row.get("id"))
        if rid in groups:
            groups[rid].append((-1, row))
            continue
        m = re.fullmatch(r"(.*)_turn(\d+)", rid)
        if m and m.group(1) in groups:
            groups[m.group(1)].append((int(m.group(2)), row))
        else:
            unmatched.append(rid)
    for rows in groups.values():
        rows.sort(key=lambda kr: kr[0])
    return groups, unmatched


def main():
    args = parse_args()
    from importlib.metadata import version

    if version("speculators") != SPECULATORS_VERSION:
        print(f"warning: speculators {version('speculators')} installed, this check targets {SPECULATORS_VERSION}",
              file=sys.stderr)
    import datasets

    datasets.disable_progress_bars()
    logging.basicConfig(level=logging.WARNING, format="  [%(name)s] %(levelname)s %(message)s")
    from speculators.data_generation.preprocessing import load_processor, load_raw_dataset

    collector = Collect()  # after the import: importing it (vLLM, transformers) reconfigures logging
    logging.getLogger(PREPROCESSING_LOGGER).addHandler(collector)

    raw, _ = load_raw_dataset(args.conversations)
    if "conversations" not in raw.column_names:
        print(f"FAIL: {args.conversations} has no `conversations` column (columns: {raw.column_names}); "
              "speculators reads natural-language rows only from `conversations`")
        return 1
    print(f"speculators {version('speculators')}, datasets {datasets.__version__}; "
          f"{len(raw)} conversations; columns {raw.column_names}; features {raw.features}")
    if "tools" in raw.column_names:
        tools_feature = str(raw.features["tools"])
        if "Json" not in tools_feature and not tools_feature.startswith("Value('string"):
            print("warning: datasets loaded `tools` as Arrow structs unified across rows (datasets < 4.8.4): "
                  "foreign keys become null and key order changes; write `tools` as JSON text or use "
                  "datasets >= 4.8.4")
    tokenized = read_jsonl(args.tokenized)
    for n, row in enumerate(tokenized):
        if "input_ids" not in row or "loss_mask" not in row:
            sys.exit(f"{args.tokenized}: row {n} lacks input_ids/loss_mask")
    processor = load_processor(args.model)
    tok = getattr(processor, "tokenizer", processor)

    server = None
    endpoint = args.render_endpoint
    try:
        if endpoint is None:
            server = RenderServer(args)
            endpoint = server.start()
        elif not health(endpoint):
            print(f"FAIL: no server answers {endpoint}/health")
            return 2
        print(f"render endpoint: {endpoint}")

        per_conv = []
        failures = 0
        for i in range(len(raw)):
            before = len(collector.records)
            rows = speculators_rows(raw.select([i]), processor, endpoint, args.seq_length)
            per_conv.append((rows, collector.records[before:]))

        if not args.no_whole_pass:
            whole = speculators_rows(raw, processor, endpoint, args.seq_length)
            flat = [r for rows, _ in per_conv for r in rows]
            if whole != flat:
                failures += 1
                print(f"FAIL whole-file pass: {len(whole)} rows, per-conversation passes gave {len(flat)} "
                      "(or different content); rows cannot be attributed by order")
            else:
                print(f"whole-file pass: {len(whole)} rows, identical to the per-conversation rows in order")

        conv_ids = [str(x) for x in raw["id"]] if "id" in raw.column_names else None
        has_ids = conv_ids is not None and all("id" in r for r in tokenized)
        n_match = n_rows = 0
        if has_ids:
            groups, unmatched = group_ours(conv_ids, tokenized)
            for rid in unmatched:
                failures += 1
                print(f"FAIL extra row {rid}: matches no conversation id")
            pairs = []
            for i, cid in enumerate(conv_ids):
                theirs, logs = per_conv[i]
                ours = [(row["input_ids"], row["loss_mask"]) for _, row in groups[cid]]
                our_ids = [row["id"] for _, row in groups[cid]]
                if not ours and not theirs:
                    print(f"--   {cid}: no rows on either side (no assistant turn after the first message)")
                    continue
                if len(ours) == 1 and len(theirs) > 1:
                    u = union_of_turns(theirs)
                    label = f"{cid} (our per-conversation row vs the union of speculators' {len(theirs)} turn rows)"
                    if u is None:
                        failures += 1
                        print(f"FAIL {label}: speculators' turn rows are not prefixes of one another "
                              "(history re-renders differently), so one row cannot hold them all")
                        for k, t in enumerate(theirs):
                            print(f"  speculators turn {k}: {len(t[0])} tokens, {sum(t[1])} supervised")
                        continue
                    pairs.append((label, ours[0], u))
                    continue
                # k of each of our rows: its _turn<k> suffix, or 0 for a bare conversation id.
                by_k = {max(k, 0): (rid, row) for (k, _), rid, row in zip(groups[cid], our_ids, ours)}
                if len(ours) != len(theirs) or len(by_k) != len(ours):
                    failures += 1
                    print(f"FAIL {cid}: speculators built {len(theirs)} rows, we have {len(ours)} ({our_ids})")
                    for line in logs:
                        print(f"  speculators log: {line}")
                for k in range(max(len(theirs), max(by_k, default=-1) + 1)):
                    if k not in by_k:
                        if k < len(theirs):
                            print(f"  missing: our row for {cid} turn {k} (speculators has it: "
                                  f"{len(theirs[k][0])} tokens, {sum(theirs[k][1])} supervised)")
                        continue
                    if k >= len(theirs):
                        print(f"  extra: our row {by_k[k][0]} has no speculators counterpart")
                        continue
                    pairs.append((by_k[k][0], by_k[k][1], theirs[k]))
        else:
            print("matching rows by position (no id on the conversations or tokenized rows)")
            theirs_flat = [r for rows, _ in per_conv for r in rows]
            ours_flat = [(r["input_ids"], r["loss_mask"]) for r in tokenized]
            if len(ours_flat) != len(theirs_flat):
                failures += 1
                print(f"FAIL row count: speculators built {len(theirs_flat)} rows, we have {len(ours_flat)}")
                for i, (rows, logs) in enumerate(per_conv):
                    print(f"  conversation {i}: {len(rows)} rows" + "".join(f"\n    log: {x}" for x in logs))
            pairs = [(f"row {n}", o, t) for n, (o, t) in enumerate(zip(ours_flat, theirs_flat))]

        for label, ours, theirs in pairs:
            n_rows += 1
            diffs = compare(tok, ours, theirs, args.context)
            if diffs:
                failures += 1
                print(f"FAIL {label}")
                for d in diffs:
                    print(f"  {d}")
            else:
                n_match += 1
                print(f"ok   {label}: {len(theirs[0])} tokens, {sum(theirs[1])} supervised")
            if args.show_supervised:
                print(f"  speculators supervised: {supervised_text(tok, *theirs)!r}")
                if diffs:
                    print(f"  ours supervised:        {supervised_text(tok, *ours)!r}")
        print(f"{n_match}/{n_rows} compared rows match; {failures} problem(s)")
        return 1 if failures else 0
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
