#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizers/<case>/{tokenizer.json,expected.jsonl}: Hugging Face tokenizer.json files and
the token ids the `tokenizers` package (Rust) gives for a few thousand strings, the reference for
data/hf_tokenizer.h (tests/data/test_hf_tokenizer.cpp).

Cases:
  bpe_bytelevel   RoBERTa style: byte-level BPE trained here on Made-With-ML's text (ByteLevel pre-tokenizer
                  with its GPT-2 regex, RobertaProcessing <s> ... </s>), "<mask>" special with lstrip, and two
                  non-special added tokens (one single_word, one rstrip).
  unigram_xlmr    XLM-R style: a sentencepiece unigram model trained here, converted by transformers'
                  XLMRobertaTokenizer (Precompiled nmt_nfkc normalizer, WhitespaceSplit + Metaspace, Unigram,
                  <s> ... </s> template).
  unigram_spm_converter  the same sentencepiece model through transformers' XLMRobertaConverter, as transformers
                  4.x wrote XLM-R's and CamemBERT's tokenizer.json: Precompiled, Strip (right) and
                  Replace(Regex " {2,}", "\u2581") normalizers, Metaspace alone as pre-tokenizer.
  roberta_files   no tokenizer.json: bpe_bytelevel's vocabulary as vocab.json + merges.txt with a
                  tokenizer_config.json as transformers 4.x saved one (mask_token an AddedToken with lstrip,
                  added_tokens_decoder adding a token and setting <s>'s flags), read by transformers' AutoTokenizer.
  roberta_files_bare  vocab.json + merges.txt alone (and config.json's model_type), as pre-fast-tokenizer
                  checkpoints ship them.
  wordpiece_files_cased  no tokenizer.json: wordpiece_cased's vocabulary as vocab.txt with a tokenizer_config.json
                  that asks for do_lower_case false, strip_accents true and tokenize_chinese_chars false.
  xlmr_spm_files  no tokenizer.json: unigram_xlmr's sentencepiece model as sentencepiece.bpe.model with the
                  tokenizer_config.json and special_tokens_map.json transformers 4.46's save_pretrained writes for
                  the slow XLMRobertaTokenizer (added_tokens_decoder giving <mask> lstrip).
  xlmr_spm_files_bare  a sentencepiece BPE model trained here with identity normalization (no Precompiled map),
                  user-defined and control pieces, as sentencepiece.bpe.model with config.json's model_type alone.
  camembert_spm_files  a sentencepiece unigram model trained here with identity normalization, user-defined and
                  control pieces, with the files transformers 4.46 writes for the slow CamembertTokenizer
                  (added_tokens.json, added_tokens_decoder, the <s>NOTUSED tokens as additional_special_tokens).
  roberta_files_map  roberta_files_bare's files with a tokenizer_config.json naming <mask> as a string and a
                  special_tokens_map.json giving it lstrip: transformers takes special_tokens_map.json's.
  wordpiece_cased WordPiece trained here, cased and accent-keeping (BertNormalizer lowercase=false,
                  strip_accents=false), pre-tokenizer Sequence[WhitespaceSplit, Punctuation, Digits(individual)],
                  [CLS] ... [SEP] template.
  minilm          models/all-MiniLM-L6-v2/tokenizer.json (uncased BERT WordPiece), copied.
  unigram_trained_scores  a Unigram model trained by the tokenizers package itself (NFKD + Lowercase, WhitespaceSplit
                  + Metaspace), whose scores it writes with 17 digits, which its own reader (serde_json) takes an ulp
                  off the correctly rounded value in about one case of five; strings of repeated pieces, whose
                  segmentations tie, besides the usual ones.

Strings: Made-With-ML titles, descriptions and both joined (real), plus seeded adversarial ones (accents and
combining marks, CJK, Hangul, emoji with ZWJ and skin tones, control and zero-width characters, Unicode
spaces, words over 100 characters, repeated punctuation, digits, special tokens written in the text).
expected.jsonl: one {"text", "ids"} per string with truncation at max_length 512 (transformers'
truncation=True, max_length=512), then rows with a "max_length" field at small lengths.

Deterministic for the pinned versions (requirements.txt: tokenizers, transformers, sentencepiece, protobuf) but
for wordpiece_cased (the WordPiece trainer breaks ties in hash order) and unigram_trained_scores (the Unigram
trainer's threads): keep their committed files unless it is the case being changed.
Usage: python tests/reference/make_tokenizer_fixtures.py [--out tests/fixtures/tokenizers] [--cases NAME,...]
(--cases writes those cases alone; the cases built from another case's files read that case's committed files)
"""

import argparse
import csv
import json
import os
import random
import shutil
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DATA = os.environ.get("BERTRAIN_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))
MINILM = os.path.join(ROOT, "models", "all-MiniLM-L6-v2", "tokenizer.json")


def real_strings(path):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        out.append(r["title"])
        out.append(r["description"])
    for r in rows[:300]:
        out.append(r["title"] + " " + r["description"])
    return out


POOLS = {
    "accents": ["Café", "naïve", "résumé", "ÉCOLE", "Ångström", "São Paulo", "Zürich", "Œuvre", "İstanbul",
                "ΣΊΣΥΦΟΣ", "ὈΔΥΣΣΕΎΣ", "Straße", "ǅemal", "ﬁnance", "e\u0301", "a\u0308\u0301", "o\u0338",
                "\u0301start", "n\u0303o\u0308", "Ⅻ", "½", "x²", "℃", "№5", "ｆｕｌｌｗｉｄｔｈ", "ＡＢＣ１２３"],
    "cjk": ["基于transformer的模型", "東京タワー", "日本語のテキスト", "中文分词", "ｶﾀｶﾅ", "ひらがな", "𠀀𠀁", "\U0002B820\U0002B920",
            "漢字かな交じり文", "〇一二三", "、。「」"],
    "hangul": ["한국어 텍스트", "안녕하세요", "\u1100\u1161\u11a8", "ㄱㄴㄷ", "한글과 English"],
    "emoji": ["👍", "👍🏽", "👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "❤️", "🇫🇷🇩🇪", "😀😃😄", "🥰", "🫠", "✅",
              "☃", "🧑🏿\u200d💻", "#️⃣", "🤖🤖🤖"],
    "control": ["\x00", "\x01", "\x07", "\x1b[31m", "\x7f", "\u0085", "\u200b", "\u200c", "\u200d", "\u2060",
                "\ufeff", "\u00ad", "\ufffd", "\ue000", "\U000f0000", "\u0378", "\U0001FAFF", "\t", "\r\n", "\n\n",
                "\x0b", "\x0c", "\x1c", "\x1f", "\u2028", "\u2029"],
    "spaces": ["\u00a0", "\u2002", "\u2003", "\u2009", "\u202f", "\u205f", "\u3000", "\u1680", "  ", "   \t  "],
    "punct": ["!!!", "...", "?!?!", "—", "–", "«»", "“quoted”", "‘single’", "(parens)", "[brackets]", "{x}",
              "#hashtag", "@mention", "a-b_c/d", "e.g.", "$5.00", "100%", "C++", "C#", "F#", "::", "->", "=>",
              "'s", "'ll", "'re", "don't", "I'M", "'S", "`code`", "~~", "^_^", "|pipe|", "\\back\\"],
    "digits": ["2019", "3.14159", "1,000,000", "0x1F", "v2.1.0", "١٢٣", "٣.١٤", "१२३", "12345678901234567890",
               "4th", "1st", "COVID-19", "GPT-3", "ResNet50"],
    "special": ["<s>", "</s>", "<pad>", "<unk>", "<mask>", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]", "[cls]",
                "<S>", "<mask >", "< mask>", "<<mask>>", "[CLS][SEP]", "<s></s>", "deep learning", "Deep Learning",
                "deeplearning", "nlp", "NLP", "xnlp"],
    "words": ["machine", "learning", "transformers", "BERT", "tokenization", "PyTorch", "TensorFlow", "the", "a",
              "model", "neural", "networks", "attention", "is", "all", "you", "need", "computer-vision", "mlops",
              "Hello", "world", "colab", "dataset", "GitHub", "state-of-the-art", "pre-trained", "fine-tuning"],
    "scripts": ["Привет мир", "Γειά σου", "مرحبا بالعالم", "שלום", "नमस्ते", "สวัสดี", "ሰላም", "Ⴀ", "ᏣᎳᎩ",
                "\u0e01\u0e34\u0e4d", "क्षि", "ﷺ", "ﬀ", "ǆ", "Ꭓ"],
}


def adversarial_strings(n, seed=1234):
    rng = random.Random(seed)
    keys = sorted(POOLS)
    out = []
    # Every pool entry alone, and between words.
    for k in keys:
        for s in POOLS[k]:
            out.append(s)
            out.append("hello " + s + " world")
            out.append("x" + s + "y")
    # Long words.
    for length in (99, 100, 101, 150, 300):
        out.append("a" * length)
        out.append("Supercalifragilistic" * (length // 20 + 1))
        out.append("é" * length)
        out.append("日" * (length // 3))
    out.append(" ".join(["word"] * 700))  # over 512 tokens: truncation
    out.append("  leading and trailing spaces  ")
    out.append("")
    out.append(" ")
    # Random mixtures.
    while len(out) < n:
        parts = []
        for _ in range(rng.randint(1, 8)):
            parts.append(rng.choice(POOLS[rng.choice(keys)]))
        sep = rng.choice([" ", "", "  ", "\t", "\n", "\u00a0", " ", " "])
        out.append(sep.join(parts))
    return out


def train_bpe(texts):
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors, trainers, decoders

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, show_progress=False,
                                  special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    tok.add_tokens([AddedToken("deep learning", single_word=True, normalized=True),
                    AddedToken("nlp", rstrip=True, normalized=True)])
    return tok


def train_wordpiece(texts):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=60))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False,
                                                lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(),
                                                 pre_tokenizers.Digits(individual_digits=True)])
    trainer = trainers.WordPieceTrainer(vocab_size=1500, show_progress=False,
                                        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return tok


def train_tokenizers_unigram(texts):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace()])
    trainer = trainers.UnigramTrainer(vocab_size=12000, show_progress=False, unk_token="<unk>",
                                      special_tokens=["<s>", "<pad>", "</s>", "<unk>"])
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    return tok


def serde_json_f64(text):
    """A JSON number's text as serde_json (without float_roundtrip) reads it, as data/hf_json.cpp does: the digits
    as a 64-bit integer (later ones dropped), to double, then one multiplication or division by a power of ten."""
    u64 = 2**64 - 1
    pos, i, sig, exp = text[0] != "-", 1 if text[0] == "-" else 0, 0, 0
    def overflows(a, d):
        return a >= u64 // 10 and (a > u64 // 10 or d > u64 % 10)
    while i < len(text) and text[i].isdigit():
        if overflows(sig, int(text[i])):
            while i < len(text) and text[i].isdigit():
                i, exp = i + 1, exp + 1
            break
        sig, i = sig * 10 + int(text[i]), i + 1
    if i < len(text) and text[i] == ".":
        i += 1
        while i < len(text) and text[i].isdigit():
            if overflows(sig, int(text[i])):
                while i < len(text) and text[i].isdigit():
                    i += 1
                break
            sig, exp, i = sig * 10 + int(text[i]), exp - 1, i + 1
    if i < len(text) and text[i] in "eE":
        i += 1
        sign = -1 if text[i] == "-" else 1
        i += text[i] in "+-"
        exp += sign * int(text[i:])
    f = float(sig)
    while abs(exp) > 308:  # the scores never come here; kept for the algorithm's sake
        if f == 0.0:
            break
        f, exp = f / 1e308, exp + 308
    f = f * float("1e%d" % exp) if exp >= 0 else f / float("1e%d" % -exp)
    return f if pos else -f


def correctly_read_twin(tok):
    """tok (a tokenizer trained in memory, its scores exact) written as a tokenizer.json whose every score is a text
    serde_json reads as the correctly rounded value of the text tok writes: Rust's tokenizer as a correct reader
    would see tok's file."""
    import decimal
    from tokenizers import Tokenizer

    doc = json.loads(tok.to_str())
    texts = []
    for piece, score in doc["model"]["vocab"]:
        want = float(repr(score))
        text = repr(score)
        if serde_json_f64(text) != want:
            digits = decimal.Decimal(want)  # exact; its first 17 to 20 digits, nudged, until serde reads `want`
            for width in (17, 18, 19, 20):
                q = decimal.Context(prec=width).create_decimal(digits)
                sign, ds, e = q.as_tuple()
                n = int("".join(map(str, ds)))
                found = None
                for step in range(0, 40):
                    for cand in (n + step, n - step):
                        t = ("-" if sign else "") + str(cand) + "e" + str(e)
                        if serde_json_f64(t) == want:
                            found = t
                            break
                    if found:
                        break
                if found:
                    text = found
                    break
            assert serde_json_f64(text) == want, (piece, score)
        texts.append(text)
    doc["model"]["vocab"] = [[p, "@%d@" % k] for k, (p, _) in enumerate(doc["model"]["vocab"])]
    raw = json.dumps(doc, ensure_ascii=False)
    for k, t in enumerate(texts):
        raw = raw.replace('"@%d@"' % k, t, 1)
    twin = Tokenizer.from_str(raw)
    # Rust's own reading of the twin is the correctly rounded one (its writer round-trips what it read).
    read = json.loads(twin.to_str())["model"]["vocab"]
    assert all(r[1] == float(repr(s)) for r, (_, s) in zip(read, doc_scores(tok))), "the twin is not read correctly"
    return twin


def doc_scores(tok):
    return json.loads(tok.to_str())["model"]["vocab"]


def tie_strings(tok, candidates, seed=99):
    """Pieces of the model repeated, joined without spaces, whose segmentations tie: those on which Rust's reading
    of the scores and a correct reading give other ids (all of them), then others of the same making."""
    from tokenizers import Tokenizer

    twin = correctly_read_twin(tok)
    as_read = Tokenizer.from_str(tok.to_str())  # what the fixture's file gives Rust (tok holds the exact scores)
    pieces = [p for p, _ in doc_scores(tok) if p.isalpha() and 1 <= len(p) <= 6]
    rng = random.Random(seed)
    made = []
    for _ in range(candidates):
        a, b, c = rng.choice(pieces), rng.choice(pieces), rng.choice(pieces)
        k = rng.randint(2, 14)
        made.append(rng.choice([a * k, (a + b) * (k // 2 + 1), a[0] + b * k, c + a * k, a * k + c,
                                (a + b + c) * (k // 3 + 1)]))
    differ = [t for t in made if as_read.encode(t).ids != twin.encode(t).ids]
    print(f"unigram_trained_scores: {len(differ)} of {candidates} repeated-piece strings tie otherwise when read "
          f"correctly")
    return differ + made[:300]


def train_unigram(texts, work):
    import sentencepiece as spm
    from tokenizers import Tokenizer
    from transformers import XLMRobertaTokenizer

    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(t.replace("\n", " ") for t in texts) + "\n")
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(work, "spm"), vocab_size=900,
                                   model_type="unigram", character_coverage=0.9995, num_threads=1,
                                   minloglevel=2, seed_sentencepiece_size=100000)
    model_dir = os.path.join(work, "xlmr")
    os.makedirs(model_dir)
    shutil.copy(os.path.join(work, "spm.model"), os.path.join(model_dir, "sentencepiece.bpe.model"))
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "XLMRobertaTokenizer"}, f)
    # transformers builds the tokenizer from the sentencepiece model: Precompiled, Metaspace, Unigram.
    return Tokenizer.from_str(XLMRobertaTokenizer.from_pretrained(model_dir).backend_tokenizer.to_str())


def convert_unigram(work):
    """train_unigram's model through XLMRobertaConverter (SpmConverter's normalizer and pre-tokenizer)."""
    from types import SimpleNamespace

    from tokenizers import Tokenizer
    from transformers.convert_slow_tokenizer import XLMRobertaConverter

    # The converter reads these attributes of the slow tokenizer it was written for.
    slow = SimpleNamespace(vocab_file=os.path.join(work, "spm.model"), add_prefix_space=True, legacy=True,
                           special_tokens=[], handle_byte_fallback=False,
                           convert_tokens_to_ids=lambda token: {"<s>": 0, "</s>": 2}[token])
    return Tokenizer.from_str(XLMRobertaConverter(slow).converted().to_str())


def train_spm(texts, work, name, model_type):
    """A small sentencepiece model with identity normalization (no Precompiled map), user-defined and control
    pieces; its bytes."""
    import sentencepiece as spm

    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(t.replace("\n", " ") for t in texts) + "\n")
    prefix = os.path.join(work, name)
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, vocab_size=400, model_type=model_type,
                                   normalization_rule_name="identity", user_defined_symbols=["NLP", "C++", "<sep2>"],
                                   control_symbols=["<cls2>"], character_coverage=0.9995, num_threads=1,
                                   minloglevel=2)
    with open(prefix + ".model", "rb") as f:
        return f.read()


def added_token(content, lstrip=False):
    return {"content": content, "lstrip": lstrip, "normalized": False, "rstrip": False, "single_word": False,
            "special": True}


def xlmr_slow_settings(mask_id):
    """tokenizer_config.json and special_tokens_map.json as transformers 4.46 saves a slow XLMRobertaTokenizer."""
    decoder = {"0": added_token("<s>"), "1": added_token("<pad>"), "2": added_token("</s>"), "3": added_token("<unk>"),
               str(mask_id): added_token("<mask>", lstrip=True)}
    config = {"added_tokens_decoder": decoder, "bos_token": "<s>", "clean_up_tokenization_spaces": False,
              "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>", "model_max_length": 512,
              "pad_token": "<pad>", "sep_token": "</s>", "sp_model_kwargs": {}, "tokenizer_class": "XLMRobertaTokenizer",
              "unk_token": "<unk>"}
    mask = {k: v for k, v in added_token("<mask>", lstrip=True).items() if k != "special"}
    special_map = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": mask,
                   "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
    return json.dumps(config, indent=2), json.dumps(special_map, indent=2)


def camembert_slow_settings(mask_id):
    """tokenizer_config.json, special_tokens_map.json and added_tokens.json as transformers 4.46 saves a slow
    CamembertTokenizer."""
    notused = ["<s>NOTUSED", "</s>NOTUSED", "<unk>NOTUSED"]
    decoder = {"0": added_token("<s>NOTUSED"), "1": added_token("<pad>"), "2": added_token("</s>NOTUSED"),
               "3": added_token("<unk>"), "4": added_token("<unk>NOTUSED"), "5": added_token("<s>"),
               "6": added_token("</s>"), str(mask_id): added_token("<mask>", lstrip=True)}
    config = {"added_tokens_decoder": decoder, "additional_special_tokens": notused, "bos_token": "<s>",
              "clean_up_tokenization_spaces": False, "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>",
              "model_max_length": 512, "pad_token": "<pad>", "sep_token": "</s>", "sp_model_kwargs": {},
              "tokenizer_class": "CamembertTokenizer", "unk_token": "<unk>"}
    mask = {k: v for k, v in added_token("<mask>", lstrip=True).items() if k != "special"}
    special_map = {"additional_special_tokens": notused, "bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>",
                   "mask_token": mask, "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
    return (json.dumps(config, indent=2), json.dumps(special_map, indent=2),
            json.dumps({"<mask>": mask_id}, indent=2))


def spm_piece_count(model_bytes):
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_proto=model_bytes).get_piece_size()


def write_files_case(out_dir, name, files, strings):
    """A directory of older tokenizer files (name -> text, or bytes) and the ids transformers' AutoTokenizer gives
    from it."""
    from transformers import AutoTokenizer

    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for file_name, content in files.items():
        if isinstance(content, bytes):
            with open(os.path.join(d, file_name), "wb") as f:
                f.write(content)
        else:
            with open(os.path.join(d, file_name), "w", encoding="utf-8") as f:
                f.write(content)
    tok = AutoTokenizer.from_pretrained(d)
    rows = [{"text": s, "ids": tok(s, truncation=True, max_length=512)["input_ids"]} for s in strings]
    for max_length in (2, 3, 5, 8, 16):
        for s in strings[:40:4] + strings[-60::6]:
            rows.append({"text": s, "max_length": max_length,
                         "ids": tok(s, truncation=True, max_length=max_length)["input_ids"]})
    with open(os.path.join(d, "expected.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{name} ({type(tok).__name__}): {len(rows)} rows")


def roberta_files(bpe_json, settings):
    """vocab.json and merges.txt (GPT-2's format: a #version line, a merge per line) from a BPE tokenizer.json."""
    tokenizer = json.loads(bpe_json)
    model = tokenizer["model"]
    # RoBERTa's vocab.json holds its special tokens (<mask> last) where tokenizer.json has them as added tokens.
    vocab = dict(model["vocab"])
    vocab.update({t["content"]: t["id"] for t in tokenizer["added_tokens"] if t["special"]})
    merges = ["#version: 0.2"] + [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    files = {"vocab.json": json.dumps(vocab, ensure_ascii=False), "merges.txt": "\n".join(merges) + "\n",
             "config.json": json.dumps({"model_type": "roberta"})}
    if settings:
        files["tokenizer_config.json"] = json.dumps(settings, ensure_ascii=False)
    return files


def wordpiece_files(wordpiece_json, settings):
    vocab = json.loads(wordpiece_json)["model"]["vocab"]
    lines = sorted(vocab, key=vocab.get)
    return {"vocab.txt": "".join(t + "\n" for t in lines), "config.json": json.dumps({"model_type": "bert"}),
            "tokenizer_config.json": json.dumps(settings)}


def write_case(out_dir, name, tok, strings):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    tok.no_padding()
    tok.no_truncation()
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tok.to_str())
    # Reload from the file: the ids are those of what was written.
    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    ref.enable_truncation(512)
    rows = []
    for s in strings:
        rows.append({"text": s, "ids": ref.encode(s).ids})
    for max_length in (2, 3, 5, 8, 16):
        ref.enable_truncation(max_length)
        for s in strings[:40:4] + strings[-60::6]:
            rows.append({"text": s, "max_length": max_length, "ids": ref.encode(s).ids})
    with open(os.path.join(d, "expected.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{name}: {len(rows)} rows")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "tokenizers"))
    ap.add_argument("--data", default=os.path.join(DEFAULT_DATA, "madewithml", "dataset.csv"))
    ap.add_argument("--adversarial", type=int, default=1000)
    ap.add_argument("--cases", default="", help="comma-separated case names (default: every case)")
    args = ap.parse_args()
    from tokenizers import Tokenizer

    real = real_strings(args.data)
    strings = real + adversarial_strings(args.adversarial)
    some_strings = strings[::4]  # the smaller cases: every fourth string
    train_texts = real + POOLS["accents"] + POOLS["cjk"] + POOLS["hangul"] + POOLS["scripts"]
    wanted = set(filter(None, args.cases.split(",")))

    def want(name):
        return not wanted or name in wanted

    def committed(name, file_name):
        with open(os.path.join(args.out, name, file_name), "rb") as f:
            return f.read()

    with tempfile.TemporaryDirectory() as work:
        if want("bpe_bytelevel"):
            write_case(args.out, "bpe_bytelevel", train_bpe(train_texts), strings)
        if want("unigram_xlmr") or want("unigram_spm_converter") or want("xlmr_spm_files"):
            unigram = train_unigram(train_texts, work)
            if want("unigram_xlmr"):
                write_case(args.out, "unigram_xlmr", unigram, strings)
            if want("unigram_spm_converter"):
                write_case(args.out, "unigram_spm_converter", convert_unigram(work), strings)
            if want("xlmr_spm_files"):
                with open(os.path.join(work, "spm.model"), "rb") as f:
                    model = f.read()
                config, special_map = xlmr_slow_settings(mask_id=spm_piece_count(model) + 1)
                write_files_case(args.out, "xlmr_spm_files", {
                    "sentencepiece.bpe.model": model, "tokenizer_config.json": config,
                    "special_tokens_map.json": special_map,
                    "config.json": json.dumps({"model_type": "xlm-roberta"})}, strings)
        if want("xlmr_spm_files_bare"):
            write_files_case(args.out, "xlmr_spm_files_bare", {
                "sentencepiece.bpe.model": train_spm(train_texts, work, "bpe_identity", "bpe"),
                "config.json": json.dumps({"model_type": "xlm-roberta"})}, some_strings)
        if want("camembert_spm_files"):
            model = train_spm(train_texts, work, "unigram_identity", "unigram")
            config, special_map, added = camembert_slow_settings(mask_id=spm_piece_count(model) + 4)
            write_files_case(args.out, "camembert_spm_files", {
                "sentencepiece.bpe.model": model, "tokenizer_config.json": config,
                "special_tokens_map.json": special_map, "added_tokens.json": added,
                "config.json": json.dumps({"model_type": "camembert"})}, some_strings)
        if want("wordpiece_cased"):
            write_case(args.out, "wordpiece_cased", train_wordpiece(train_texts), strings)
    if want("unigram_trained_scores"):
        tok = train_tokenizers_unigram(train_texts)
        write_case(args.out, "unigram_trained_scores", tok, strings + tie_strings(tok, 40000))
    if want("minilm"):
        write_case(args.out, "minilm", Tokenizer.from_file(MINILM), strings)
    # Vocabularies from two of the tokenizer.json files above; each case's directory holds its own files.
    bpe = committed("bpe_bytelevel", "tokenizer.json").decode("utf-8")
    wordpiece = committed("wordpiece_cased", "tokenizer.json").decode("utf-8")
    mask = {"__type": "AddedToken", "content": "<mask>", "lstrip": True, "normalized": False, "rstrip": False,
            "single_word": False}
    size = 1 + max(t["id"] for t in json.loads(bpe)["added_tokens"] if t["special"])  # past vocab.json's ids
    decoder = {
        "0": {"content": "<s>", "lstrip": False, "normalized": True, "rstrip": False, "single_word": False,
              "special": True},
        str(size): {"content": "nlp", "lstrip": False, "normalized": True, "rstrip": False, "single_word": True,
                    "special": False},
    }
    if want("roberta_files"):
        write_files_case(args.out, "roberta_files", roberta_files(bpe, {
            "tokenizer_class": "RobertaTokenizer", "errors": "replace", "model_max_length": 512, "bos_token": "<s>",
            "mask_token": mask, "added_tokens_decoder": decoder}), strings)
    if want("roberta_files_bare"):
        write_files_case(args.out, "roberta_files_bare", roberta_files(bpe, None), strings)
    if want("roberta_files_map"):
        files = roberta_files(bpe, {"mask_token": "<mask>"})
        files["special_tokens_map.json"] = json.dumps({"mask_token": {k: v for k, v in mask.items() if k != "__type"}})
        write_files_case(args.out, "roberta_files_map", files, some_strings)
    if want("wordpiece_files_cased"):
        write_files_case(args.out, "wordpiece_files_cased", wordpiece_files(wordpiece, {
            "do_lower_case": False, "strip_accents": True, "tokenize_chinese_chars": False}), strings)


if __name__ == "__main__":
    main()
