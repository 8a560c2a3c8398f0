"""Builds a tiny random-weight model from a committed config and tokenizer
(golden/tiny/, a Llama; golden/instruct/, a Qwen2), deterministically: fixed
seed, fp32, safetensors. A Llama config is built with LlamaForCausalLM as it
always was (the tiny model's weights, and the greedy tokens pinned to its
fingerprint, stay as they are); any other architecture through
AutoModelForCausalLM.

usage: make_tiny_model.py SRC_DIR OUT_DIR
"""
import os
import shutil
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

src, out = sys.argv[1], sys.argv[2]
tmp = out + ".tmp"
shutil.rmtree(tmp, ignore_errors=True)
os.makedirs(tmp)
torch.manual_seed(0)
config = AutoConfig.from_pretrained(src)
if config.model_type == "llama":
    config = LlamaConfig.from_pretrained(src)
    model = LlamaForCausalLM(config).to(torch.float32)
else:
    model = AutoModelForCausalLM.from_config(config).to(torch.float32)
model.save_pretrained(tmp, safe_serialization=True)
for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
    if os.path.exists(os.path.join(src, name)):
        shutil.copy(os.path.join(src, name), os.path.join(tmp, name))
shutil.rmtree(out, ignore_errors=True)
os.rename(tmp, out)
print(out)
