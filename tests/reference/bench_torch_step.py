#!/usr/bin/env python3
r"""PyTorch baseline for one BERT fine-tuning step (CPU, or CUDA with bf16 autocast), for comparison with bertrain.

One step = forward (BertForSequenceClassification) + BCEWithLogits loss + backward +
optimizer step + zero_grad, on a random batch. Default shape is BERT-mini
(4 layers, hidden 256, 4 heads, intermediate 1024) with a 31090-token vocab,
batch 32, seq 64, 4 labels. Prints one JSON line.

With --lengths FILE (written by `bertrain bench step --lengths-out FILE`: a JSON object
{"batches": [[L_0, L_1, ...], ...]}, each inner list one batch, each number the length
in tokens of one row, [CLS] and [SEP] included) it times exactly those batches instead:
--batch, --seq and --padding are ignored, step k (warm-up steps counted, k = 0, 1, ...)
runs batch k mod len(batches), and each batch is dynamically padded to its own longest
row (right padding, as Hugging Face's DataCollatorWithPadding does). tokens_per_s counts
the real (unpadded) tokens of the timed steps; padded_tokens_per_step is the mean of
rows x longest row over the timed steps.

Examples:
  python tests/reference/bench_torch_step.py --threads 1 --steps 20 --warmup 3
  # BERT-base on a GPU with bf16 autocast, as `bertrain bench step --device cuda --precision bf16`:
  python tests/reference/bench_torch_step.py --device cuda --autocast-bf16 --layers 12 --hidden 768 \
      --heads 12 --intermediate 3072 --batch 256 --seq 128 --padding --attn sdpa
  # the same with every row full length (no --padding), compiled: the issue-14 comparison
  python tests/reference/bench_torch_step.py --device cuda --autocast-bf16 --layers 12 --hidden 768 \
      --heads 12 --intermediate 3072 --batch 256 --seq 128 --attn sdpa --fused-adam --compile
  # the batch lengths of the Made-With-ML dataset, as bertrain batches them:
  build/bertrain bench step --lengths-from DATA/madewithml/dataset.csv \
      --vocab-file DATA/scibert_scivocab_uncased/vocab.txt --batch 32 --lengths-out /tmp/lengths.json
  python tests/reference/bench_torch_step.py --lengths /tmp/lengths.json --threads 2
"""

import argparse
import json
import platform
import resource
import statistics
import sys
import time

import torch
import transformers
from transformers import BertConfig, BertForSequenceClassification

MAX_POSITIONS = 512  # max_position_embeddings of the model built below


def load_lengths(path, max_len):
    """The batches of a --lengths file as lists of ints; on any problem prints one line and exits 2."""
    def fail(what):
        print(f"bench_torch_step.py: {path}: {what}", file=sys.stderr)
        sys.exit(2)

    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        fail(f"cannot read: {e.strerror or e}")
    except UnicodeDecodeError:
        fail("not JSON: not UTF-8 text")
    except json.JSONDecodeError as e:
        fail(f"not JSON: {e.msg} at line {e.lineno} column {e.colno}")
    except RecursionError:
        fail("not JSON: nested too deeply")
    if not isinstance(doc, dict):
        fail("not a JSON object with a \"batches\" array")
    if "batches" not in doc:
        fail("no \"batches\" key")
    batches = doc["batches"]
    if not isinstance(batches, list):
        fail("\"batches\" is not an array")
    if not batches:
        fail("\"batches\" is empty")
    for i, batch in enumerate(batches):
        if not isinstance(batch, list):
            fail(f"batch {i} is not an array")
        if not batch:
            fail(f"batch {i} is empty")
        for j, n in enumerate(batch):
            if isinstance(n, bool) or not isinstance(n, int):
                fail(f"batch {i} row {j}: length {json.dumps(n)} is not an integer")
            if n < 2 or n > max_len:
                fail(f"batch {i} row {j}: length {n} is outside [2, {max_len}]")
    return batches


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=32, help="rows per batch (default: %(default)s; ignored with --lengths)")
    ap.add_argument("--seq", type=int, default=64, help="tokens per row (default: %(default)s; ignored with --lengths)")
    ap.add_argument("--lengths", metavar="FILE",
                    help="time the batches of FILE (from `bertrain bench step --lengths-out FILE`), each padded "
                         "to its own longest row; --batch, --seq and --padding are ignored")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=31090)
    ap.add_argument("--labels", type=int, default=4)
    ap.add_argument("--no-dropout", action="store_true",
                    help="all dropout 0 (default: BERT defaults 0.1, classifier dropout 0.5)")
    ap.add_argument("--attn", default="eager", choices=["eager", "sdpa"],
                    help="transformers attention implementation (default: %(default)s)")
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adamw"])
    ap.add_argument("--padding", action="store_true",
                    help="random right padding (lengths in [seq/2, seq]) instead of full-length rows "
                         "(ignored with --lengths)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--autocast-bf16", action="store_true",
                    help="torch.autocast(dtype=bfloat16) around forward and loss (fp32 master weights)")
    ap.add_argument("--fused-adam", action="store_true", help="torch.optim.Adam(fused=True) (CUDA)")
    ap.add_argument("--gradient-checkpointing", action="store_true",
                    help="model.gradient_checkpointing_enable() (Trainer's gradient_checkpointing; non-reentrant)")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model (default mode; dynamic shapes with --lengths); the warm-up "
                         "steps include the compilation")
    args = ap.parse_args()
    length_batches = load_lengths(args.lengths, MAX_POSITIONS) if args.lengths is not None else None
    device = torch.device(args.device)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    drop = 0.0 if args.no_dropout else 0.1
    config = BertConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, intermediate_size=args.intermediate,
        hidden_dropout_prob=drop, attention_probs_dropout_prob=drop,
        classifier_dropout=0.0 if args.no_dropout else 0.5,
        max_position_embeddings=MAX_POSITIONS, type_vocab_size=2, num_labels=args.labels,
        problem_type="multi_label_classification", attn_implementation=args.attn,
    )
    model = BertForSequenceClassification(config).to(device=device, dtype=torch.float32)
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    forward = torch.compile(model, dynamic=length_batches is not None) if args.compile else model
    opt_cls = torch.optim.Adam if args.optimizer == "adam" else torch.optim.AdamW
    opt = opt_cls(params, lr=5e-5, **({"fused": True} if args.fused_adam else {}))
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def make_targets(rows, generator=None):
        # one random label per row, as multi-hot (here one-hot) BCE targets
        return torch.nn.functional.one_hot(
            torch.randint(0, args.labels, (rows,), generator=generator), args.labels).float()

    # batches: (input_ids, attention_mask, token_type_ids, targets) on the device, all built before timing;
    # real_tokens / padded_tokens: unpadded tokens and rows x padded length of each batch
    if length_batches is None:
        B, S = args.batch, args.seq
        input_ids = torch.randint(1, args.vocab, (B, S))
        attention_mask = torch.ones((B, S), dtype=torch.int64)
        if args.padding:
            lengths = torch.randint(S // 2, S + 1, (B,))
            for b in range(B):
                attention_mask[b, lengths[b]:] = 0
                input_ids[b, lengths[b]:] = 0
        token_type_ids = torch.zeros_like(input_ids)
        targets = make_targets(B)
        batches = [tuple(t.to(device) for t in (input_ids, attention_mask, token_type_ids, targets))]
        real_tokens = [int(attention_mask.sum())]
        padded_tokens = [B * S]
    else:
        B, S = len(length_batches[0]), None  # rows of the first batch; each batch has its own padded length
        gen = torch.Generator().manual_seed(args.seed)
        batches, real_tokens, padded_tokens = [], [], []
        for row_lengths in length_batches:
            rows, longest = len(row_lengths), max(row_lengths)
            lengths = torch.tensor(row_lengths, dtype=torch.int64)
            attention_mask = (torch.arange(longest).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.int64)
            input_ids = torch.randint(1, args.vocab, (rows, longest), generator=gen) * attention_mask
            token_type_ids = torch.zeros_like(input_ids)
            targets = make_targets(rows, gen)
            batches.append(tuple(t.to(device) for t in (input_ids, attention_mask, token_type_ids, targets)))
            real_tokens.append(sum(row_lengths))
            padded_tokens.append(rows * longest)

    def step(k):
        input_ids, attention_mask, token_type_ids, targets = batches[k % len(batches)]
        with torch.autocast(device_type=args.device, dtype=torch.bfloat16, enabled=args.autocast_bf16):
            logits = forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits
            loss = loss_fn(logits.float(), targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    for k in range(args.warmup):
        step(k)
    sync()
    times = []
    timed = range(args.warmup, args.warmup + args.steps)  # step indices k of the timed steps
    for k in timed:
        t0 = time.perf_counter()
        step(k)
        sync()  # each step timed whole, as bertrain bench step does
        times.append((time.perf_counter() - t0) * 1000.0)

    med = statistics.median(times)
    timed_s = sum(times) / 1000.0
    if length_batches is None:
        samples_per_s = B * 1000.0 / med
    else:  # batches differ in cost (and maybe in rows): rows over total time, like tokens_per_s
        samples_per_s = sum(len(length_batches[k % len(batches)]) for k in timed) / timed_s
    print(json.dumps({
        "bench": "torch_bert_step",
        "threads": args.threads,
        "steps": args.steps,
        "warmup": args.warmup,
        "batch": B, "seq": S, "layers": args.layers, "hidden": args.hidden, "heads": args.heads,
        "intermediate": args.intermediate, "vocab": args.vocab, "labels": args.labels,
        "dropout": not args.no_dropout, "attn": args.attn, "optimizer": args.optimizer,
        "padding": "dynamic" if length_batches is not None else args.padding,
        "lengths_file": args.lengths,
        "batches": len(batches),
        "params": sum(p.numel() for p in params),
        "median_ms": round(med, 3),
        "mean_ms": round(statistics.fmean(times), 3),
        "min_ms": round(min(times), 3),
        "max_ms": round(max(times), 3),
        "samples_per_s": round(samples_per_s, 2),
        "tokens_per_s": round(sum(real_tokens[k % len(batches)] for k in timed) / timed_s, 1),
        "padded_tokens_per_step": round(statistics.fmean(padded_tokens[k % len(batches)] for k in timed), 1),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "cpu": platform.processor() or platform.machine(),
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "autocast_bf16": args.autocast_bf16,
        "compile": args.compile,
        "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3) if args.device == "cuda" else None,
        "gradient_checkpointing": args.gradient_checkpointing,
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30, 3),
    }))


if __name__ == "__main__":
    main()
