"""Builds the tiny random-weight Llama from the committed config and
tokenizer (golden/tiny/), deterministically: fixed seed, fp32, safetensors.

usage: make_tiny_model.py SRC_DIR OUT_DIR
"""
import os
import shutil
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

src, out = sys.argv[1], sys.argv[2]
tmp = out + ".tmp"
shutil.rmtree(tmp, ignore_errors=True)
os.makedirs(tmp)
torch.manual_seed(0)
config = LlamaConfig.from_pretrained(src)
model = LlamaForCausalLM(config).to(torch.float32)
model.save_pretrained(tmp, safe_serialization=True)
for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
    if os.path.exists(os.path.join(src, name)):
        shutil.copy(os.path.join(src, name), os.path.join(tmp, name))
shutil.rmtree(out, ignore_errors=True)
os.rename(tmp, out)
print(out)
