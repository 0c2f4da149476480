"""Exports a fine-tuned model (finetune.py's OUT.model/) to ONNX with the
pinned model's inputs and output (input_ids, attention_mask,
token_type_ids -> last_hidden_state), then stores its weights as int8 the
way the pinned all-MiniLM-L6-v2 int8 file does: each weight matrix of a
MatMul or a Gather as int8 with one float scale per column, cast back to
float when ONNX Runtime loads it (constant folding), so inference runs in
float. It checks the int8 file against the fitted model on the given
pairs and prints the largest cosine difference.

    python export.py OUT.model tuned.onnx [PAIRS_JSONL]
writes tuned.onnx (float, about 90 MB) and tuned-int8.onnx (about 23 MB).
"""

import json
import sys

import numpy as np
import onnx
import onnxruntime
import torch
from onnx import helper, numpy_helper
from transformers import AutoModel, AutoTokenizer

INPUTS = ["input_ids", "attention_mask", "token_type_ids"]


class LastHidden(torch.nn.Module):
    """The model's last hidden state, its inputs passed in `inputs`' order."""

    def __init__(self, model, inputs):
        super().__init__()
        self.model = model
        self.inputs = inputs

    def forward(self, *tensors):
        return self.model(**dict(zip(self.inputs, tensors))).last_hidden_state


def export(folder, path, inputs=INPUTS):
    """Exports OUT.model/ to ONNX with `inputs` (MiniLM's three by default;
    lowrank.py passes MPNet's two, which has no token types)."""
    model = AutoModel.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    sample = tokenizer(["a sample", "a second, longer sample text"], padding=True, return_tensors="pt")
    axes = {name: {0: "batch", 1: "sequence"} for name in inputs + ["last_hidden_state"]}
    torch.onnx.export(
        LastHidden(model, inputs),
        tuple(sample[name] for name in inputs),
        path,
        input_names=inputs,
        output_names=["last_hidden_state"],
        dynamic_axes=axes,
        opset_version=17,
        dynamo=False,
    )
    return tokenizer


def int8_weights(path, out):
    graph_model = onnx.load(path)
    graph = graph_model.graph
    initializers = {init.name: init for init in graph.initializer}
    nodes, seen = [], set()
    for node in graph.node:
        slot = {"MatMul": 1, "Gather": 0}.get(node.op_type)
        name = node.input[slot] if slot is not None else None
        init = initializers.get(name)
        if init is not None and len(init.dims) == 2 and init.data_type == onnx.TensorProto.FLOAT and name not in seen:
            seen.add(name)
            weights = numpy_helper.to_array(init).astype(np.float32)
            scale = np.abs(weights).max(axis=0) / 127.0
            scale[scale == 0] = 1.0
            quantized = np.clip(np.round(weights / scale), -127, 127).astype(np.int8)
            graph.initializer.remove(init)
            graph.initializer.extend(
                [numpy_helper.from_array(quantized, name + "_int8"), numpy_helper.from_array(scale.astype(np.float32), name + "_scale")]
            )
            nodes.append(helper.make_node("Cast", [name + "_int8"], [name + "_float"], to=onnx.TensorProto.FLOAT))
            nodes.append(helper.make_node("Mul", [name + "_float", name + "_scale"], [name]))
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(graph_model)
    onnx.save(graph_model, out)
    return len(seen)


def embed(session, tokenizer, text):
    batch = tokenizer([text], truncation=True, max_length=256, return_tensors="np")
    hidden = session.run(None, {name: batch[name].astype(np.int64) for name in INPUTS})[0]
    mask = batch["attention_mask"][..., None].astype(np.float32)
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return pooled[0] / np.linalg.norm(pooled[0])


def main():
    folder, path = sys.argv[1], sys.argv[2]
    tokenizer = export(folder, path)
    out = path.replace(".onnx", "-int8.onnx")
    print(f"{int8_weights(path, out)} weight matrices stored as int8 in {out}")
    if len(sys.argv) > 3:
        float_session = onnxruntime.InferenceSession(path)
        int8_session = onnxruntime.InferenceSession(out)
        worst = 0.0
        with open(sys.argv[3], encoding="utf-8") as lines:
            for line in lines:
                pair = json.loads(line)
                f = float(embed(float_session, tokenizer, pair["a"]) @ embed(float_session, tokenizer, pair["b"]))
                q = float(embed(int8_session, tokenizer, pair["a"]) @ embed(int8_session, tokenizer, pair["b"]))
                worst = max(worst, abs(f - q))
        print(f"largest cosine difference, int8 against float: {worst:.4f}")


if __name__ == "__main__":
    main()
