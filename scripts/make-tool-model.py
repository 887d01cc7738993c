# Makes a copy of the tiny random model of ../shared/tools/real-vllm that can call tools, for
# checking tool calling against the real vLLM server: its tokenizer gains the Hermes markers
# `<tool_call>`, `</tool_call>`, `<tool_response>` and `</tool_response>` as added tokens (vLLM's
# `hermes` tool parser refuses a tokenizer without the first two), its embeddings grow to match
# (new rows drawn like the others), and its chat template becomes the published Qwen3 one
# (engine/tests/fixtures/templates/qwen3), which renders `tools`, `tool_calls` and `tool` turns
# Hermes-style. Run with the real-vLLM venv's python; takes a few seconds.
#   usage: make-tool-model.py MODEL_DIR OUT_DIR
import json
import os
import shutil
import sys

import torch
from safetensors.torch import load_file, save_file

MARKERS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: make-tool-model.py MODEL_DIR OUT_DIR")
    model, out = sys.argv[1], sys.argv[2]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    template = open(os.path.join(root, "engine/tests/fixtures/templates/qwen3/chat_template.jinja")).read()
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(model):
        if not name.endswith(".safetensors"):
            shutil.copy(os.path.join(model, name), os.path.join(out, name))

    tokenizer = json.load(open(os.path.join(model, "tokenizer.json")))
    next_id = max(t["id"] for t in tokenizer["added_tokens"]) + 1
    next_id = max(next_id, len(tokenizer["model"]["vocab"]))
    added = {}
    for marker in MARKERS:
        added[marker] = next_id
        tokenizer["added_tokens"].append({"id": next_id, "content": marker, "single_word": False, "lstrip": False,
                                          "rstrip": False, "normalized": False, "special": False})
        next_id += 1
    json.dump(tokenizer, open(os.path.join(out, "tokenizer.json"), "w"))

    config = json.load(open(os.path.join(model, "tokenizer_config.json")))
    config["chat_template"] = template
    for marker, token_id in added.items():
        config["added_tokens_decoder"][str(token_id)] = {"content": marker, "special": False, "lstrip": False,
                                                         "rstrip": False, "normalized": False, "single_word": False}
    json.dump(config, open(os.path.join(out, "tokenizer_config.json"), "w"), indent=1)

    model_config = json.load(open(os.path.join(model, "config.json")))
    model_config["vocab_size"] = next_id
    json.dump(model_config, open(os.path.join(out, "config.json"), "w"), indent=1)

    torch.manual_seed(0)
    for name in os.listdir(model):
        if not name.endswith(".safetensors"):
            continue
        tensors = load_file(os.path.join(model, name))
        for key, tensor in tensors.items():
            if key.endswith("embed_tokens.weight") or key == "lm_head.weight":
                rows = next_id - tensor.shape[0]
                new = torch.randn(rows, tensor.shape[1], dtype=torch.float32) * tensor.float().std()
                tensors[key] = torch.cat([tensor, new.to(tensor.dtype)])
        save_file(tensors, os.path.join(out, name), metadata={"format": "pt"})
    print(f"{out}: {len(MARKERS)} markers added (ids {min(added.values())}-{max(added.values())}), Qwen3 template")


if __name__ == "__main__":
    main()
