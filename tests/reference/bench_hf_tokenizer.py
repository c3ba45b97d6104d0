#!/usr/bin/env python3
"""Single-threaded throughput of Made-With-ML's clean_text (Python) and Hugging Face's fast tokenizer
(tokenizers, Rust) on a CSV's title + " " + description, its rows repeated to --rows: the reference for
`bertrain bench tokenize` (same rows, same counters).

Variants (one JSON line each, plus a readable line):
  clean                          clean_text only
  tokenize_batch / _loop         tokenizers.BertWordPieceTokenizer (lowercase, SciBERT vocab) on the text
                                 cleaned beforehand: encode_batch over all rows / encode row by row
  clean+tokenize_batch / _loop   clean_text, then the same
  transformers_batch             transformers.BertTokenizer (the fast one in transformers 5) called on
                                 the list of cleaned texts (tokenize only; adds transformers' Python layer)
MB/s counts the variant's input text (raw for the clean variants, cleaned for tokenize-only), UTF-8
bytes. "tokens" and "id_sum" ([CLS] and [SEP] included) must match bertrain's for the same rows.

With --tokenizer-json FILE (any tokenizer.json; `bertrain bench tokenize --model DIR` or --vocab FILE.json is
the other side): tokenizers.Tokenizer.from_file(FILE), truncation at --max-length, no padding, instead of
BertWordPieceTokenizer; the transformers_batch variant is skipped.

Threads: RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false are set before tokenizers is imported.
"""

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["RAYON_RS_NUM_CPUS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from make_token_fixtures import DEFAULT_DATA, clean_text  # noqa: E402  (Made-With-ML's, one copy; the data folder)


def best_of(repeats, fn):
    best, result = None, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best, result


def report(variant, seconds, rows, input_bytes, counts):
    tokens, id_sum = counts if counts else (0, 0)
    rows_per_s = rows / seconds
    mb_per_s = input_bytes / 1e6 / seconds
    print(f"{variant:22s} {rows_per_s:10.0f} rows/s {mb_per_s:8.2f} MB/s  ({seconds:.3f} s)", flush=True)
    print(json.dumps({"bench": "tokenize", "impl": "hf", "variant": variant, "threads": 1, "rows": rows,
                      "input_bytes": input_bytes, "seconds": round(seconds, 6), "rows_per_s": round(rows_per_s, 1),
                      "mb_per_s": round(mb_per_s, 3), "tokens": tokens, "id_sum": id_sum}), flush=True)


def count(encodings):
    tokens = id_sum = 0
    for e in encodings:
        ids = e.ids if hasattr(e, "ids") else e
        tokens += len(ids)
        id_sum += sum(ids)
    return tokens, id_sum


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", default=os.path.join(DEFAULT_DATA, "scibert_scivocab_uncased", "vocab.txt"))
    ap.add_argument("--data", default=os.path.join(DEFAULT_DATA, "madewithml", "dataset.csv"))
    ap.add_argument("--stopwords", default=os.path.join(DEFAULT_DATA, "madewithml", "STOPWORDS.txt"))
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--repeats", type=int, default=3, help="timed passes per variant; the fastest is reported")
    ap.add_argument("--skip-loop", action="store_true", help="skip the row-by-row variants")
    ap.add_argument("--tokenizer-json", help="time this tokenizer.json instead of the WordPiece vocabulary")
    ap.add_argument("--max-length", type=int, default=512, help="truncation of --tokenizer-json encodings")
    args = ap.parse_args()

    import tokenizers
    import transformers
    from tokenizers import BertWordPieceTokenizer
    from transformers.models.bert.tokenization_bert import BertTokenizer, load_vocab

    with open(args.stopwords, encoding="utf-8") as f:
        stopwords = [w.rstrip("\n") for w in f if w.rstrip("\n")]
    with open(args.data, encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    raw = [table[i % len(table)]["title"] + " " + table[i % len(table)]["description"] for i in range(args.rows)]
    cleaned = [clean_text(t, stopwords) for t in raw]
    raw_bytes = sum(len(t.encode("utf-8")) for t in raw)
    cleaned_bytes = sum(len(t.encode("utf-8")) for t in cleaned)

    if args.tokenizer_json:
        tok = tokenizers.Tokenizer.from_file(args.tokenizer_json)
        tok.no_padding()
        tok.enable_truncation(args.max_length)
    else:
        tok = BertWordPieceTokenizer(args.vocab, lowercase=True, clean_text=True, handle_chinese_chars=True,
                                     strip_accents=None)
    hf = BertTokenizer(vocab=load_vocab(args.vocab))
    print(f"bench_hf_tokenizer: {args.data}, {len(table)} distinct rows repeated to {args.rows} "
          f"({raw_bytes / 1e6:.2f} MB raw, {cleaned_bytes / 1e6:.2f} MB cleaned), tokenizers {tokenizers.__version__}, "
          f"transformers {transformers.__version__}, Python {sys.version.split()[0]}, 1 thread, best of {args.repeats}",
          flush=True)

    n = args.rows
    sec, _ = best_of(args.repeats, lambda: [clean_text(t, stopwords) for t in raw])
    report("clean", sec, n, raw_bytes, None)
    sec, enc = best_of(args.repeats, lambda: tok.encode_batch(cleaned))
    report("tokenize_batch", sec, n, cleaned_bytes, count(enc))
    if not args.skip_loop:
        sec, enc = best_of(args.repeats, lambda: [tok.encode(t) for t in cleaned])
        report("tokenize_loop", sec, n, cleaned_bytes, count(enc))
    sec, enc = best_of(args.repeats, lambda: tok.encode_batch([clean_text(t, stopwords) for t in raw]))
    report("clean+tokenize_batch", sec, n, raw_bytes, count(enc))
    if not args.skip_loop:
        sec, enc = best_of(args.repeats, lambda: [tok.encode(clean_text(t, stopwords)) for t in raw])
        report("clean+tokenize_loop", sec, n, raw_bytes, count(enc))
    if args.tokenizer_json:
        return
    sec, out = best_of(args.repeats, lambda: hf(cleaned)["input_ids"])
    report("transformers_batch", sec, n, cleaned_bytes, count(out))


if __name__ == "__main__":
    main()
