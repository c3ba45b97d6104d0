#!/usr/bin/env python3
"""Generate golden fixtures for the bertrain C++ engine with Hugging Face transformers.

For every case this writes tests/fixtures/<case>/ containing:
  config.json        - the <Family>ForSequenceClassification config (model.save_pretrained)
  model.safetensors  - the INITIAL float32 parameters (model.save_pretrained)
  vocab.txt          - BERT cases only: a dummy WordPiece vocab (vocab_size lines, line 0 "[PAD]")
  golden.safetensors - inputs, forward outputs, loss, gradients and parameters after
                       2 optimizer steps (see README.md for the exact tensor list)

Families: BERT (the original cases, unchanged), RoBERTa, XLM-RoBERTa, CamemBERT, Data2VecText,
DistilBERT and ELECTRA (cases with a "family" key). The non-BERT cases have no pooler: instead of
pooled_output their golden file holds head_hidden, the classification head's hidden
activation (the input of its last Linear), and metadata model_type.

The reference numbers are computed in float64 (by default) from the exact float32
initial parameters, then rounded to float32. This makes the golden values the
"true" answer for the given float32 inputs, so the C++ float32 engine is compared
against exact math rather than against PyTorch's own float32 rounding.

Everything is deterministic: fixed seeds, single-threaded torch.
"""

import argparse
import copy
import inspect
import json
import os
import struct
import sys

import torch
import transformers
from safetensors import safe_open
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    CamembertConfig,
    CamembertForSequenceClassification,
    Data2VecTextConfig,
    Data2VecTextForSequenceClassification,
    DistilBertConfig,
    DistilBertForSequenceClassification,
    ElectraConfig,
    ElectraForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
    XLMRobertaConfig,
    XLMRobertaForSequenceClassification,
)

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_OUT = os.path.join(REPO_ROOT, "tests", "fixtures")

ID2LABEL = {0: "computer-vision", 1: "mlops", 2: "natural-language-processing", 3: "other"}
LABEL2ID = {v: k for k, v in ID2LABEL.items()}
NUM_LABELS = len(ID2LABEL)
PROBLEM_TYPE = "multi_label_classification"

LR = 1e-3
BETA1 = 0.9
BETA2 = 0.999
# eps 1e-5 rather than torch's default 1e-8: the gradient of every attention key bias is
# analytically zero (softmax is invariant to a per-query constant), so in float32 it is pure
# rounding noise (~1e-10), and Adam's update ~ lr·g/(|g| + eps) turns a gradient error δ into a
# parameter error of up to lr·δ/eps. With eps=1e-8 two correct float32 implementations differ
# by ~5e-5 after two steps; with eps=1e-5 by < 1e-6, so the test can stay tight.
EPS = 1e-5
EPS_OVERRIDE = [None]  # set by --eps
STEPS = 2

CASES = [
    dict(
        name="tiny_gelu_bce_adam",
        seed=1001,
        vocab_size=67,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        hidden_act="gelu",
        layer_norm_eps=1e-12,
        lengths=[13, 7, 10],
        seq_len=13,
        loss="bce",
        class_weights=None,
        optimizer="adam",
        weight_decay=0.0,
    ),
    dict(
        name="odd_gelunew_bce_weighted_adam",
        seed=1002,
        vocab_size=83,
        hidden_size=36,
        num_layers=3,
        num_heads=3,
        intermediate_size=52,
        hidden_act="gelu_new",
        layer_norm_eps=1e-5,
        lengths=[11, 5, 9, 3],
        seq_len=11,
        loss="bce",
        class_weights=[0.5, 2.0, 1.0, 1.5],
        optimizer="adam",
        weight_decay=0.0,
    ),
    dict(
        name="tiny_relu_ce_adamw",
        seed=1003,
        vocab_size=70,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        hidden_act="relu",
        layer_norm_eps=1e-12,
        lengths=[13, 7, 10],
        seq_len=13,
        loss="ce",
        class_weights=None,
        optimizer="adamw",
        weight_decay=0.01,
    ),
    dict(
        name="tiny_tanhgelu_bce_adam",
        seed=1004,
        vocab_size=61,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=48,
        hidden_act="gelu_pytorch_tanh",
        layer_norm_eps=1e-12,
        lengths=[1, 6],
        seq_len=6,
        loss="bce",
        class_weights=None,
        optimizer="adam",
        weight_decay=0.0,
    ),
]
# Gradient clipping (torch.nn.utils.clip_grad_norm_, Trainer's max_grad_norm) before each step: tiny_gelu_bce_adam's
# configuration with a seed of its own, AdamW. The gradient's norm is ~0.75 at both steps, so 1e-3 clips both by
# ~1.3e-3: the clipped elements then sit near eps (1e-5), where Adam's update is no longer invariant to the
# gradient's scale, and the parameters differ from an unclipped run.
CASES.append(dict(CASES[0], name="tiny_gelu_bce_adamw_clip", seed=1005, optimizer="adamw", weight_decay=0.01,
                  max_grad_norm=1e-3))


# Cases of the other encoder families. Same conventions as the BERT cases above (dropout 0, eager
# attention, initializer_range 0.1, the same perturbation, labels, problem_type, lr/betas/eps); each
# names its family and the family's own config fields. "pad" is the pad token id: real tokens are
# drawn from [0, vocab) without it, pads are "pad", right padding.
CASES += [
    dict(
        name="tiny_roberta_bce_adam",
        family="roberta",
        seed=1005,
        vocab_size=67,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        hidden_act="gelu",
        layer_norm_eps=1e-5,
        # RoBERTa's position ids are pad+1 .. pad+L (2 .. 14 here), rows 0..pad are never used by a
        # real token and row pad (1) is the padding_idx row looked up by pad tokens.
        max_position_embeddings=42,
        type_vocab_size=1,
        pad=1,
        bos=0,
        eos=2,
        lengths=[13, 7, 10],
        seq_len=13,
        loss="bce",
        class_weights=None,
        optimizer="adam",
        weight_decay=0.0,
    ),
    dict(
        name="tiny_xlmr_ce_adamw",
        family="xlm-roberta",
        seed=1006,
        vocab_size=71,
        hidden_size=36,
        num_layers=3,
        num_heads=3,
        intermediate_size=52,
        hidden_act="gelu_new",
        layer_norm_eps=1e-5,
        # Exactly pad + 1 + longest row (1 + 1 + 11): the last position row (12) is used by row 0.
        max_position_embeddings=13,
        type_vocab_size=1,
        pad=1,
        bos=0,
        eos=2,
        lengths=[11, 5, 9, 3],
        seq_len=11,
        loss="ce",
        class_weights=None,
        optimizer="adamw",
        weight_decay=0.01,
    ),
    dict(
        name="tiny_distilbert_bce_adam",
        family="distilbert",
        seed=1007,
        vocab_size=70,
        hidden_size=32,  # dim
        num_layers=2,  # n_layers
        num_heads=4,  # n_heads
        intermediate_size=64,  # hidden_dim
        hidden_act="gelu",  # activation
        layer_norm_eps=1e-12,  # fixed in DistilBERT's code, not a config field
        max_position_embeddings=40,
        pad=0,
        lengths=[13, 7, 10],
        seq_len=13,
        loss="bce",
        class_weights=None,
        optimizer="adam",
        weight_decay=0.0,
    ),
    dict(
        name="tiny_electra_bce_adam",
        family="electra",
        seed=1008,
        vocab_size=61,
        embedding_size=24,  # != hidden_size: the model has electra.embeddings_project
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=48,
        hidden_act="gelu",
        layer_norm_eps=1e-12,
        max_position_embeddings=40,
        type_vocab_size=2,
        pad=0,
        lengths=[1, 6],
        seq_len=6,
        loss="bce",
        class_weights=None,
        optimizer="adam",
        weight_decay=0.0,
    ),
    dict(
        name="tiny_electra_same_size_relu_ce_adam",
        family="electra",
        seed=1009,
        vocab_size=67,
        embedding_size=32,  # == hidden_size: no embeddings_project
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        hidden_act="relu",  # the encoder's; ELECTRA's classification head always uses gelu
        layer_norm_eps=1e-12,
        max_position_embeddings=40,
        type_vocab_size=2,
        pad=0,
        lengths=[9, 4, 12],
        seq_len=12,
        loss="ce",
        class_weights=None,
        optimizer="adam",
        weight_decay=0.0,
    ),
]


# A literal padding token inside a row (attention mask 1: a "[PAD]" or "<pad>" in a text the tokenizer kept as its
# special token), at "literal_pads" (row, index) places. transformers gives it no word-embedding gradient
# (nn.Embedding's padding_idx is config.pad_token_id in every family) and RoBERTa numbers positions skipping it
# (create_position_ids_from_input_ids: it reads position row pad, the tokens after it move down one row).
CASES += [
    dict(CASES[0], name="tiny_gelu_literal_pad_bce_adam", seed=1011, literal_pads=[(0, 4), (0, 5), (2, 9)]),
    dict(next(c for c in CASES if c["name"] == "tiny_roberta_bce_adam"), name="tiny_roberta_literal_pad_bce_adam",
         seed=1012, literal_pads=[(0, 3), (1, 6), (2, 1), (2, 2)]),
]

# CamemBERT and Data2VecText: RoBERTa's architecture under other names (their checkpoints' prefixes are "roberta."
# and "data2vec_text."), in settings the RoBERTa cases do not use: a padding id other than 1 with a literal pad,
# cross-entropy with AdamW, an odd hidden size; three layers and gelu_new.
CASES += [
    dict(next(c for c in CASES if c["name"] == "tiny_roberta_bce_adam"), name="tiny_camembert_ce_adamw",
         family="camembert", seed=1013, vocab_size=59, hidden_size=30, num_heads=3, intermediate_size=44, pad=3,
         max_position_embeddings=24, lengths=[12, 6, 9], seq_len=12, literal_pads=[(1, 2)], loss="ce",
         optimizer="adamw", weight_decay=0.01),
    dict(next(c for c in CASES if c["name"] == "tiny_roberta_bce_adam"), name="tiny_data2vec_bce_adam",
         family="data2vec-text", seed=1014, vocab_size=63, num_layers=3, hidden_act="gelu_new", lengths=[10, 4, 8, 2],
         seq_len=10),
]

# The families transformers builds as RoBERTa (Camembert* and Data2VecText* are copies of Roberta*): their
# positions start after the padding token, their head is classifier.dense, tanh, classifier.out_proj.
ROBERTA_LIKE = {"roberta": RobertaConfig, "xlm-roberta": XLMRobertaConfig, "camembert": CamembertConfig,
                "data2vec-text": Data2VecTextConfig}

# Per family: the model class, the base model attribute, the classification head's last Linear
# (head_hidden is its input), the head's activation (metadata only) and whether forward takes
# token_type_ids.
FAMILIES = {
    "roberta": dict(cls=RobertaForSequenceClassification, base="roberta", head_out="classifier.out_proj",
                    head_act="tanh", token_types=True),
    "xlm-roberta": dict(cls=XLMRobertaForSequenceClassification, base="roberta", head_out="classifier.out_proj",
                        head_act="tanh", token_types=True),
    "camembert": dict(cls=CamembertForSequenceClassification, base="roberta", head_out="classifier.out_proj",
                      head_act="tanh", token_types=True),
    "data2vec-text": dict(cls=Data2VecTextForSequenceClassification, base="data2vec_text",
                          head_out="classifier.out_proj", head_act="tanh", token_types=True),
    "distilbert": dict(cls=DistilBertForSequenceClassification, base="distilbert", head_out="classifier",
                       head_act="relu", token_types=False),
    "electra": dict(cls=ElectraForSequenceClassification, base="electra", head_out="classifier.out_proj",
                    head_act="gelu", token_types=True),
}


def case_family(case):
    return case.get("family", "bert")


def family_config(case):
    common = dict(
        vocab_size=case["vocab_size"],
        max_position_embeddings=case["max_position_embeddings"],
        initializer_range=0.1,
        pad_token_id=case["pad"],
        num_labels=NUM_LABELS,
        id2label=dict(ID2LABEL),
        label2id=dict(LABEL2ID),
        problem_type=PROBLEM_TYPE,
        attn_implementation="eager",
    )
    fam = case_family(case)
    if fam == "distilbert":
        return DistilBertConfig(
            dim=case["hidden_size"],
            n_layers=case["num_layers"],
            n_heads=case["num_heads"],
            hidden_dim=case["intermediate_size"],
            activation=case["hidden_act"],
            sinusoidal_pos_embds=False,
            dropout=0.0,
            attention_dropout=0.0,
            seq_classif_dropout=0.0,
            qa_dropout=0.0,
            **common,
        )
    bert_like = dict(
        hidden_size=case["hidden_size"],
        num_hidden_layers=case["num_layers"],
        num_attention_heads=case["num_heads"],
        intermediate_size=case["intermediate_size"],
        hidden_act=case["hidden_act"],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout=0.0,
        type_vocab_size=case["type_vocab_size"],
        layer_norm_eps=case["layer_norm_eps"],
        **common,
    )
    if fam in ROBERTA_LIKE:
        return ROBERTA_LIKE[fam](bos_token_id=case["bos"], eos_token_id=case["eos"], **bert_like)
    if fam == "electra":
        return ElectraConfig(embedding_size=case["embedding_size"], **bert_like)
    raise ValueError(fam)


def build_family_model(case):
    """build_model for the non-BERT families: the same seeds and the same perturbation."""
    config = family_config(case)
    fam = FAMILIES[case_family(case)]
    torch.manual_seed(case["seed"])
    model = fam["cls"](config).to(torch.float32)
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
    assert model.base_model is getattr(model, fam["base"])
    if case_family(case) == "electra":
        assert hasattr(model.electra, "embeddings_project") == (case["embedding_size"] != case["hidden_size"])
    g = torch.Generator().manual_seed(case["seed"] + 7)
    with torch.no_grad():
        for _, mod in model.named_modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.copy_(1.0 + 0.1 * torch.randn(mod.weight.shape, generator=g))
                mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=g))
            elif isinstance(mod, torch.nn.Linear) and mod.bias is not None:
                mod.bias.copy_(0.05 * torch.randn(mod.bias.shape, generator=g))
        we = model.get_input_embeddings().weight
        assert model.get_input_embeddings().padding_idx == case["pad"]
        we[case["pad"]].copy_(0.1 * torch.randn(we.shape[1], generator=g))
    model.train()  # dropout probabilities are all 0, so train == eval numerically
    for p in model.parameters():
        assert p.dtype == torch.float32
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Dropout):
            assert mod.p == 0.0, name
    return model


def put_literal_pads(case, input_ids, pad):
    """The case's literal padding tokens, inside their rows (drawn after the batch, so the other ids stay)."""
    for b, i in case.get("literal_pads", []):
        assert i < case["lengths"][b], (b, i)
        input_ids[b, i] = pad


def make_family_batch(case):
    """make_batch for the non-BERT families: real ids uniform over [0, vocab) minus the pad id."""
    g = torch.Generator().manual_seed(case["seed"] + 13)
    B, S, V, pad = len(case["lengths"]), case["seq_len"], case["vocab_size"], case["pad"]
    assert S == max(case["lengths"])
    input_ids = torch.randint(0, V - 1, (B, S), generator=g, dtype=torch.int64)
    input_ids += (input_ids >= pad).to(torch.int64)  # skip the pad id
    attention_mask = torch.zeros((B, S), dtype=torch.int64)
    for b, n in enumerate(case["lengths"]):
        attention_mask[b, :n] = 1
        input_ids[b, n:] = pad
    put_literal_pads(case, input_ids, pad)
    assert int(((input_ids == pad) & (attention_mask == 1)).sum()) == len(case.get("literal_pads", []))
    assert bool(((input_ids == pad) | (attention_mask == 1)).all())
    labels = torch.randint(0, NUM_LABELS, (B,), generator=g, dtype=torch.int64)
    targets = torch.nn.functional.one_hot(labels, NUM_LABELS).to(torch.float32)
    return input_ids, attention_mask, labels, targets


def build_model(case):
    config = BertConfig(
        vocab_size=case["vocab_size"],
        hidden_size=case["hidden_size"],
        num_hidden_layers=case["num_layers"],
        num_attention_heads=case["num_heads"],
        intermediate_size=case["intermediate_size"],
        hidden_act=case["hidden_act"],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout=0.0,
        max_position_embeddings=40,
        type_vocab_size=2,
        initializer_range=0.1,
        layer_norm_eps=case["layer_norm_eps"],
        pad_token_id=0,
        num_labels=NUM_LABELS,
        id2label=dict(ID2LABEL),
        label2id=dict(LABEL2ID),
        problem_type=PROBLEM_TYPE,
        attn_implementation="eager",
    )
    torch.manual_seed(case["seed"])
    model = BertForSequenceClassification(config).to(torch.float32)
    assert model.config._attn_implementation == "eager", model.config._attn_implementation

    # Perturb so that the test is sensitive to every parameter: LayerNorm gamma/beta,
    # Linear biases (HF initialises them to 0) and the [PAD] embedding row (HF zeroes
    # the padding_idx row; real checkpoints such as bert-base have it non-zero).
    g = torch.Generator().manual_seed(case["seed"] + 7)
    with torch.no_grad():
        for _, mod in model.named_modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.copy_(1.0 + 0.1 * torch.randn(mod.weight.shape, generator=g))
                mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=g))
            elif isinstance(mod, torch.nn.Linear) and mod.bias is not None:
                mod.bias.copy_(0.05 * torch.randn(mod.bias.shape, generator=g))
        we = model.bert.embeddings.word_embeddings.weight
        we[0].copy_(0.1 * torch.randn(we.shape[1], generator=g))
    model.train()  # dropout probabilities are all 0, so train == eval numerically
    for p in model.parameters():
        assert p.dtype == torch.float32
    return model


def make_batch(case):
    g = torch.Generator().manual_seed(case["seed"] + 13)
    B, S, V = len(case["lengths"]), case["seq_len"], case["vocab_size"]
    assert S == max(case["lengths"])
    input_ids = torch.randint(1, V, (B, S), generator=g, dtype=torch.int64)
    attention_mask = torch.zeros((B, S), dtype=torch.int64)
    for b, n in enumerate(case["lengths"]):
        attention_mask[b, :n] = 1
        input_ids[b, n:] = 0
    put_literal_pads(case, input_ids, 0)
    labels = torch.randint(0, NUM_LABELS, (B,), generator=g, dtype=torch.int64)
    targets = torch.nn.functional.one_hot(labels, NUM_LABELS).to(torch.float32)
    return input_ids, attention_mask, labels, targets


def case_eps(case):
    return EPS_OVERRIDE[0] if EPS_OVERRIDE[0] is not None else case.get("eps", EPS)


def make_optimizer(case, model):
    kw = dict(lr=LR, betas=(BETA1, BETA2), eps=case_eps(case), weight_decay=case["weight_decay"], foreach=False)
    params = [p for _, p in model.named_parameters()]
    if case["optimizer"] == "adam":
        assert case["weight_decay"] == 0.0
        return torch.optim.Adam(params, **kw)
    if case["optimizer"] == "adamw":
        # Hugging Face Trainer's two groups (Trainer.create_optimizer): biases and LayerNorm weights are not decayed.
        # get_decay_parameter_names does not use the Trainer it belongs to.
        decay = set(transformers.Trainer.get_decay_parameter_names(None, model))
        groups = [{"params": [p for n, p in model.named_parameters() if n in decay]},
                  {"params": [p for n, p in model.named_parameters() if n not in decay], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, **kw)
    raise ValueError(case["optimizer"])


def run_reference(case, model_f32, input_ids, attention_mask, labels, targets, dtype):
    """Forward/backward at the initial params, then STEPS optimizer steps on the same batch."""
    model = copy.deepcopy(model_f32).to(dtype)
    model.train()
    names = [n for n, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]

    captured = {}
    fam = case_family(case)
    model_kwargs = {}

    if fam == "bert":
        def hook(_mod, _inp, out):
            captured["sequence_output"] = out.last_hidden_state
            captured["pooled_output"] = out.pooler_output

        handles = [model.bert.register_forward_hook(hook)]
        model_kwargs["token_type_ids"] = torch.zeros_like(input_ids)
        head_key = "pooled_output"
    else:
        spec = FAMILIES[fam]
        head_key = "head_hidden"

        def base_hook(_mod, _inp, out):
            captured["sequence_output"] = out.last_hidden_state

        def head_hook(_mod, args):
            # The input of the head's last Linear: the activation after the head's dense layer
            # (dropout is 0, so the dropout between them is the identity).
            captured["head_hidden"] = args[0]

        def pos_hook(_mod, args):
            captured["position_ids"] = args[0]

        base = getattr(model, spec["base"])
        handles = [base.register_forward_hook(base_hook),
                   model.get_submodule(spec["head_out"]).register_forward_pre_hook(head_hook),
                   base.embeddings.position_embeddings.register_forward_pre_hook(pos_hook)]
        if spec["token_types"]:
            model_kwargs["token_type_ids"] = torch.zeros_like(input_ids)

    if case["loss"] == "bce":
        w = None if case["class_weights"] is None else torch.tensor(case["class_weights"], dtype=dtype)
        loss_fn = torch.nn.BCEWithLogitsLoss(weight=w)  # mean over B x C of w_c * l_bc
        tgt = targets.to(dtype)
    elif case["loss"] == "ce":
        loss_fn = torch.nn.CrossEntropyLoss()  # mean over B
        tgt = labels
    else:
        raise ValueError(case["loss"])

    opt = make_optimizer(case, model)
    result = {}
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        out = model(input_ids=input_ids, attention_mask=attention_mask, **model_kwargs)
        loss = loss_fn(out.logits, tgt)
        loss.backward()
        # The gradients recorded below are the unclipped ones (what the engine's gradients() hold); the step clips.
        grads = [(p.grad if p.grad is not None else torch.zeros_like(p)).detach().clone() for p in params]
        if case.get("max_grad_norm"):
            norm = torch.nn.utils.clip_grad_norm_(params, case["max_grad_norm"])
            print("  step %d: gradient norm %.6g clipped to %g" % (step + 1, float(norm), case["max_grad_norm"]))
        if step == 0:
            if fam != "bert":
                check_family_forward(case, model, input_ids, attention_mask, captured, out.logits)
            result["sequence_output"] = captured["sequence_output"].detach().clone()
            result[head_key] = captured[head_key].detach().clone()
            result["logits"] = out.logits.detach().clone()
            result["loss"] = loss.detach().clone()
            for n, grad in zip(names, grads):
                # Parameters that take no part in the loss (e.g. nothing here) would have grad None: zeros.
                result["grad." + n] = grad
        opt.step()
    for n, p in zip(names, params):
        result["adam." + n] = p.detach().clone()
    for handle in handles:
        handle.remove()
    return result


def check_family_forward(case, model, input_ids, attention_mask, captured, logits):
    """Recompute what the hooks captured from first principles: the position ids (RoBERTa: pad + the
    number of non-pad tokens up to and including each non-pad token, pad for pads, literal ones
    inside a row too; the others 0 .. S-1) and head_hidden from
    sequence_output[:, 0] with the head's own dense weights and activation."""
    fam = case_family(case)
    B, S = input_ids.shape
    pos = captured["position_ids"].expand(B, S)
    ar = torch.arange(S).unsqueeze(0).expand(B, S)
    if fam in ROBERTA_LIKE:
        pad = case["pad"]
        real = input_ids != pad
        want = torch.where(real, pad + torch.cumsum(real, dim=1), torch.full_like(ar, pad))
        assert int(want.max()) < case["max_position_embeddings"]
    else:
        want = ar
    assert torch.equal(pos, want), (pos, want)
    with torch.no_grad():
        cls = captured["sequence_output"][:, 0]
        if fam == "distilbert":
            h = torch.relu(model.pre_classifier(cls))
            lg = model.classifier(h)
        else:
            h = model.classifier.dense(cls)
            h = torch.tanh(h) if fam in ROBERTA_LIKE else torch.nn.functional.gelu(h)
            lg = model.classifier.out_proj(h)
        assert torch.equal(h, captured["head_hidden"]), float((h - captured["head_hidden"]).abs().max())
        assert torch.equal(lg, logits)


def rel_err(a, b):
    a = a.double()
    b = b.double()
    return float((a - b).abs().max() / (b.abs().max() + 1e-30))


_ST_DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def write_safetensors(path, tensors, metadata):
    """Byte-reproducible safetensors writer (safetensors.torch.save_file emits the
    __metadata__ map in random hash order, so its output differs run to run).
    Layout: 8-byte little-endian header length, JSON header (keys sorted, padded with
    spaces to a multiple of 8), then the tensors' little-endian data in sorted name order."""
    header = {"__metadata__": dict(sorted(metadata.items()))}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        data = t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for data in blobs:
            f.write(data)
    # Round-trip through the official reader.
    with safe_open(path, framework="pt") as f:
        assert f.metadata() == metadata
        assert sorted(f.keys()) == sorted(tensors)
        for name in tensors:
            assert torch.equal(f.get_tensor(name), tensors[name]), name


def write_vocab(path, vocab_size):
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    toks = special + letters
    toks = toks[:vocab_size]
    i = 0
    while len(toks) < vocab_size:
        toks.append("[unused%d]" % i)
        i += 1
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for t in toks:
            f.write(t + "\n")


def save_model(model, case_dir):
    kwargs = {}
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        kwargs["safe_serialization"] = True  # transformers 4.x; 5.x always writes safetensors
    model.save_pretrained(case_dir, **kwargs)
    path = os.path.join(case_dir, "model.safetensors")
    if not os.path.exists(path):
        sys.exit("save_pretrained did not write %s (files: %s)" % (path, os.listdir(case_dir)))
    # Verify the written file: exactly the named parameters, all float32, identical values.
    params = dict(model.named_parameters())
    with safe_open(path, framework="pt") as f:
        keys = set(f.keys())
        extra = sorted(keys - set(params))
        missing = sorted(set(params) - keys)
        if missing:
            sys.exit("model.safetensors is missing parameters: %s" % missing)
        for k in sorted(keys & set(params)):
            t = f.get_tensor(k)
            assert t.dtype == torch.float32, (k, t.dtype)
            assert torch.equal(t, params[k].detach()), k
    return extra


def make_case(case, out_root, compute_dtype):
    case_dir = os.path.join(out_root, case["name"])
    os.makedirs(case_dir, exist_ok=True)
    for fn in os.listdir(case_dir):  # start clean so stale files never linger
        os.remove(os.path.join(case_dir, fn))

    if case_family(case) == "bert":
        model = build_model(case)
        extra = save_model(model, case_dir)
        write_vocab(os.path.join(case_dir, "vocab.txt"), case["vocab_size"])
        input_ids, attention_mask, labels, targets = make_batch(case)
    else:
        model = build_family_model(case)
        extra = save_model(model, case_dir)
        if extra:
            sys.exit("%s: model.safetensors has tensors that are not parameters: %s" % (case["name"], extra))
        input_ids, attention_mask, labels, targets = make_family_batch(case)
    ref = run_reference(case, model, input_ids, attention_mask, labels, targets, compute_dtype)

    # Sanity: a plain float32 run must agree closely with the reference.
    if compute_dtype != torch.float32:
        f32 = run_reference(case, model, input_ids, attention_mask, labels, targets, torch.float32)
        worst = {}
        head_key = "pooled_output" if case_family(case) == "bert" else "head_hidden"
        for k in ("sequence_output", head_key, "logits", "loss"):
            worst[k] = rel_err(f32[k], ref[k])
        worst["grad.* (abs, scaled by max|grad|)"] = max(
            float((f32[k].double() - ref[k]).abs().max()) for k in ref if k.startswith("grad.")) / max(
            float(ref[k].abs().max()) for k in ref if k.startswith("grad."))
        adam_abs = {k: float((f32[k].double() - ref[k].double()).abs().max()) for k in ref if k.startswith("adam.")}
        kmax = max(adam_abs, key=adam_abs.get)
        print("  float32 run vs reference, max rel err: " + ", ".join("%s %.2e" % kv for kv in worst.items())
              + "; adam.* max abs err %.2e (%s)" % (adam_abs[kmax], kmax))

    tensors = {
        "input_ids": input_ids.contiguous(),
        "attention_mask": attention_mask.contiguous(),
        "targets": targets.contiguous(),
    }
    for k, v in ref.items():
        tensors[k] = v.to(torch.float32).contiguous()
    assert tensors["loss"].shape == torch.Size([])
    if case["class_weights"] is not None:
        tensors["class_weights"] = torch.tensor(case["class_weights"], dtype=torch.float32)

    metadata = {
        "case": case["name"],
        "loss": case["loss"],
        "optimizer": case["optimizer"],
        "lr": repr(LR),
        "beta1": repr(BETA1),
        "beta2": repr(BETA2),
        "eps": repr(case_eps(case)),
        "weight_decay": repr(float(case["weight_decay"])),
        "steps": str(STEPS),
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "compute_dtype": str(compute_dtype).replace("torch.", ""),
        "hidden_act": case["hidden_act"],
        "lengths": json.dumps(case["lengths"]),
        "seed": str(case["seed"]),
    }
    if case.get("max_grad_norm"):
        metadata["max_grad_norm"] = repr(float(case["max_grad_norm"]))
    if case.get("literal_pads"):
        metadata["literal_pads"] = json.dumps(case["literal_pads"])
    if case_family(case) != "bert":
        metadata["model_type"] = model.config.model_type
        metadata["head_activation"] = FAMILIES[case_family(case)]["head_act"]
        metadata["pad_token_id"] = str(case["pad"])
        metadata["layer_norm_eps"] = repr(float(case["layer_norm_eps"]))
    write_safetensors(os.path.join(case_dir, "golden.safetensors"), tensors, metadata)

    print("%-32s loss %.6f  max|logit| %.4f  (B=%d S=%d, %d params, extra keys in model.safetensors: %s)"
          % (case["name"], float(ref["loss"]), float(ref["logits"].abs().max()),
             input_ids.shape[0], input_ids.shape[1], sum(p.numel() for p in model.parameters()),
             extra or "none"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT, help="output root (default: %(default)s)")
    ap.add_argument("--case", action="append", help="only this case (repeatable)")
    ap.add_argument("--eps", type=float, default=EPS, help="Adam/AdamW eps (default: %(default)s)")
    ap.add_argument("--compute-dtype", choices=["float64", "float32"], default="float64",
                    help="precision of the reference computation (default: %(default)s)")
    args = ap.parse_args()

    EPS_OVERRIDE[0] = args.eps
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    compute_dtype = getattr(torch, args.compute_dtype)
    print("torch %s, transformers %s, compute dtype %s" % (torch.__version__, transformers.__version__, args.compute_dtype))
    cases = CASES
    if args.case:
        unknown = set(args.case) - {c["name"] for c in CASES}
        if unknown:
            sys.exit("unknown case(s): %s" % sorted(unknown))
        cases = [c for c in CASES if c["name"] in args.case]
    os.makedirs(args.out, exist_ok=True)
    for case in cases:
        make_case(case, args.out, compute_dtype)


if __name__ == "__main__":
    main()
