"""Helper of the export benchmark (engine/benches/export): trains the benchmark's byte-level BPE
tokenizer, and times the Python `tokenizers` package on the same texts as the Rust side.

  python3 tokenizers_baseline.py train OUT_DIR CORPUS.txt
  python3 tokenizers_baseline.py encode TOKENIZER.json TEXTS.jsonl   -> prints JSON {tokens, seconds}
"""

import json
import sys
import time

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def train(out_dir, corpus):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=16000, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    with open(corpus, encoding="utf8") as f:
        tokenizer.train_from_iterator(f, trainer)
    tokenizer.save(f"{out_dir}/tokenizer.json")


def encode(path, texts_path):
    tokenizer = Tokenizer.from_file(path)
    with open(texts_path, encoding="utf8") as f:
        texts = [json.loads(line) for line in f]
    start = time.perf_counter()
    tokens = 0
    for i in range(0, len(texts), 256):
        for encoding in tokenizer.encode_batch(texts[i : i + 256], add_special_tokens=False):
            tokens += len(encoding.ids)
    print(json.dumps({"tokens": tokens, "seconds": time.perf_counter() - start}))


if __name__ == "__main__":
    {"train": train, "encode": encode}[sys.argv[1]](*sys.argv[2:])
