"""Build a tiny random-weight Llama and byte-level BPE tokenizer for the vLLM tests.

Nothing can be downloaded from a model hub on the project's machines, yet the vLLM tests
must run a real engine: so the model is made here, offline, from a fixed seed and a fixed
corpus, and the same command always writes the same files.  Its output is gibberish; only
its shape matters (vLLM's CPU attention needs a head size of at least 32).

Usage: python scripts/make_tiny_model.py OUT_DIR
Needs torch, transformers and tokenizers (all in the vLLM venv).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

SEED = 0
VOCAB_SIZE = 384
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "An agent calls a model, then a tool, then the model again.",
    "Why is my agent slow? Look at the critical path of the trace.",
    "Queueing, prefill and decode: where the time of a request goes.",
    "def main():\n    return sum(range(10))\n",
    "OpenTelemetry spans carry a trace id, a span id and a parent span id.",
] * 4


def build_tokenizer() -> Any:
    """A byte-level BPE tokenizer: any text encodes, so prompts never hit <unk>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(vocab_size: int, bos: int, eos: int, pad: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(
        hidden_size=128,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=256,
        num_hidden_layers=2,
        max_position_embeddings=512,
        vocab_size=vocab_size,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
        tie_word_embeddings=False,
    )
    return LlamaForCausalLM(config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    tokenizer = build_tokenizer()
    model = build_model(
        len(tokenizer), tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
    )
    # Write beside the target and rename, so an interrupted build never leaves a directory
    # that looks complete to the next run.
    tmp = args.out_dir.with_name(args.out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tokenizer.save_pretrained(tmp)
    model.save_pretrained(tmp)
    shutil.rmtree(args.out_dir, ignore_errors=True)
    tmp.rename(args.out_dir)
    elapsed = time.perf_counter() - start
    print(f"tiny model ({len(tokenizer)} tokens) written to {args.out_dir} in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
