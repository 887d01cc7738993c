"""Reference input_ids and loss masks from Hugging Face transformers, for the template parity test
(engine/tests/template_parity.rs runs this with the interpreter named by DS_PARITY_PYTHON).

    python reference.py FIXTURES_DIR CONVERSATIONS_JSON OUT_JSON

Every rendered character comes from transformers' own apply_chat_template on the fixture's
template and tokenizer, never from our renderer. The loss mask follows docs/export.md
("What is supervised"):

- a template with {% generation %} blocks: transformers' return_assistant_tokens_mask, as is;
- otherwise the same definition the exporter implements, computed here from transformers'
  renders (engine/src/export/spans.rs says it in full): assistant turn i is supervised from the
  end of render(turns[:i], add_generation_prompt) — or, when render(turns[:i+1]) does not begin
  with it, from where the two part after render(turns[:i]), moved back to the start of the
  prompt's added token or text run it falls in — to the end of render(turns[:i+1]), when that
  render is how the whole conversation's begins; a turn the template renders differently once
  later turns follow is left unsupervised. Character spans become token positions through the fast
  tokenizer's offsets, with transformers' own overlap rule.

strftime_now is pinned to the date in the conversations file, as the exporter pins it.
"""

import datetime
import json
import re
import sys
import pathlib

import jinja2
import tokenizers
import transformers
from transformers.utils import chat_template_utils


def pin_date(iso):
    day = datetime.date.fromisoformat(iso)

    class Pinned(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(day.year, day.month, day.day)

    # strftime_now calls `datetime.now()` through this module's global.
    chat_template_utils.datetime = Pinned


def arguments(text):
    # As vLLM hands calls to the template (and transformers' docs ask): the arguments as the
    # object they spell; text that is not a JSON object stays text.
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def messages(turns):
    out = []
    for t in turns:
        m = {"role": t["role"], "content": t["content"]}
        if t.get("tool_calls"):
            m["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["function"]["name"], "arguments": arguments(c["function"]["arguments"])}}
                for c in t["tool_calls"]
            ]
        if t.get("tool_call_id") is not None:
            m["tool_call_id"] = t["tool_call_id"]
        if t.get("reasoning_content") is not None:
            m["reasoning_content"] = t["reasoning_content"]
        out.append(m)
    return out


def served_tools(tools):
    """The tools as the target's server hands them to its template, which is what the exporter
    renders: Draft Studio keeps a row's tools as the source wrote them, key order included, and
    sends them so, and vLLM passes each through ChatCompletionToolsParam.model_dump(): type, then
    function with name, description and parameters (None when absent), strict and defer_loading
    only when set (a tool's defer_loading copied into a function without one), other keys dropped
    (vllm/entrypoints/generate/base/protocol.py, FunctionDefinition); below that, everything in the
    order written. Call arguments keep the order they were written in: both sides parse them from
    text."""
    out = []
    for tool in tools:
        fn = tool.get("function")
        if fn is None:
            out.append(tool)
            continue
        described = {"name": fn.get("name"), "description": fn.get("description"), "parameters": fn.get("parameters")}
        if fn.get("strict") is not None:
            described["strict"] = fn["strict"]
        defer = fn.get("defer_loading") if fn.get("defer_loading") is not None else tool.get("defer_loading")
        if defer is not None:
            described["defer_loading"] = defer
        served = {"type": "function", "function": described}
        if tool.get("defer_loading") is not None:
            served["defer_loading"] = tool["defer_loading"]
        out.append(served)
    return out


def template_kwargs(conversation):
    thinking = conversation.get("thinking")
    kwargs = {} if thinking is None else {"enable_thinking": thinking, "thinking": thinking}
    if conversation.get("tools") is not None:
        kwargs["tools"] = served_tools(conversation["tools"])
    return kwargs


def has_generation_blocks(template):
    # transformers' own test for the tag (render_jinja_template).
    return re.search(r"\{\%-?\s*generation\s*-?\%\}", template) is not None


def mask_from_spans(offsets, spans):
    # transformers' apply_chat_template: a token is supervised when it overlaps a span.
    mask = [0] * len(offsets)
    span_idx = 0
    for i, (start, end) in enumerate(offsets):
        while span_idx < len(spans) and start >= spans[span_idx][1]:
            span_idx += 1
        if span_idx == len(spans):
            break
        if end > spans[span_idx][0]:
            mask[i] = 1
    return mask


def added_contents(tokenizer):
    return sorted({t.content for t in tokenizer.added_tokens_decoder.values()}, key=len, reverse=True)


def piece_boundaries(text, added):
    # Leftmost-longest matches of added tokens split the text into pieces.
    bounds = {0, len(text)}
    i = 0
    while i < len(text):
        match = next((a for a in added if a and text.startswith(a, i)), None)
        if match:
            bounds.add(i)
            bounds.add(i + len(match))
            i += len(match)
        else:
            i += 1
    return sorted(bounds)


def answer_start(prompt_tail, turn_tail, added):
    k = 0
    while k < min(len(prompt_tail), len(turn_tail)) and prompt_tail[k] == turn_tail[k]:
        k += 1
    if k == len(prompt_tail):
        return k
    return max(b for b in piece_boundaries(prompt_tail, added) if b <= k)


def spans_by_rendering(tokenizer, msgs, kwargs, full):
    added = added_contents(tokenizer)

    def render(prefix, add_generation_prompt):
        return tokenizer.apply_chat_template(
            prefix, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
        )

    spans = []
    for i, m in enumerate(msgs):
        if m["role"] != "assistant" or i == 0:
            continue
        through = render(msgs[: i + 1], False)
        if not full.startswith(through):
            continue  # rendered differently once later turns follow: left unsupervised
        prompt = render(msgs[:i], True)
        if through.startswith(prompt):
            start = len(prompt)
        else:
            history = render(msgs[:i], False)
            if not (prompt.startswith(history) and through.startswith(history)):
                raise ValueError(f"the history before assistant turn {i + 1} renders differently")
            start = len(history) + answer_start(prompt[len(history):], through[len(history):], added)
        spans.append((start, len(through)))
    return spans


def reference(tokenizer, conversation):
    msgs = messages(conversation["turns"])
    kwargs = template_kwargs(conversation)
    template = tokenizer.get_chat_template()
    if has_generation_blocks(template):
        out = tokenizer.apply_chat_template(
            msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True, **kwargs
        )
        rendered, indices = chat_template_utils.render_jinja_template(
            conversations=[msgs],
            chat_template=template,
            return_assistant_tokens_mask=True,
            **{**tokenizer.special_tokens_map, **kwargs},
        )
        assistants = sum(m["role"] == "assistant" for m in msgs)
        if len(indices[0]) != assistants:
            raise ValueError(f"{len(indices[0])} generation blocks for {assistants} assistant turns")
        return rendered[0], list(out["input_ids"]), list(out["assistant_masks"])
    full = tokenizer.apply_chat_template(msgs, tokenize=False, **kwargs)
    ids = tokenizer.apply_chat_template(msgs, tokenize=True, return_dict=True, **kwargs)["input_ids"]
    encoded = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    assert list(encoded["input_ids"]) == list(ids), "apply_chat_template tokenizes its own render"
    spans = spans_by_rendering(tokenizer, msgs, kwargs, full)
    return full, list(ids), mask_from_spans(encoded["offset_mapping"], spans)


def main(fixtures, conversations_path, out_path):
    spec = json.loads(pathlib.Path(conversations_path).read_text(encoding="utf-8"))
    pin_date(spec["date"])
    results = {
        "versions": {
            "transformers": transformers.__version__,
            "jinja2": jinja2.__version__,
            "tokenizers": tokenizers.__version__,
        },
        "templates": {},
    }
    for name in spec["templates"]:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(pathlib.Path(fixtures) / name))
        rows = {}
        for conversation in spec["conversations"]:
            try:
                text, ids, mask = reference(tokenizer, conversation)
                rows[conversation["id"]] = {"text": text, "input_ids": ids, "loss_mask": mask}
            except Exception as e:  # a template that raises is compared as a refusal
                rows[conversation["id"]] = {"error": f"{type(e).__name__}: {e}"}
        results["templates"][name] = rows
    pathlib.Path(out_path).write_text(json.dumps(results, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:4])
