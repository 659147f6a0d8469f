"""What sglang.bench_serving needs to run offline: a tokenizer directory and a ShareGPT-format file.

The tokenizer is a word-level one built here with Hugging Face `tokenizers` over the prompts' words (any other
word, such as the twin's made-up output, is one [UNK] token), saved with transformers'
PreTrainedTokenizerFast.save_pretrained, so AutoTokenizer loads it from a local path and nothing is
downloaded. The dataset file lets `--dataset-name random` sample prompts without fetching ShareGPT.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PROMPT_WORDS = (
    "how does a prefix cache cut the cost of a long chat with many turns and why does batching help "
    "explain expert routing in a mixture of experts model and the price of each decode step"
).split()


def write_tokenizer(directory: Path) -> Path:
    vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2}
    for word in sorted(set(PROMPT_WORDS)):
        vocab.setdefault(word, len(vocab))
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(directory)
    return directory


def write_sharegpt(path: Path, conversations: int = 40) -> Path:
    rows = []
    for i in range(conversations):
        words = PROMPT_WORDS[i % len(PROMPT_WORDS) :] + PROMPT_WORDS[: i % len(PROMPT_WORDS)]
        question = " ".join(words * 3)
        rows.append(
            {"id": str(i), "conversations": [{"from": "human", "value": question}, {"from": "gpt", "value": question}]}
        )
    path.write_text(json.dumps(rows))
    return path
