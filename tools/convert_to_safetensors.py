#!/usr/bin/env python3
"""Convert a Hugging Face checkpoint's pytorch_model.bin into model.safetensors, in place.

bertrain reads safetensors only (it never unpickles); SciBERT (allenai/scibert_scivocab_uncased) and
other older checkpoints ship a torch pickle. Needs torch and safetensors (tools/reference/requirements.txt):

    python3 tools/convert_to_safetensors.py path/to/scibert_scivocab_uncased

Tensor names are kept as they are (bertrain maps "bert." prefixes, gamma/beta and ignores cls.* heads).
Tensors that share storage (tied embeddings) are copied so that each is written once.
"""
import argparse
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", help="directory holding pytorch_model.bin")
    parser.add_argument("--force", action="store_true", help="overwrite an existing model.safetensors")
    args = parser.parse_args()

    import torch
    from safetensors.torch import save_file

    source = os.path.join(args.model_dir, "pytorch_model.bin")
    target = os.path.join(args.model_dir, "model.safetensors")
    if not os.path.isfile(source):
        print(f"convert_to_safetensors: {source}: not found", file=sys.stderr)
        return 1
    if os.path.exists(target) and not args.force:
        print(f"convert_to_safetensors: {target} exists (use --force to overwrite)", file=sys.stderr)
        return 1
    state = torch.load(source, map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        print(f"convert_to_safetensors: {source}: expected a state dict, found {type(state).__name__}", file=sys.stderr)
        return 1
    tensors = {name: t.detach().clone().contiguous() for name, t in state.items() if isinstance(t, torch.Tensor)}
    tmp = target + ".tmp"
    save_file(tensors, tmp, metadata={"format": "pt"})
    os.replace(tmp, target)
    print(f"wrote {target}: {len(tensors)} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
