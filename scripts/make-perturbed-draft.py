# Makes a worse draft of a model for speculative-decoding checks: copies the model folder
# (config, tokenizer, chat template) to OUT_DIR and adds Gaussian noise to every weight tensor of
# its safetensors files, each scaled to that tensor's own spread: NOISE × its standard deviation
# (a constant tensor such as an RMSNorm weight of ones uses its root mean square instead; a
# tensor of zeros, such as the tiny model's attention biases, stays as it is). The draft keeps
# the target's tokenizer and shapes, as vLLM's `draft_model` method requires, and agrees with
# the target less the larger NOISE is. On the tiny model with 3 speculative tokens at
# temperature 0: 0.1 still accepts about 3.9 of 4 tokens per step, 0.3 about 3 (from 1.4 to 4.0
# per request), 1.0 (noise as large as the weights) nothing at all (1.0 on every request).
#
# Used by scripts/real-vllm-acceptance.sh on the tiny random model of ../shared/tools/real-vllm:
# a second tiny model made with another torch seed still accepted 2.7-4.0 tokens per step at
# temperature 0 (random tiny models repeat alike), so the evaluation of a worse draft needs one
# that differs more. Run with the real-vLLM venv's python (torch and safetensors); the noise is
# drawn from a fixed seed, so the same arguments give the same draft. Takes a few seconds.
#   usage: make-perturbed-draft.py MODEL_DIR OUT_DIR [NOISE (default 0.3)] [SEED (default 1)]
import json
import os
import shutil
import sys

import torch
from safetensors.torch import load_file, save_file


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: make-perturbed-draft.py MODEL_DIR OUT_DIR [NOISE] [SEED]")
    model, out = sys.argv[1], sys.argv[2]
    noise = float(sys.argv[3]) if len(sys.argv) > 3 else 0.3
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    if os.path.abspath(model) == os.path.abspath(out):
        sys.exit("OUT_DIR must differ from MODEL_DIR")
    weights = sorted(f for f in os.listdir(model) if f.endswith(".safetensors"))
    if not weights:
        sys.exit(f"no .safetensors file in {model}")
    # Written to a temporary folder and moved into place, so a half-made draft is never served.
    partial = out.rstrip("/") + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(model, partial)
    generator = torch.Generator().manual_seed(seed)
    changed = 0
    for name in weights:
        tensors = load_file(os.path.join(model, name))
        for key, tensor in tensors.items():
            if not tensor.is_floating_point():
                continue
            values = tensor.float()
            scale = values.std().item() if values.numel() > 1 else 0.0
            if scale == 0.0:
                scale = values.pow(2).mean().sqrt().item()
            if scale == 0.0:
                continue
            drawn = torch.randn(values.shape, generator=generator) * (noise * scale)
            tensors[key] = (values + drawn).to(tensor.dtype).contiguous()
            changed += 1
        save_file(tensors, os.path.join(partial, name), metadata={"format": "pt"})
    with open(os.path.join(partial, "perturbed.json"), "w") as f:
        json.dump({"source": os.path.abspath(model), "noise": noise, "seed": seed, "tensors": changed}, f)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(partial, out)
    print(f"perturbed {changed} tensors of {model} by {noise} x their spread (seed {seed}) into {out}")


if __name__ == "__main__":
    main()
