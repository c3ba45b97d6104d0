// The tokenizer.json that transformers (5.x) builds from a model directory's older tokenizer files, for the
// directories without one (checkpoints saved before fast tokenizers, or with a slow tokenizer):
//  - vocab.json + merges.txt: RoBERTa's byte-level BPE, as RobertaTokenizer builds it (ByteLevel pre-tokenizer,
//    BPE without unk, RobertaProcessing <s> ... </s>);
//  - vocab.txt whose tokenizer_config.json asks for other than BERT's uncased rules (do_lower_case false,
//    strip_accents, tokenize_chinese_chars false), as BertTokenizer builds it (BertNormalizer, BertPreTokenizer,
//    WordPiece, [CLS] ... [SEP]). An uncased vocab.txt keeps BertTokenizer (data/tokenizer.h), the Made-With-ML
//    pipeline's Python semantics.
//  - sentencepiece.bpe.model (data/sentencepiece_model.h) of an XLM-R or CamemBERT checkpoint: what
//    XLMRobertaTokenizer / CamembertTokenizer build from it (the Unigram vocabulary with fairseq's special ids,
//    the model's Precompiled normalizer, WhitespaceSplit + Metaspace, <s> ... </s>), the model's control and
//    user-defined pieces as added tokens.
// The special tokens are special_tokens_map.json's, else tokenizer_config.json's, else the class's defaults, with
// the flags an AddedToken object gives them, and added_tokens_decoder's entries add tokens or set flags, as
// transformers' from_pretrained reads them (with added_tokens_decoder in tokenizer_config.json, transformers ignores
// special_tokens_map.json and added_tokens.json). What transformers would resolve in ways these files do not say
// (added_tokens.json's ids, a special token missing from the vocabulary) is an Error naming the file, never a
// silently different tokenization: tokenizer.json, which transformers writes with save_pretrained, settles it.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace bertrain {

// What a user should do with `dir` when its tokenizer files are not read: the transformers command that writes
// tokenizer.json beside them.
std::string tokenizer_json_advice(const std::string& dir);

// From dir/vocab.json and dir/merges.txt (both must exist) and the settings files beside them.
nlohmann::json byte_level_bpe_tokenizer_json(const std::string& dir);

// From dir/vocab.txt and the settings beside it; nullopt when they ask for BERT's uncased rules (or say nothing).
std::optional<nlohmann::json> wordpiece_tokenizer_json(const std::string& dir);

// From dir/sentencepiece.bpe.model and the settings beside it; tokenizer_config.json's tokenizer_class, else
// config.json's model_type, must name XLM-R or CamemBERT.
nlohmann::json sentencepiece_tokenizer_json(const std::string& dir);

}  // namespace bertrain
