#!/usr/bin/env python3
"""Write tests/fixtures/torch_bin/: the tiny fixture model saved by torch.save in every layout bertrain reads.

Needs torch and numpy (any torch >= 2.0; the committed files were written by torch 2.15.0). Run from the
repository root:

    python3 tests/reference/make_torch_fixtures.py

Source: tests/fixtures/tiny_gelu_bce_adam/model.safetensors (read here without the safetensors package:
u64 header length, JSON header, raw little-endian data). Its tensors are renamed into a
BertForPreTraining-shaped state dict (bert.* names, the classifier.* head kept so the directory still
loads as a classifier, small cls.predictions.* / cls.seq_relationship.* heads and an int64
bert.embeddings.position_ids buffer that bertrain must ignore), an OrderedDict with a _metadata
attribute as Module.state_dict() returns, and saved as:

    zip_f32.bin            torch.save, zip format (PyTorch >= 1.6), float32
    legacy_f32.bin         _use_new_zipfile_serialization=False (the pre-1.6 format SciBERT ships), float32
    zip_f16.bin            zip, float16 (bertrain upcasts: equal to the fp16-rounded values)
    legacy_f16.bin         legacy, float16
    legacy_gamma_beta.bin  legacy, float32, LayerNorm parameters named gamma / beta (old BERT releases)
    zip_shared.bin         zip, every bert.* / classifier.* tensor a view into one flat storage
    legacy_shared.bin      legacy, the same shared storage

Corrupted variants (truncated files, wrong magic, a pickle naming os.system, a storage shorter than its
view, non-contiguous strides, deep or cyclic pickles, big-endian byte order, compressed zip entries) are
built by tests/model/test_torch_checkpoint.cpp from these files and from hand-written pickle bytes, so
that each one is visible next to the assertion it feeds.
"""
import collections
import json
import os
import struct
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "tests", "fixtures", "tiny_gelu_bce_adam", "model.safetensors")
OUT = os.path.join(ROOT, "tests", "fixtures", "torch_bin")

NUMPY_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=NUMPY_DTYPES[entry["dtype"]]).reshape(entry["shape"])
        tensors[name] = torch.from_numpy(array.copy())
    return tensors


def pretraining_state_dict(tensors, gamma_beta=False):
    """bert.* names (BertForPreTraining), classifier.* kept, cls.* heads and position_ids added."""
    state = collections.OrderedDict()
    hidden = None
    for name in sorted(tensors):
        key = name if name.startswith(("bert.", "classifier.")) else "bert." + name
        if gamma_beta and ".LayerNorm." in key:
            key = key.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        state[key] = tensors[name]
        if name.endswith("word_embeddings.weight"):
            hidden = tensors[name].shape[1]
    g = torch.Generator().manual_seed(0)
    state["bert.embeddings.position_ids"] = torch.arange(16, dtype=torch.int64).unsqueeze(0)
    state["cls.predictions.bias"] = torch.randn(8, generator=g)
    state["cls.predictions.transform.dense.weight"] = torch.randn(hidden, hidden, generator=g)
    state["cls.predictions.transform.LayerNorm.weight"] = torch.ones(hidden)
    state["cls.seq_relationship.weight"] = torch.randn(2, hidden, generator=g)
    state["cls.seq_relationship.bias"] = torch.zeros(2)
    # As Module.state_dict() returns it: an OrderedDict carrying per-module versions (pickled with BUILD).
    state._metadata = collections.OrderedDict([("", {"version": 1}), ("bert", {"version": 1})])
    return state


def to_dtype(state, dtype):
    out = collections.OrderedDict(
        (k, v.to(dtype) if v.is_floating_point() else v) for k, v in state.items()
    )
    out._metadata = state._metadata
    return out


def shared(state):
    """Every float tensor a view of one flat storage, at increasing offsets (slices of one big tensor)."""
    floats = [k for k, v in state.items() if v.is_floating_point()]
    total = sum(state[k].numel() for k in floats)
    flat = torch.empty(total + 3, dtype=torch.float32)  # 3 spare elements: the storage outlives every view
    out = collections.OrderedDict()
    offset = 1  # no view starts at 0
    for k, v in state.items():
        if not v.is_floating_point():
            out[k] = v
            continue
        n = v.numel()
        view = flat[offset : offset + n].view(v.shape)
        view.copy_(v)
        out[k] = view
        offset += n
    out._metadata = state._metadata
    return out


def save(state, name, zip_format):
    path = os.path.join(OUT, name)
    torch.save(state, path, _use_new_zipfile_serialization=zip_format)
    # Check that torch reads back what it wrote, values and sharing included.
    back = torch.load(path, map_location="cpu", weights_only=True)
    assert list(back) == list(state), name
    for k in state:
        assert torch.equal(back[k], state[k]), (name, k)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    os.makedirs(OUT, exist_ok=True)
    tensors = read_safetensors(SOURCE)
    state = pretraining_state_dict(tensors)
    save(state, "zip_f32.bin", True)
    save(state, "legacy_f32.bin", False)
    save(to_dtype(state, torch.float16), "zip_f16.bin", True)
    save(to_dtype(state, torch.float16), "legacy_f16.bin", False)
    save(pretraining_state_dict(tensors, gamma_beta=True), "legacy_gamma_beta.bin", False)
    s = shared(state)
    assert s["bert.embeddings.word_embeddings.weight"].untyped_storage().data_ptr() == \
        s["classifier.bias"].untyped_storage().data_ptr()
    save(s, "zip_shared.bin", True)
    save(s, "legacy_shared.bin", False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
