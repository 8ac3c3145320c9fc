"""Export the real models of the ONNX parity check and record onnxruntime's outputs.

Run: python3 bench/onnx/export.py OUT_DIR   (needs torch, torchvision, transformers, onnxruntime)
For each model: OUT_DIR/<name>.onnx, OUT_DIR/<name>.in.<input>.npy (a fixed random input) and
OUT_DIR/<name>.ort.<output>.npy (onnxruntime's outputs). Weights are random (seeded): parity
does not need trained ones. bench/onnx/run.sh compares might with these and times both.
"""
import os
import sys

import numpy as np
import onnxruntime as ort
import torch

torch.manual_seed(0)
out = sys.argv[1] if len(sys.argv) > 1 else "target/onnx-models"
os.makedirs(out, exist_ok=True)
OPSET = 17
ONLY = sys.argv[2:]  # optional: export only these models


def export(name, model, inputs, input_names, output_names, dynamo=False):
    if ONLY and name not in ONLY:
        return
    model.eval()
    path = os.path.join(out, f"{name}.onnx")
    with torch.no_grad():
        torch.onnx.export(model, tuple(inputs), path, input_names=input_names, output_names=output_names,
                          opset_version=18 if dynamo else OPSET, dynamo=dynamo, external_data=False)
    feeds = {}
    for n, t in zip(input_names, inputs):
        a = t.numpy()
        np.save(os.path.join(out, f"{name}.in.{n}.npy"), a)
        feeds[n] = a
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for n, v in zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)):
        np.save(os.path.join(out, f"{name}.ort.{n}.npy"), v)
    print(f"{name}: {os.path.getsize(path) / 1e6:.1f} MB, inputs {[tuple(t.shape) for t in inputs]}")


import torchvision  # noqa: E402

export("resnet18", torchvision.models.resnet18(weights=None), [torch.randn(1, 3, 224, 224)], ["input"], ["logits"])
export("mobilenet_v3_small", torchvision.models.mobilenet_v3_small(weights=None), [torch.randn(1, 3, 224, 224)],
       ["input"], ["logits"])

from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel  # noqa: E402


class Bert(torch.nn.Module):
    def __init__(self):
        super().__init__()
        cfg = BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                         intermediate_size=1024, max_position_embeddings=512)
        self.m = BertModel(cfg, add_pooling_layer=True)

    def forward(self, ids, mask):
        o = self.m(input_ids=ids, attention_mask=mask)
        return o.last_hidden_state, o.pooler_output


class Gpt2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        cfg = GPT2Config(vocab_size=50257, n_positions=256, n_embd=256, n_layer=4, n_head=4)
        self.m = GPT2LMHeadModel(cfg)

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False).logits


seq = 128
ids = torch.randint(0, 30522, (1, seq))
mask = torch.ones(1, seq, dtype=torch.int64)
mask[0, 100:] = 0
export("bert_small", Bert(), [ids, mask], ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"])
# transformers' causal-mask code uses aten::diff, which only the torch.export-based exporter takes
export("gpt2_small", Gpt2(), [torch.randint(0, 50257, (1, seq))], ["input_ids"], ["logits"], dynamo=True)
