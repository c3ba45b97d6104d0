#!/usr/bin/env python3
"""PyTorch + transformers inference throughput on a dataset file, to set beside `bertrain evaluate` /
`bertrain predict` (which print rows/s on stderr) on the same machine.

Reads the rows' text as bertrain does by default (CSV: title + " " + description; JSON Lines: --text-column),
tokenizes with the model directory's BertTokenizerFast (dynamic padding to each batch's longest row, as Hugging
Face and Made-With-ML do), and runs BertForSequenceClassification in eval mode under torch.inference_mode, in
batches of --batch-size rows. Prints one JSON line: rows, seconds (tokenization + forward, as bertrain's
predict reports), rows_per_s. Text is not cleaned (cleaning is a few percent of bertrain's time).

    python tests/reference/bench_torch_inference.py --model RUN_DIR/best --data holdout.csv [--device cpu|cuda]
        [--batch-size 256] [--threads 2] [--bf16] [--repeat 3]
"""
import argparse
import csv
import json
import time

import torch
from transformers import BertForSequenceClassification, BertTokenizerFast


def read_texts(path, text_columns):
    if path.endswith(".jsonl") or path.endswith(".ndjson"):
        with open(path) as f:
            return [" ".join(json.loads(line)[c] for c in text_columns) for line in f if line.strip()]
    with open(path, newline="") as f:
        return [" ".join(row[c] for c in text_columns) for row in csv.DictReader(f)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model directory (a bertrain RUN_DIR/best works)")
    ap.add_argument("--data", required=True)
    ap.add_argument("--text-columns", default="title,description")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--bf16", action="store_true", help="autocast to bfloat16 (CUDA)")
    ap.add_argument("--repeat", type=int, default=3, help="passes over the file; the fastest is reported")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    texts = read_texts(args.data, args.text_columns.split(","))
    tokenizer = BertTokenizerFast.from_pretrained(args.model)
    model = BertForSequenceClassification.from_pretrained(args.model).to(args.device).eval()
    best = float("inf")
    for _ in range(args.repeat):
        if args.device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode(), torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.bf16):
            for i in range(0, len(texts), args.batch_size):
                batch = tokenizer(texts[i:i + args.batch_size], padding=True, truncation=True, max_length=512,
                                  return_tensors="pt").to(args.device)
                logits = model(**batch).logits.float().cpu()  # the host needs them, as bertrain's output does
        best = min(best, time.perf_counter() - start)
    del logits
    print(json.dumps({"rows": len(texts), "seconds": best, "rows_per_s": len(texts) / best,
                      "batch_size": args.batch_size, "device": args.device, "threads": torch.get_num_threads(),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
