#!/usr/bin/env python3
"""Check that a model directory (e.g. one written by the bertrain C++ writer) loads in
Hugging Face transformers as a sequence classifier without missing, unexpected or
mismatched weights, has the expected label config, and optionally reproduces the
logits stored in a golden.safetensors file.

The model class is the one named in config.json's "architectures" (e.g.
BertForSequenceClassification, RobertaForSequenceClassification,
XLMRobertaForSequenceClassification, DistilBertForSequenceClassification,
ElectraForSequenceClassification); without "architectures" it is
AutoModelForSequenceClassification's choice for config.json's model_type; --model-class
overrides both.

Usage:
  python tests/reference/check_hf_load.py DIR [--golden DIR/golden.safetensors]

Exit status 0 if all checks pass, 1 otherwise.
"""

import argparse
import inspect
import json
import os
import sys

import torch
import transformers
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForSequenceClassification

EXPECTED_ID2LABEL = {0: "computer-vision", 1: "mlops", 2: "natural-language-processing", 3: "other"}
# Buffers that older transformers versions saved in BERT checkpoints; they are harmless when
# present. Only BERT's are tolerated: for the other families the file must hold exactly the
# model's parameters.
TOLERATED_EXTRA = {"bert.embeddings.position_ids", "bert.embeddings.token_type_ids"}


def model_class(model_dir, name=None):
    """The class to load DIR with: --model-class, else config.json's architectures[0], else
    AutoModelForSequenceClassification's mapping of its model_type."""
    if name is None:
        with open(os.path.join(model_dir, "config.json")) as f:
            archs = json.load(f).get("architectures") or []
        if len(archs) > 1:
            sys.exit("config.json names several architectures: %s" % archs)
        name = archs[0] if archs else None
    if name is None:
        config = AutoConfig.from_pretrained(model_dir)
        return AutoModelForSequenceClassification._model_mapping[type(config)]
    cls = getattr(transformers, name, None)
    if cls is None or not isinstance(cls, type):
        sys.exit("transformers %s has no model class %r" % (transformers.__version__, name))
    if not name.endswith("ForSequenceClassification"):
        sys.exit("%s is not a sequence classifier" % name)
    return cls


def raw_weight_files(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            return sorted({os.path.join(model_dir, v) for v in json.load(f)["weight_map"].values()})
    return [os.path.join(model_dir, "model.safetensors")]


def check_raw_file(model_dir, model, errors):
    """from_pretrained silently fixes up some things (a missing 'bert.' prefix, float16
    upcast, stale buffers), so also check the file itself: exact parameter names, F32."""
    names = {}
    for path in raw_weight_files(model_dir):
        if not os.path.exists(path):
            errors.append("missing weight file %s" % path)
            return
        with safe_open(path, framework="pt") as f:
            for k in f.keys():
                names[k] = f.get_slice(k).get_dtype()
    expected = {n for n, _ in model.named_parameters()}
    missing = sorted(expected - set(names))
    extra = sorted(set(names) - expected)
    if missing:
        errors.append("weight file lacks tensors named %s" % missing)
    for k in extra:
        if k in TOLERATED_EXTRA:
            print("warning: weight file has buffer %s (ignored by transformers)" % k)
        else:
            errors.append("weight file has unexpected tensor %s" % k)
    bad = sorted("%s:%s" % (k, d) for k, d in names.items() if k in expected and d != "F32")
    if bad:
        errors.append("%d non-F32 tensors in weight file, e.g. %s" % (len(bad), bad[:3]))
    print("weight file: %d tensors, dtypes %s" % (len(names), sorted(set(names.values()))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="model directory (config.json + model.safetensors)")
    ap.add_argument("--golden", help="golden.safetensors with input_ids, attention_mask, logits")
    ap.add_argument("--problem-type", default="single_label_classification",
                    help="expected config.problem_type (default: %(default)s)")
    ap.add_argument("--no-label-check", action="store_true",
                    help="do not require the default 4-label id2label mapping")
    ap.add_argument("--lenient-names", action="store_true",
                    help="skip the check of the raw tensor names/dtypes in model.safetensors")
    ap.add_argument("--model-class",
                    help="transformers class to load with (default: config.json's architectures[0])")
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()

    transformers.utils.logging.disable_progress_bar()
    errors = []

    cls = model_class(args.dir, args.model_class)
    try:
        model, info = cls.from_pretrained(
            args.dir, output_loading_info=True, attn_implementation="eager")
    except (OSError, RuntimeError, ValueError) as e:  # e.g. a tensor whose shape does not match the config
        print("ERROR: %s.from_pretrained(%s) failed: %s" % (cls.__name__, args.dir, str(e).strip().splitlines()[-1]))
        return 1
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        val = info.get(key)
        if val:
            errors.append("%s: %s" % (key, sorted(str(v) for v in val)))
    print("loaded %s as %s (model_type %s): %d parameters, loading info: %s" % (
        args.dir, type(model).__name__, model.config.model_type, sum(p.numel() for p in model.parameters()),
        {k: len(v) for k, v in info.items()}))

    if not args.lenient_names:
        check_raw_file(args.dir, model, errors)

    cfg = model.config
    if cfg.problem_type != args.problem_type:
        errors.append("problem_type is %r, expected %r" % (cfg.problem_type, args.problem_type))
    id2label = {int(k): v for k, v in cfg.id2label.items()}
    if not args.no_label_check:
        if id2label != EXPECTED_ID2LABEL:
            errors.append("id2label is %r, expected %r" % (id2label, EXPECTED_ID2LABEL))
        label2id = {k: int(v) for k, v in cfg.label2id.items()}
        if label2id != {v: k for k, v in EXPECTED_ID2LABEL.items()}:
            errors.append("label2id is %r" % (label2id,))
        if cfg.num_labels != len(EXPECTED_ID2LABEL):
            errors.append("num_labels is %d" % cfg.num_labels)
    # label2id must be the inverse of id2label in any case
    if {v: k for k, v in id2label.items()} != {k: int(v) for k, v in cfg.label2id.items()}:
        errors.append("label2id is not the inverse of id2label")
    for p_name, p in model.named_parameters():
        if p.dtype != torch.float32:
            errors.append("%s has dtype %s" % (p_name, p.dtype))
        if not torch.isfinite(p).all():
            errors.append("%s has non-finite values" % p_name)

    if args.golden:
        with safe_open(args.golden, framework="pt") as f:
            input_ids = f.get_tensor("input_ids").to(torch.int64)
            attention_mask = f.get_tensor("attention_mask").to(torch.int64)
            want = f.get_tensor("logits").to(torch.float32)
        model.eval()
        kwargs = {}
        # Token types 0 for the models that take them (not DistilBERT).
        if "token_type_ids" in inspect.signature(model.forward).parameters:
            kwargs["token_type_ids"] = torch.zeros_like(input_ids)
        with torch.no_grad():
            got = model(input_ids=input_ids, attention_mask=attention_mask, **kwargs).logits
        if got.shape != want.shape:
            errors.append("logits shape %s != golden %s" % (tuple(got.shape), tuple(want.shape)))
        else:
            err = (got - want).abs()
            max_err = float(err.max())
            ok = bool((err <= args.atol + args.rtol * want.abs()).all())
            print("logits vs golden: max abs err %.3e (max|logit| %.4f) -> %s"
                  % (max_err, float(want.abs().max()), "OK" if ok else "FAIL"))
            if not ok:
                errors.append("logits differ from golden (max abs err %.3e, atol %g, rtol %g)"
                              % (max_err, args.atol, args.rtol))

    if errors:
        for e in errors:
            print("ERROR: " + e)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
