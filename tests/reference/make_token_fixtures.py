#!/usr/bin/env python3
"""Golden fixtures for bertrain's text cleaning (data/text_clean) and WordPiece tokenizer (data/tokenizer).

Writes tests/fixtures/tokens/:
  dataset.jsonl, holdout.jsonl  one line per CSV row: {"id": <csv id>, "clean": clean_text(title + " " +
                                description), "ids": BertTokenizer ids of the cleaned text ([CLS] ... [SEP])}
  unicode_cases.jsonl           hand-picked cases: {"name", "text", "ids"} (tokenizer only, no cleaning)
                                and {"name", "text", "clean"} (clean_text only)

The reference tokenizer is the slow (pure Python) BertTokenizer: in transformers 5 it is
`BertTokenizerLegacy`, because `BertTokenizer` itself became the Rust-backed fast tokenizer. Every
output is also run through the fast tokenizer (`BertTokenizer`, tokenizers' BertNormalizer +
BertPreTokenizer + WordPiece) and every difference is printed and recorded in the case as "fast_ids".

--sweep FILE additionally writes an exhaustive per-code-point comparison (not committed, ~110 MB):
one line per code point {"cp", "cat" (Python's category), "text", "ids", "fast_ids", "clean_text",
"clean"}; test_tokenizer / test_text_clean check it when BERTRAIN_UNICODE_SWEEP=FILE is set.

Needs: transformers (5.x) with tokenizers. Reads the data folder ./bertrain.sh uses ($BERTRAIN_DATA_DIR, else
datasets/ in the checkout) unless --data-dir is given; it needs madewithml/dataset.csv, holdout.csv, STOPWORDS.txt
and scibert_scivocab_uncased/vocab.txt. Deterministic: the same inputs give byte-identical files.
"""

import argparse
import csv
import json
import os
import re
import sys
import unicodedata

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def default_data_dir():
    """The data folder as ./bertrain.sh finds it: $BERTRAIN_DATA_DIR; else datasets/ in the checkout when it holds
    Made-With-ML's dataset.csv; else ../shared/data beside the checkout (where the development machines keep it)."""
    if os.environ.get("BERTRAIN_DATA_DIR"):
        return os.environ["BERTRAIN_DATA_DIR"]
    for d in (os.path.join(REPO_ROOT, "datasets"), os.path.join(REPO_ROOT, "..", "shared", "data")):
        if os.path.isfile(os.path.join(d, "madewithml", "dataset.csv")):
            return os.path.normpath(d)
    return os.path.join(REPO_ROOT, "datasets")


DEFAULT_DATA = default_data_dir()
DEFAULT_OUT = os.path.join(REPO_ROOT, "tests", "fixtures", "tokens")


def load_stopwords(path):
    with open(path, encoding="utf-8") as f:
        words = [line.rstrip("\n") for line in f if line.rstrip("\n")]
    assert len(words) == 179, f"{path}: expected 179 stopwords, got {len(words)}"
    return words


# Made-With-ML madewithml/data.py, verbatim apart from the stopwords argument being required.
def clean_text(text, stopwords):
    text = text.lower()
    pattern = re.compile(r"\b(" + r"|".join(stopwords) + r")\b\s*")
    text = pattern.sub(" ", text)
    text = re.sub(r"([!\"'#$%&()*\+,-./:;<=>?@\\\[\]^_`{|}~])", r" \1 ", text)
    text = re.sub("[^A-Za-z0-9]+", " ", text)
    text = re.sub(" +", " ", text)
    text = text.strip()
    text = re.sub(r"http\S+", "", text)
    return text


def read_rows(path):
    # Same strings as pandas.read_csv gives for this data (no empty fields, no NaN); newline="" keeps
    # the newlines inside quoted fields as they are.
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def dumps(obj):
    # ASCII-only JSON (\u escapes, surrogate pairs above the BMP): robust to any editor or diff tool.
    return json.dumps(obj, ensure_ascii=True, separators=(", ", ": "))


# Tokenizer-only cases: raw text, no cleaning.
TOKENIZER_CASES = [
    ("accents", "Caf\u00e9 Na\u00efve r\u00e9sum\u00e9 \u00c9COLE"),
    ("cjk", "\u57fa\u4e8etransformer\u7684\u6a21\u578b"),
    ("ascii_punctuation", "hello,world!!(test) a-b_c/d e.g. $5 #1 @x ~y `z` ^w |v"),
    ("unicode_punctuation", "\u201cquoted\u201d\u2014dash\u2026 \u00bfqu\u00e9? \u00abguillemets\u00bb \u3001\u3002"),
    ("control_chars", "a\u0000b\u0007c\u200bd\u0085e\u00adf\u001fg\u007fh"),
    ("replacement_char", "x\ufffdy \ufffd z"),
    ("word_100_chars", "a" * 100),
    ("word_101_chars", "b" * 101),
    ("word_120_chars", "abcdefghij" * 12 + " ok"),
    ("word_100_chars_nonascii", "\u00e9" * 100 + " " + "\u00e9" * 101),
    ("no_vocab_match", "abc\u2603def snow\u2603 \u2603"),
    ("zs_spaces", "a\u00a0b\u3000c\u2009d\u202fe\u1680f\u205fg"),
    ("line_paragraph_separators", "a\u2028b\u2029c"),
    ("combining_marks", "e\u0301 n\u0303o \u0301 x\u0301\u0302y A\u030a"),
    ("greek_cyrillic", "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u03c3\u03bf\u03c6\u03cc\u03c2"),
    ("final_sigma", "\u0391\u03a3 \u0391\u03a3. \u0391\u03a3\u0391 \u03a3 \u0391\u03a3\u0301 \u0391\u0301\u03a3 \u0391\u03a3'\u0391"),
    ("emoji", "I \u2764\ufe0f NLP \U0001f917 transformers \U0001f468\u200d\U0001f4bb"),
    ("tabs_newlines", "a\tb\nc\r\nd\re  \t\n f"),
    ("special_tokens_in_text", "hello[CLS]world [SEP] [cls] [UNK] [MASK]x [PAD]"),
    ("dotted_capital_i", "\u0130stanbul \u0130THE I\u0307"),
    ("kelvin_angstrom_ohm", "\u212a \u212b \u2126 \u212akelvin"),
    ("cjk_range_edges", "\u4e00\u9fff\u3400\u4dbf \U00020000\U0002a6df\U0002a700\U0002b73f\U0002b740\U0002b81f"
                        "\U0002b820\U0002b91f\U0002b920\U0002ceaf \uf900\ufaff \U0002f800\U0002fa1f"),
    ("cjk_neighbours", "\u3007\u3005\u4dc0\u2e80 \U0002ceb0"),
    ("unassigned", "a\u0378b \U0003fffdx"),
    ("private_use", "a\ue000b \U000f0000c"),
    ("empty", ""),
    ("only_whitespace", "   \t\n\u00a0 "),
    ("digits", "2018 3.14 1,000 \u00b2 \u2167 \u0663"),
    ("hangul", "\ud55c\uad6d\uc5b4 \u1100\u1161"),
    ("kana_dakuten", "\u30ac\u30ae \u304c"),
    ("arabic_devanagari", "\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627 \u0928\u092e\u0938\u094d\u0924\u0947"),
    ("ligature_fullwidth", "\ufb01le \uff21\uff22\uff23 \uff41"),
    ("titlecase_digraph", "\u01c4 \u01c5 \u01c6 \u1e9e \u00df"),
    ("mixed_sentence", "BERT-based models (e.g., SciBERT) reach 91.1% F1 on the hold-out set!"),
]


# clean_text cases (the Python function above is the reference).
def clean_cases(dataset_rows, holdout_rows):
    cases = []
    h0 = holdout_rows[0]
    cases.append(("holdout_row0", h0["title"] + " " + h0["description"]))
    row2430 = next(r for r in dataset_rows if r["id"] == "2430")
    title = row2430["title"]
    i = title.index("\u57fa\u4e8et")
    cases.append(("dataset_2430_snippet", title[max(0, i - 20):] + " " + row2430["description"][:24]))
    cases += [
        ("unicode_word_char_before_t", "Translation \u57fa\u4e8et"),
        ("unicode_word_char_after", "\u4e2dthe the\u4e2d the"),
        ("accented_neighbours", "\u00e9the the\u00e9 \u00e9 the"),
        ("combining_after_stopword", "the\u0301 x"),
        ("superscript_digit_is_word", "the\u00b2 a\u00b2"),
        ("dotted_capital_i", "\u0130the \u0130 x\u0130s"),
        ("kelvin_sign", "\u212athe \u212a \u212a8s"),
        ("stopword_start_end", "The model is all you need to"),
        ("only_stopwords", "the a an of to"),
        ("links", "see http://x.y/z and https://github.com/a/b-c for more http xhttpy http2 httpa"),
        ("link_only", "https://madewithml.com"),
        ("underscores", "snake_case the_end _the the_ __init__"),
        ("digits", "3d the 2nd 1the the1 v2.0"),
        ("apostrophes", "don't stop, it's theirs you're isn't shouldn't've"),
        ("alternation_order", "it's itself its i'm in is it"),
        ("punctuation", "hello,world!!(test) [a]{b}<c>|d~e^f`g"),
        ("unicode_whitespace", "\u00a0the\u3000the\u2028the\u0085the\u001cthe end"),
        ("unicode_punctuation", "\u201cthe\u201d\u2014a\u2026 \u00abthe\u00bb"),
        ("final_sigma_word", "\u039f\u0394\u039f\u03a3 the \u03a3the"),
        ("greek_then_stopword", "\u03b1the \u03b1 the"),
        ("tabs_newlines", "a\tthe\nthe\r\nthe b"),
        ("mixed_case", "ThE AND Or NOT nOt"),
        ("empty", ""),
    ]
    return cases


def compare_fast(what, slow_ids, fast_ids, differences):
    if slow_ids != fast_ids:
        differences.append(what)
        print(f"slow/fast difference: {what}: slow {slow_ids} fast {fast_ids}", file=sys.stderr)


def write_sweep(path, slow, fast, stopwords):
    """One line per code point (every assigned one, every unassigned one below U+40000, a sample above)."""
    selected = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        cat = unicodedata.category(chr(cp))
        if cat != "Cn" or cp < 0x40000 or cp % 251 == 0:
            selected.append(cp)
    n_diff = 0
    with open(path, "w", encoding="utf-8") as f:
        batch = 4096
        for start in range(0, len(selected), batch):
            cps = selected[start:start + batch]
            # x<c>y: glued inside a word; <c> alone; Alpha Sigma <c> and <c> Sigma: whether <c> is cased or
            # case-ignorable decides the final sigma; A<c>I: NFC may compose <c> with the A.
            texts = [f"x{chr(cp)}y {chr(cp)} \u0391\u03a3{chr(cp)} {chr(cp)}\u03a3 A{chr(cp)}I" for cp in cps]
            cleans = [f"i{chr(cp)}the {chr(cp)}i {chr(cp)}z" for cp in cps]
            fast_ids = fast(texts)["input_ids"]
            for cp, text, fids, ctext in zip(cps, texts, fast_ids, cleans):
                ids = slow(text)["input_ids"]
                n_diff += ids != fids
                f.write(dumps({"cp": cp, "cat": unicodedata.category(chr(cp)), "text": text, "ids": ids,
                               "fast_ids": fids, "clean_text": ctext, "clean": clean_text(ctext, stopwords)}) + "\n")
    print(f"sweep: {len(selected)} code points written to {path} (Python {sys.version.split()[0]}, Unicode "
          f"{unicodedata.unidata_version}); slow/fast differ on {n_diff}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=DEFAULT_DATA, help="folder with madewithml/ and scibert_scivocab_uncased/")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--sweep", metavar="FILE", help="also write the per-code-point sweep to FILE")
    args = ap.parse_args()

    import transformers
    from transformers.models.bert.tokenization_bert import BertTokenizer, load_vocab
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    vocab_path = os.path.join(args.data_dir, "scibert_scivocab_uncased", "vocab.txt")
    stopwords = load_stopwords(os.path.join(args.data_dir, "madewithml", "STOPWORDS.txt"))
    slow = BertTokenizerLegacy(vocab_path, do_lower_case=True, tokenize_chinese_chars=True, strip_accents=None)
    fast = BertTokenizer(vocab=load_vocab(vocab_path), do_lower_case=True, tokenize_chinese_chars=True,
                         strip_accents=None)
    print(f"transformers {transformers.__version__}, Python {sys.version.split()[0]} "
          f"(Unicode {unicodedata.unidata_version})", file=sys.stderr)

    os.makedirs(args.out, exist_ok=True)
    differences = []
    rows = {}
    for split in ("dataset", "holdout"):
        rows[split] = read_rows(os.path.join(args.data_dir, "madewithml", f"{split}.csv"))
        lines, longest = [], 0
        for r in rows[split]:
            clean = clean_text(r["title"] + " " + r["description"], stopwords)
            ids = slow(clean)["input_ids"]
            compare_fast(f"{split} id {r['id']}", ids, fast(clean)["input_ids"], differences)
            longest = max(longest, len(ids))
            lines.append(dumps({"id": int(r["id"]), "clean": clean, "ids": ids}))
        with open(os.path.join(args.out, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{split}: {len(lines)} rows, longest {longest} ids", file=sys.stderr)

    lines = []
    for name, text in TOKENIZER_CASES:
        ids = slow(text)["input_ids"]
        case = {"name": name, "text": text, "ids": ids}
        fast_ids = fast(text)["input_ids"]
        if fast_ids != ids:
            case["fast_ids"] = fast_ids
        compare_fast(f"case {name}", ids, fast_ids, differences)
        lines.append(dumps(case))
    for name, text in clean_cases(rows["dataset"], rows["holdout"]):
        lines.append(dumps({"name": "clean_" + name, "text": text, "clean": clean_text(text, stopwords)}))
    with open(os.path.join(args.out, "unicode_cases.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"unicode_cases: {len(lines)} cases; slow/fast differences: {len(differences)}", file=sys.stderr)

    if args.sweep:
        write_sweep(args.sweep, slow, fast, stopwords)


if __name__ == "__main__":
    main()
