# Compares two runs of scripts/world/check_world.py on the same prompts (e.g. the starting draft, then a
# revision trained on an export by scripts/world/train_draft.py): per category, the pooled acceptance
# (1 + Σ accepted ÷ Σ verify steps) of each, their difference, and a paired bootstrap 95% interval of the
# difference (prompts resampled within the category, both runs' figures recomputed on the same resample).
# Also counts the answers that differ between the runs: at temperature 0 the target's answer should not
# depend on the draft, so the comparison is on the same text.
#   usage: compare_checks.py BEFORE.jsonl AFTER.jsonl [--mode on] [--boot 2000] [--seed 47]
import argparse
import json
import random


def load(path, mode):
    out = {}
    for l in open(path):
        x = json.loads(l)
        if "error" in x or not x.get("spec") or (mode and x["mode"] != mode):
            continue
        out[(x["mode"], x["id"])] = x
    return out


def pooled(xs):
    steps = sum(x["spec"]["num_spec_steps"] for x in xs)
    return 1 + sum(x["spec"]["num_accepted_draft_tokens"] for x in xs) / steps if steps else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before"); ap.add_argument("after")
    ap.add_argument("--mode", default="on", help="request kind to compare ('' for all)")
    ap.add_argument("--boot", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=47)
    a = ap.parse_args()
    b, c = load(a.before, a.mode), load(a.after, a.mode)
    keys = sorted(set(b) & set(c))
    cats = list(dict.fromkeys(b[k]["category"] for k in keys))
    r = random.Random(a.seed)
    res = {"paired_requests": len(keys), "only_before": len(set(b) - set(c)), "only_after": len(set(c) - set(b)),
           "per_category": {}}

    def row(ks):
        before, after = pooled([b[k] for k in ks]), pooled([c[k] for k in ks])
        diffs = []
        for _ in range(a.boot):
            s = [r.choice(ks) for _ in ks]
            diffs.append(pooled([c[k] for k in s]) - pooled([b[k] for k in s]))
        diffs.sort()
        same = sum(1 for k in ks if (b[k]["reasoning"], b[k]["content"], b[k]["calls"]) ==
                   (c[k]["reasoning"], c[k]["content"], c[k]["calls"]))
        return {"n": len(ks), "before": round(before, 3), "after": round(after, 3), "diff": round(after - before, 3),
                "ci95": [round(diffs[int(0.025 * len(diffs))], 3), round(diffs[int(0.975 * len(diffs)) - 1], 3)],
                "same_answer": f"{same}/{len(ks)}"}

    for cat in cats:
        res["per_category"][cat] = row([k for k in keys if b[k]["category"] == cat])
    res["overall"] = row(keys)
    print(f"{'category':<11} {'n':>4} {'before':>7} {'after':>7} {'diff':>7}  95% interval     same answer")
    for cat, s in list(res["per_category"].items()) + [("overall", res["overall"])]:
        print(f"{cat:<11} {s['n']:>4} {s['before']:>7.3f} {s['after']:>7.3f} {s['diff']:>+7.3f}  "
              f"[{s['ci95'][0]:+.3f}, {s['ci95'][1]:+.3f}]  {s['same_answer']}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
