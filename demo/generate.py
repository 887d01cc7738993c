#!/usr/bin/env python3
"""Writes demo/conversations.jsonl: a few hundred ShareGPT-style conversations with a category
column, built from hand-written templates. Deterministic: the same seed gives the same file.

    python3 demo/generate.py            # rewrites demo/conversations.jsonl
"""

import json
import random
from pathlib import Path

SEED = 20261201
COUNT = 360

# Each category: subjects, then prompt templates using {s} (a subject) and sometimes {t} (a
# second detail), and answer openers. Prompts range from one line to a pasted context.
CATEGORIES = {
    "coding": {
        "subjects": ["a Rust iterator adapter", "a Python dataclass", "a SQL window function", "a TypeScript generic",
                     "a Go worker pool", "a bash retry loop", "a React effect hook", "a binary search",
                     "an LRU cache", "a rate limiter", "a JSON schema validator", "a CSV parser"],
        "details": ["without extra allocations", "with tests", "that handles empty input", "for a hot loop",
                    "that is safe to call from many threads", "with clear error messages"],
        "prompts": [
            "Write {s} {t}.",
            "Can you explain how {s} works, step by step?",
            "I keep getting an off-by-one error in {s}. What are the usual mistakes?",
            "Review this plan: I want to implement {s} {t}. What would you change?",
            "What is the idiomatic way to write {s}? Show a short example and say why it is idiomatic.",
        ],
        "answers": ["Here is a compact version", "The key idea is", "A common pitfall is", "Let's build it in three steps"],
    },
    "math": {
        "subjects": ["the derivative of x^3 ln x", "the sum of the first 100 odd numbers", "a 3x3 determinant",
                     "the probability of two sixes in four rolls", "the integral of sin^2 x", "a geometric series",
                     "the eigenvalues of [[2,1],[1,2]]", "the number of ways to seat 6 people at a round table",
                     "the limit of (1 + 1/n)^n", "a system of two linear equations"],
        "details": ["and check the result", "showing every step", "in two different ways", "with an intuition first"],
        "prompts": [
            "Compute {s} {t}.",
            "How do I find {s}?",
            "My answer for {s} differs from the book's. Walk me through it {t}.",
            "Explain {s} to a high-school student.",
        ],
        "answers": ["Start from the definition", "Let's set it up", "First, note that", "The trick here is"],
    },
    "writing": {
        "subjects": ["a cover letter for a data engineer role", "a product launch announcement", "a short poem about rain",
                     "an apology email to a customer", "a toast for a friend's wedding", "a README introduction",
                     "a two-paragraph story about a lighthouse keeper", "a LinkedIn post about a team milestone"],
        "details": ["in a warm tone", "under 150 words", "that avoids clichés", "for a skeptical audience", "with a strong opening line"],
        "prompts": [
            "Write {s} {t}.",
            "Draft {s}. Keep it {t}.",
            "Here is my draft of {s}: it feels flat. How can I make it better {t}?",
            "Give me three different openings for {s}.",
        ],
        "answers": ["Here is a draft", "Three options", "A few suggestions", "Try this version"],
    },
    "science": {
        "subjects": ["why the sky is blue", "how vaccines train the immune system", "what causes the seasons",
                     "how a transistor switches", "why ice floats", "how CRISPR edits genes", "what dark matter is",
                     "how plate tectonics shapes mountains", "why stars twinkle", "how batteries store energy"],
        "details": ["in simple terms", "with one everyday analogy", "for a curious ten-year-old", "with the key equation"],
        "prompts": [
            "Explain {s} {t}.",
            "What is the current understanding of {s}?",
            "My friend says {s} has a simple answer. Is that right? Explain {t}.",
        ],
        "answers": ["In short", "The main reason is", "It comes down to", "Scientists explain it like this"],
    },
    "business": {
        "subjects": ["pricing a B2B SaaS product", "running a quarterly planning meeting", "writing an OKR for support",
                     "negotiating a vendor contract", "hiring a first sales person", "reducing customer churn",
                     "presenting a budget to the board", "choosing between two job offers"],
        "details": ["for a team of ten", "with a small budget", "in a regulated industry", "when time is short"],
        "prompts": [
            "What should I think about when {s} {t}?",
            "Give me a checklist for {s}.",
            "We are {s} {t}. What are the common mistakes?",
        ],
        "answers": ["A few principles help", "Here is a checklist", "The biggest mistakes are", "Start with"],
    },
    "travel": {
        "subjects": ["three days in Lisbon", "a rail trip through the Alps", "a week in Japan in autumn",
                     "a weekend in Edinburgh", "hiking in Patagonia", "a family trip to Copenhagen", "a road trip in Iceland"],
        "details": ["on a budget", "with two small children", "without a car", "for someone who loves food", "in the rainy season"],
        "prompts": [
            "Plan {s} {t}.",
            "What should I not miss during {s}?",
            "Is {s} a good idea {t}? What would you recommend instead?",
        ],
        "answers": ["Here is a day-by-day plan", "Don't miss", "It can work well if", "A good rhythm is"],
    },
    "health": {
        "subjects": ["building a running habit", "sleeping better after night shifts", "stretching for desk workers",
                     "eating more protein as a vegetarian", "recovering from a sprained ankle", "reducing screen-time headaches"],
        "details": ["with only 20 minutes a day", "at age 50", "without special equipment", "while travelling often"],
        "prompts": [
            "Give me practical advice on {s} {t}.",
            "What does the evidence say about {s}?",
            "I have tried {s} before and gave up. How do I make it stick {t}?",
        ],
        "answers": ["Start small", "The evidence suggests", "A simple plan", "Keep in mind"],
    },
    "cooking": {
        "subjects": ["a weeknight lentil curry", "sourdough starter maintenance", "a crisp roast potato",
                     "a vegan chocolate cake", "fresh pasta without a machine", "a quick miso soup", "a Sunday ragù"],
        "details": ["for four people", "in under 30 minutes", "without an oven", "with pantry staples"],
        "prompts": [
            "Give me a recipe for {s} {t}.",
            "What goes wrong most often with {s}?",
            "How can I scale {s} up {t}?",
        ],
        "answers": ["Ingredients", "The usual culprit is", "Here's a reliable method", "For best results"],
    },
    "history": {
        "subjects": ["the fall of the Western Roman Empire", "the printing press", "the Meiji Restoration",
                     "the Hanseatic League", "the Apollo programme", "the Silk Road", "the French Revolution"],
        "details": ["in five bullet points", "and its lasting effects", "from an economic angle", "for a podcast script"],
        "prompts": [
            "Summarize {s} {t}.",
            "What were the main causes of {s}?",
            "How do historians disagree about {s}?",
        ],
        "answers": ["In brief", "Historians point to", "Several forces were at work", "The short version"],
    },
    "devops": {
        "subjects": ["a Kubernetes readiness probe", "a PostgreSQL connection pool", "a blue-green deployment",
                     "log rotation on a busy server", "a GitHub Actions cache", "TLS certificate renewal",
                     "a Prometheus alert on error rate", "a systemd service that restarts on failure"],
        "details": ["for a small team", "without downtime", "that we can test locally", "with sane defaults"],
        "prompts": [
            "How do I set up {s} {t}?",
            "Our {s} keeps misbehaving under load. Where should I look first?",
            "Write a minimal config for {s} {t} and explain each line.",
        ],
        "answers": ["Here is a minimal setup", "Check these first", "The config below", "A robust approach"],
    },
}

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a concise expert. Answer in plain language.",
    "You are a patient tutor who explains step by step.",
]

FOLLOW_UPS = [
    "Thanks. Can you make it shorter?",
    "Could you give a concrete example?",
    "What would you do differently if time were short?",
    "Can you turn that into a checklist?",
    "Why is that better than the obvious approach?",
]

CONTEXT_SNIPPETS = [
    "For context, here is what I have so far:\n\n",
    "Some background first. ",
    "I pasted my notes below so you can see where I am stuck.\n\n",
]

NOTES = [
    "I tried the straightforward approach and it mostly works, but the edge cases bite.",
    "My manager wants something we can explain in a short meeting.",
    "We have a deadline at the end of the week and limited help.",
    "I read two blog posts that contradict each other on this.",
    "The first attempt was too slow and hard to read.",
    "Whatever we choose must be easy to hand over to a new colleague.",
]


def answer(rng, spec, subject, detail):
    opener = rng.choice(spec["answers"])
    body = [f"{opener}: {subject} is easier to handle once you separate the goal from the details."]
    for step in range(rng.randint(2, 4)):
        body.append(f"{step + 1}. {rng.choice(NOTES)} With that in mind, focus on {detail or 'the essentials'}.")
    return "\n".join(body)


def conversation(rng, index):
    category = rng.choice(sorted(CATEGORIES))
    spec = CATEGORIES[category]
    subject = rng.choice(spec["subjects"])
    detail = rng.choice(spec["details"])
    prompt = rng.choice(spec["prompts"]).format(s=subject, t=detail)
    length = rng.random()
    if length > 0.75:
        notes = " ".join(rng.sample(NOTES, k=rng.randint(2, 5)))
        prompt = rng.choice(CONTEXT_SNIPPETS) + notes + "\n\n" + prompt
    if length > 0.93:
        prompt += "\n\n" + "\n".join(f"- constraint {i + 1}: {rng.choice(NOTES).lower()}" for i in range(rng.randint(3, 8)))
    turns = []
    if rng.random() < 0.3:
        turns.append({"from": "system", "value": rng.choice(SYSTEM_PROMPTS)})
    turns.append({"from": "human", "value": prompt})
    turns.append({"from": "gpt", "value": answer(rng, spec, subject, detail)})
    for _ in range(rng.choice([0, 0, 0, 1, 1, 2])):
        turns.append({"from": "human", "value": rng.choice(FOLLOW_UPS)})
        turns.append({"from": "gpt", "value": answer(rng, spec, subject, None)})
    return {"id": f"demo-{index:04d}", "category": category, "conversations": turns}


def main():
    rng = random.Random(SEED)
    out = Path(__file__).resolve().parent / "conversations.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for i in range(COUNT):
            f.write(json.dumps(conversation(rng, i), ensure_ascii=False) + "\n")
    print(f"wrote {COUNT} conversations to {out}")


if __name__ == "__main__":
    main()
