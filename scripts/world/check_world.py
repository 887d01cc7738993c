# Proves the world (scripts/world/make-world.sh) on the real vLLM server serving it
# (scripts/world/serve-world.sh PORT draft), with plain HTTP: streamed chat completions at
# temperature 0 with `stream_options.include_usage`, as Draft Studio sends them. Reports per category:
#  - thinking on: the share of answers that end with `finish_reason: stop` after their reasoning (a
#    reasoning span, then content or tool calls);
#  - tools: with the row's tools and `tool_choice: "auto"`, how many calls the hermes parser returned
#    (tool category), and, with the same tools offered to the other categories' prompts, that none came;
#  - thinking off: the share that ended with no reasoning;
#  - acceptance: pooled `1 + Σ accepted ÷ Σ verify steps` from each request's usage-chunk
#    `metrics.speculative_decoding`, and the server's own figure from its /metrics counters.
# Writes every answer to --out (JSONL) and the summary as JSON on stdout's last line.
# --exclude-ids-from PATH (a prompts JSONL or an export's train.jsonl; a Draft Studio row id "RUN-ID" counts as
# ID) leaves those prompts out, e.g. the ones a draft revision was trained on; --modes picks the request kinds.
#   usage: check_world.py [--url URL] [--prompts PATH] [--per-category N] [--max-tokens N] [--out PATH]
#                         [--exclude-ids-from PATH] [--modes on,off,tools-offered]
import argparse
import json
import os
import random
import re
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def post_stream(url, body, timeout=600):
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    res = {"reasoning": "", "content": "", "calls": {}, "finish_reason": None, "usage": None, "spec": None,
           "chunks": 0}
    with urllib.request.urlopen(req, timeout=timeout) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            ev = json.loads(data)
            res["chunks"] += 1
            if ev.get("usage"):
                res["usage"] = ev["usage"]
                res["spec"] = ((ev.get("metrics") or {}).get("speculative_decoding"))
            for ch in ev.get("choices") or []:
                d = ch.get("delta") or {}
                res["reasoning"] += d.get("reasoning") or d.get("reasoning_content") or ""
                res["content"] += d.get("content") or ""
                for tc in d.get("tool_calls") or []:
                    c = res["calls"].setdefault(tc.get("index", 0), {"name": "", "arguments": ""})
                    f = tc.get("function") or {}
                    c["name"] += f.get("name") or ""
                    c["arguments"] += f.get("arguments") or ""
                if ch.get("finish_reason"):
                    res["finish_reason"] = ch["finish_reason"]
    res["calls"] = [res["calls"][k] for k in sorted(res["calls"])]
    return res


def spec_counters(url):
    try:
        text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    except Exception:
        return None
    out = {}
    for line in text.splitlines():
        for key in ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total",
                    "vllm:spec_decode_num_draft_tokens_total"):
            if line.startswith(key + "{") or line.startswith(key + " "):
                out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def pooled(rows):
    steps = sum(r["spec"]["num_spec_steps"] for r in rows if r.get("spec"))
    acc = sum(r["spec"]["num_accepted_draft_tokens"] for r in rows if r.get("spec"))
    return (round(1 + acc / steps, 3) if steps else None), steps, acc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8040")
    ap.add_argument("--prompts", default=os.path.expanduser("~/.cache/draft-studio/world/datasets/prompts.jsonl"))
    ap.add_argument("--per-category", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--seed", type=int, default=47)
    ap.add_argument("--out", default="/tmp/ds/world-check.jsonl")
    ap.add_argument("--exclude-ids-from", action="append", default=[],
                    help="leave out the prompts whose ids this JSONL lists (repeatable)")
    ap.add_argument("--modes", default="on,off,tools-offered",
                    help="request kinds: on (thinking on, the row's tools with tool_choice auto), off (thinking "
                         "off), tools-offered (other rows' tools offered to the non-tool categories)")
    a = ap.parse_args()
    modes = set(a.modes.split(","))
    rows = [json.loads(l) for l in open(a.prompts)]
    excluded = set()
    for path in a.exclude_ids_from:
        for l in open(path):
            if l.strip():
                rid = str(json.loads(l).get("id", ""))
                excluded.add(rid)
                excluded.add(re.sub(r"^\d+-", "", rid))  # a Draft Studio row id is "<run id>-<prompt id>"
    n_rows = len(rows)
    rows = [x for x in rows if x["id"] not in excluded]
    n_excluded = n_rows - len(rows)
    cats = list(dict.fromkeys(r["category"] for r in rows))
    r = random.Random(a.seed)
    pick = {c: r.sample([x for x in rows if x["category"] == c], min(a.per_category, sum(1 for x in rows if x["category"] == c))) for c in cats}
    tool_rows = [x for x in rows if x.get("tools")]

    jobs = []  # (mode, row, body)
    for c in cats:
        for x in (pick[c] if "on" in modes else []):
            body = {"model": "tiny", "messages": x["messages"], "temperature": 0, "max_tokens": a.max_tokens,
                    "stream": True, "stream_options": {"include_usage": True},
                    "chat_template_kwargs": {"enable_thinking": True}}
            if x.get("tools"):
                body["tools"], body["tool_choice"] = x["tools"], "auto"
            jobs.append(("on", x, body))
        for x in (pick[c][: max(2, a.per_category // 4)] if "off" in modes else []):
            jobs.append(("off", x, {"model": "tiny", "messages": x["messages"], "temperature": 0, "max_tokens": a.max_tokens,
                                    "stream": True, "stream_options": {"include_usage": True},
                                    "chat_template_kwargs": {"enable_thinking": False},
                                    **({"tools": x["tools"], "tool_choice": "auto"} if x.get("tools") else {})}))
        if c != "tools" and tool_rows and "tools-offered" in modes:
            for x in pick[c][: max(2, a.per_category // 4)]:
                jobs.append(("tools-offered", x, {"model": "tiny", "messages": x["messages"], "temperature": 0,
                                                  "max_tokens": a.max_tokens, "stream": True,
                                                  "stream_options": {"include_usage": True},
                                                  "chat_template_kwargs": {"enable_thinking": True},
                                                  "tools": r.choice(tool_rows)["tools"], "tool_choice": "auto"}))
    before = spec_counters(a.url)
    t0 = time.time()

    def run(job):
        mode, x, body = job
        try:
            res = post_stream(a.url, body)
        except Exception as e:  # noqa: BLE001
            res = {"error": str(e)}
        return {"mode": mode, "id": x["id"], "category": x["category"], **res}

    with ThreadPoolExecutor(a.concurrency) as ex:
        results = list(ex.map(run, jobs))
    elapsed = time.time() - t0
    after = spec_counters(a.url)
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        for x in results:
            f.write(json.dumps(x, ensure_ascii=False) + "\n")

    summary = {"url": a.url, "requests": len(results), "seconds": round(elapsed), "excluded_prompts": n_excluded,
               "modes": sorted(modes), "per_category": {}}
    errors = [x for x in results if "error" in x]
    summary["errors"] = len(errors)
    for c in cats:
        on = [x for x in results if x["category"] == c and x["mode"] == "on" and "error" not in x]
        off = [x for x in results if x["category"] == c and x["mode"] == "off" and "error" not in x]
        offered = [x for x in results if x["category"] == c and x["mode"] == "tools-offered" and "error" not in x]
        ended = [x for x in on if x["finish_reason"] in ("stop", "tool_calls") and x["reasoning"].strip()
                 and (x["content"].strip() or x["calls"])]
        s = {"n": len(on),
             "stop_after_reasoning": f"{len(ended)}/{len(on)}",
             "finish_reasons": {k: sum(1 for x in on if x["finish_reason"] == k) for k in sorted({str(x['finish_reason']) for x in on})},
             "mean_completion_tokens": round(sum(x["usage"]["completion_tokens"] for x in on if x.get("usage")) / max(1, len(on)), 1),
             "thinking_off_no_reasoning": f"{sum(1 for x in off if not x['reasoning'].strip() and x['finish_reason'] in ('stop', 'tool_calls'))}/{len(off)}"}
        acc, steps, accepted = pooled(on + off + offered)
        s["acceptance"] = acc
        s["spec_steps"] = steps
        if c == "tools" or any(x["calls"] for x in on):
            counts = [len(x["calls"]) for x in on]
            s["tool_calls_per_answer"] = {str(k): counts.count(k) for k in sorted(set(counts))}
            s["calls_with_valid_json"] = sum(1 for x in on for cl in x["calls"] if _json_ok(cl["arguments"]))
            s["calls_total"] = sum(counts)
            s["tool_markup_left_in_content"] = sum(1 for x in on if "<tool_call>" in x["content"])
        if offered:
            s["tools_offered_answers_with_calls"] = f"{sum(1 for x in offered if x['calls'])}/{len(offered)}"
        summary["per_category"][c] = s
    acc, steps, accepted = pooled([x for x in results if "error" not in x])
    summary["acceptance_pooled_from_usage_chunks"] = acc
    if before and after and after.get("vllm:spec_decode_num_drafts_total", 0) > before.get("vllm:spec_decode_num_drafts_total", 0):
        d = after["vllm:spec_decode_num_drafts_total"] - before["vllm:spec_decode_num_drafts_total"]
        acc_t = after["vllm:spec_decode_num_accepted_tokens_total"] - before["vllm:spec_decode_num_accepted_tokens_total"]
        summary["acceptance_from_metrics_counters"] = round(1 + acc_t / d, 3)
    on_all = [x for x in results if x["mode"] == "on" and "error" not in x]
    summary["stop_after_reasoning_all"] = f"{sum(1 for x in on_all if x['finish_reason'] in ('stop', 'tool_calls') and x['reasoning'].strip() and (x['content'].strip() or x['calls']))}/{len(on_all)}"
    for c, s in summary["per_category"].items():
        print(f"{c:<11} {json.dumps(s)}")
    print(json.dumps(summary))


def _json_ok(s):
    try:
        return isinstance(json.loads(s), dict)
    except Exception:  # noqa: BLE001
        return False


if __name__ == "__main__":
    sys.exit(main())
