#!/usr/bin/env python3
"""Builds the tiny model directory golden/tiny/ offline and deterministically.

Byte-level BPE (vocab 512) trained with the `tokenizers` package on the inline
corpus below, which mixes ASCII, accented Latin, Greek, CJK and emoji so that
multi-byte characters end up split over several tokens. Special tokens
<unk> <s> </s> <pad> <|eot|> are ids 0-4; eos is </s> (2), and
generation_config.json lists [2, 4] so that a second stop id reaches
_all_stop_token_ids. config.json is a LlamaForCausalLM (hidden 128, 2 layers,
4 heads / 2 KV heads, head_dim 32, vocab 512) usable with load_format=dummy.

    <venv>/bin/python golden/generate/frontend/build_tiny.py --out golden/tiny

With `--shape instruct` it builds golden/instruct/ instead, a model laid out
like a real instruct model (Qwen2.5-Instruct's layout, not its data): the
same corpus and a byte-level BPE of 509 tokens, then the special tokens at
the END of the vocabulary (<|endoftext|> 509, <|im_start|> 510, <|im_end|>
511), no BOS, EOS <|im_end|>, a ChatML chat template, a Qwen2ForCausalLM
config.json, and a generation_config.json that sets sampling defaults
(temperature 0.7, top_p 0.8, top_k 20, repetition_penalty 1.05, the values
Qwen2.5-0.5B-Instruct ships) and eos_token_id [511, 509].

    <venv>/bin/python golden/generate/frontend/build_tiny.py --shape instruct --out golden/instruct

With `--shape moe` it builds golden/tiny-moe/: the tiny model's tokenizer
and generation config with a MixtralForCausalLM config.json (the tiny
model's sizes, 4 experts, 2 per token), so that vLLM sees a
mixture-of-experts model and runs its data-parallel ranks in lockstep waves.

    <venv>/bin/python golden/generate/frontend/build_tiny.py --shape moe --out golden/tiny-moe
"""

from __future__ import annotations

import argparse
import json
import os

CORPUS = [
    "Hello world. Hello there, world! The quick brown fox jumps over the lazy dog.",
    "Stop here. STOP now. The end. END of text. Done; finished: yes, no, maybe.",
    "A stop string may span tokens: Hello world, hello World, HELLO WORLD.",
    "Numbers 0 1 2 3 4 5 6 7 8 9 10 42 100 1000; math: 1+1=2, 3*4=12, 7/7=1.",
    "Café crème brûlée, naïve façade, déjà vu, señor, jalapeño, Zürich, Ångström.",
    "Ελληνικά γράμματα: αβγδε, λόγος, καλημέρα κόσμε.",
    "中文文本：你好，世界。我们测试多字节字符。日本語のテキスト、こんにちは世界。",
    "한국어 텍스트: 안녕하세요 세계.",
    "Emoji: 🚀 rocket, 💡 idea, 😀 smile, 🎉 party, 👍🏽 thumbs, ❤️ heart.",
    "Symbols: × Δ ° ∆ – € £ ¥ © ® ™ … « » “quotes” ‘single’.",
    "def main():\n    print('hello')\n    return 0\n",
    "{\"name\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"ok\": true}}",
    "JSON, regex, choice, grammar: yes|no, [a-z]+, root ::= \"a\" | \"b\".",
    "The model says: I think, therefore I am. Therefore, stop. Stop. stop.",
    "New line\nTab\tSpace  double  spaces   and trailing spaces   \n\n",
]


def train(vocab_size: int, specials: list[str]):
    """The byte-level BPE over CORPUS, `specials` as its first ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        show_progress=False,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    # Repeat the corpus so that merge counts are well separated.
    tok.train_from_iterator(CORPUS * 3, trainer=trainer)
    assert tok.get_vocab_size() == vocab_size, tok.get_vocab_size()
    for i, s in enumerate(specials):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    return tok


def added_tokens(specials: dict[int, str]) -> dict:
    return {
        str(i): {
            "content": s,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for i, s in specials.items()
    }


def write(out: str, tok, files: dict) -> None:
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"), pretty=True)
    for name, obj in files.items():
        with open(os.path.join(out, name), "w") as f:
            json.dump(obj, f, indent=2, ensure_ascii=False, sort_keys=True)
            f.write("\n")


def build(out: str, moe: bool = False) -> None:
    specials = ["<unk>", "<s>", "</s>", "<pad>", "<|eot|>"]
    tok = train(512, specials)
    added = added_tokens(dict(enumerate(specials)))
    files = {
        "tokenizer_config.json": {
            "added_tokens_decoder": added,
            "additional_special_tokens": ["<|eot|>"],
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "add_bos_token": False,
            "add_eos_token": False,
            "clean_up_tokenization_spaces": False,
            "model_max_length": 512,
            "tokenizer_class": "PreTrainedTokenizerFast",
            "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}",
        },
        "special_tokens_map.json": {
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "additional_special_tokens": ["<|eot|>"],
        },
        "config.json": {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "vocab_size": 512,
            "max_position_embeddings": 512,
            "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "torch_dtype": "float32",
            "bos_token_id": 1,
            "eos_token_id": 2,
            "pad_token_id": 3,
        },
        "generation_config.json": {
            "bos_token_id": 1,
            "eos_token_id": [2, 4],
            "pad_token_id": 3,
        },
    }
    if moe:
        files["config.json"].update({
            "architectures": ["MixtralForCausalLM"],
            "model_type": "mixtral",
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "sliding_window": None,
        })
    write(out, tok, files)


# The instruct shape's special tokens, after the 509 trained ones.
INSTRUCT_SPECIALS = {509: "<|endoftext|>", 510: "<|im_start|>", 511: "<|im_end|>"}

# ChatML, as Qwen2.5-Instruct's template renders it without tools.
CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def build_instruct(out: str) -> None:
    from tokenizers import AddedToken

    tok = train(509, [])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in INSTRUCT_SPECIALS.values()])
    assert tok.get_vocab_size() == 512, tok.get_vocab_size()
    for i, s in INSTRUCT_SPECIALS.items():
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    files = {
        "tokenizer_config.json": {
            "added_tokens_decoder": added_tokens(INSTRUCT_SPECIALS),
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "bos_token": None,
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "unk_token": None,
            "add_bos_token": False,
            "add_eos_token": False,
            "clean_up_tokenization_spaces": False,
            "model_max_length": 512,
            "tokenizer_class": "PreTrainedTokenizerFast",
            "chat_template": CHATML,
        },
        "special_tokens_map.json": {
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        },
        "config.json": {
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 512,
            "max_position_embeddings": 512,
            "max_window_layers": 2,
            "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0,
            "hidden_act": "silu",
            "tie_word_embeddings": True,
            "use_sliding_window": False,
            "torch_dtype": "float32",
            "bos_token_id": 509,
            "eos_token_id": 511,
        },
        "generation_config.json": {
            "bos_token_id": 509,
            "do_sample": True,
            "eos_token_id": [511, 509],
            "pad_token_id": 509,
            "repetition_penalty": 1.05,
            "temperature": 0.7,
            "top_k": 20,
            "top_p": 0.8,
        },
    }
    write(out, tok, files)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=["tiny", "instruct", "moe"], default="tiny")
    ap.add_argument("--out")
    a = ap.parse_args()
    name = {"tiny": "tiny", "instruct": "instruct", "moe": "tiny-moe"}[a.shape]
    out = a.out or os.path.join(os.path.dirname(__file__), "..", "..", name)
    if a.shape == "instruct":
        build_instruct(out)
    else:
        build(out, moe=a.shape == "moe")


if __name__ == "__main__":
    main()
