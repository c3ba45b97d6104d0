#include "data/tokenizer_files.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "data/base64.h"
#include "data/hf_json.h"
#include "data/sentencepiece_model.h"
#include "data/tokenizer.h"

namespace bertrain {

namespace {

using nlohmann::json;

// Ids as JSON's parser stores a non-negative number (unsigned), which is what the tokenizer.json readers expect.
json id_json(int id) { return static_cast<uint32_t>(id); }

// A special token and the flags of the AddedToken transformers makes of it.
struct SpecialToken {
  std::string content;
  bool lstrip = false, rstrip = false, single_word = false, normalized = false;
  bool plain = true;  // given as a string (a class may give those flags of its own), not as an AddedToken object
};

json added_token(int id, const SpecialToken& t, bool special) {
  return {{"id", id_json(id)},  {"content", t.content}, {"single_word", t.single_word}, {"lstrip", t.lstrip},
          {"rstrip", t.rstrip}, {"normalized", t.normalized}, {"special", special}};
}

// TemplateProcessing's pieces: a special token, a sequence ("A", "B"), and the special_tokens entry of a token.
json template_special(const SpecialToken& t) { return json{{"SpecialToken", {{"id", t.content}, {"type_id", 0}}}}; }
json template_sequence(const char* id) { return json{{"Sequence", {{"id", id}, {"type_id", 0}}}}; }
json template_token_entry(const SpecialToken& t, int id) {
  return {{"id", t.content}, {"ids", {id_json(id)}}, {"tokens", {t.content}}};
}

// A settings value naming a token: a string, or an AddedToken object {"content", "lstrip", ...}.
SpecialToken token_of(const hf::JsonAt& value) {
  if (value.json().is_string()) return {value.str()};
  SpecialToken t{value.at("content").str()};
  t.plain = false;
  t.lstrip = value.get_bool("lstrip", false);
  t.rstrip = value.get_bool("rstrip", false);
  t.single_word = value.get_bool("single_word", false);
  t.normalized = value.get_bool("normalized", false);
  return t;
}

// A settings file's object; {} when the file is absent.
json read_settings(const std::string& path) {
  if (!file_exists(path)) return json::object();
  json j = read_json_file(path);
  BERTRAIN_CHECK(j.is_object(), path << ": expected a JSON object");
  return j;
}

// The settings of a tokenizer built here, read as transformers' from_pretrained reads them: tokenizer_config.json
// (read by the caller, who decides from it whether to build one), then, unless it has added_tokens_decoder (which
// makes transformers ignore both files), special_tokens_map.json, whose tokens replace the config's, and
// added_tokens.json, which is refused when it adds anything (transformers may give its tokens other ids than it
// says).
class Settings {
 public:
  Settings(const std::string& dir, json config)
      : dir_(dir), config_file_(dir + "/tokenizer_config.json"), map_file_(dir + "/special_tokens_map.json"),
        config_(std::move(config)) {
    if (config_.contains("added_tokens_decoder")) return;
    map_ = read_settings(map_file_);
    const std::string added = dir + "/added_tokens.json";
    if (file_exists(added)) {
      const json tokens = read_json_file(added);
      BERTRAIN_CHECK(!tokens.is_object() || tokens.empty(),
                     added << ": added tokens are not read from this file (transformers may give them other ids "
                              "than it says): " << tokenizer_json_advice(dir_));
    }
  }

  hf::JsonAt config() const { return {&config_file_, "", &config_}; }
  const std::string& dir() const { return dir_; }

  // The special token `key` ("mask_token"): special_tokens_map.json's, else tokenizer_config.json's, else
  // `fallback`.
  SpecialToken special(const char* key, const char* fallback) const {
    const hf::JsonAt map{&map_file_, "", &map_};
    if (map.has(key)) return token_of(map.at(key));
    if (config().has(key)) return token_of(config().at(key));
    return {fallback};
  }

 private:
  std::string dir_, config_file_, map_file_;
  json config_, map_ = json::object();
};

// The added tokens of a tokenizer.json: the special tokens (which must be in the vocabulary), then
// tokenizer_config.json's added_tokens_decoder ({"id": {"content", flags..., "special"}}), whose entries set the
// flags of a token of the vocabulary or add one past it, as transformers applies them.
class AddedTokens {
 public:
  AddedTokens(const std::map<std::string, int>& vocab, const std::string& vocab_file)
      : vocab_(vocab), vocab_file_(vocab_file) {
    for (const auto& [token, id] : vocab_) size_ = std::max(size_, id + 1);
  }

  int add_special(const SpecialToken& t, const Settings& settings) { return add(t, true, settings); }

  int add(const SpecialToken& t, bool special, const Settings& settings) {
    const auto it = vocab_.find(t.content);
    BERTRAIN_CHECK(it != vocab_.end(), vocab_file_ << ": " << (special ? "special " : "") << "token \"" << t.content
                                                   << "\" is not in the vocabulary: "
                                                   << tokenizer_json_advice(settings.dir()));
    tokens_[it->second] = added_token(it->second, t, special);
    return it->second;
  }

  void apply_decoder(const Settings& settings) {
    if (!settings.config().has("added_tokens_decoder")) return;
    const hf::JsonAt decoder = settings.config().at("added_tokens_decoder");
    if (!decoder.json().is_object()) decoder.fail("expected an object {\"id\": token}");
    for (const auto& [key, value] : decoder.json().items()) {
      const hf::JsonAt entry{decoder.source, "added_tokens_decoder[\"" + key + "\"]", &value};
      int id = -1;
      try {
        std::size_t used = 0;
        id = std::stoi(key, &used);
        if (used != key.size()) id = -1;
      } catch (const std::exception&) {
      }
      if (id < 0) entry.fail("the key must be a token id");
      const SpecialToken t = token_of(entry);
      const auto it = vocab_.find(t.content);
      const bool in_vocab = it != vocab_.end() && it->second == id;
      if (!in_vocab && (it != vocab_.end() || id < size_)) {
        entry.fail("\"" + t.content + "\" is " + (it == vocab_.end() ? "not" : "elsewhere") +
                   " in the vocabulary and id " + std::to_string(id) + " is " + (id >= size_ ? "past" : "in") +
                   " it: " + tokenizer_json_advice(settings.dir()));
      }
      tokens_[id] = added_token(id, t, entry.get_bool("special", false));
    }
  }

  json list() const {
    json out = json::array();
    for (const auto& [id, token] : tokens_) out.push_back(token);
    return out;
  }

 private:
  const std::map<std::string, int>& vocab_;
  std::string vocab_file_;
  int size_ = 0;
  std::map<int, json> tokens_;
};

// "a b" lines after an optional "#version" header, as tokenizers' BPE reads merges.txt.
json read_merges(const std::string& path) {
  const std::string text = read_file(path, "merges file");
  json merges = json::array();
  std::size_t begin = 0, line = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string row = text.substr(begin, end - begin);
    begin = end + 1;
    ++line;
    if (!row.empty() && row.back() == '\r') row.pop_back();
    if (row.rfind("#version", 0) == 0) continue;
    const std::size_t space = row.find(' ');
    BERTRAIN_CHECK(space != std::string::npos && space > 0 && space + 1 < row.size() &&
                       row.find(' ', space + 1) == std::string::npos,
                   path << ": line " << line << ": expected two tokens separated by one space, found \"" << row
                        << "\"");
    merges.push_back({row.substr(0, space), row.substr(space + 1)});
  }
  return merges;
}

std::map<std::string, int> read_bpe_vocab(const std::string& path) {
  const json j = read_json_file(path);
  BERTRAIN_CHECK(j.is_object() && !j.empty(), path << ": expected a JSON object of token ids");
  std::map<std::string, int> vocab;
  for (const auto& [token, id] : j.items()) {
    BERTRAIN_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (int64_t{1} << 30),
                   path << ": token \"" << token << "\": id must be a non-negative integer, found " << id.dump());
    vocab[token] = id.get<int>();
  }
  return vocab;
}

json vocab_json(const std::map<std::string, int>& vocab) {
  json out = json::object();
  for (const auto& [token, id] : vocab) out[token] = id_json(id);
  return out;
}

// The classes transformers builds from a SentencePiece model that bertrain's model families use.
enum class SentencePieceClass { kXlmRoberta, kCamembert };

// tokenizer_config.json's tokenizer_class, else config.json's model_type, as AutoTokenizer picks the class.
SentencePieceClass sentencepiece_class(const Settings& settings, const std::string& model_file) {
  if (settings.config().has("tokenizer_class")) {
    const hf::JsonAt at = settings.config().at("tokenizer_class");
    std::string name = at.str();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, "Fast") == 0) name.resize(name.size() - 4);
    if (name == "XLMRobertaTokenizer") return SentencePieceClass::kXlmRoberta;
    if (name == "CamembertTokenizer") return SentencePieceClass::kCamembert;
    at.fail("bertrain builds a tokenizer from " + model_file + " for XLMRobertaTokenizer and CamembertTokenizer, not " +
            hf::json_quote(at.str()) + ": " + tokenizer_json_advice(settings.dir()));
  }
  const std::string config_file = settings.dir() + "/config.json";
  json config = read_settings(config_file);
  const hf::JsonAt at{&config_file, "", &config};
  const std::string model_type = at.has("model_type") ? at.at("model_type").str() : "";
  if (model_type == "xlm-roberta") return SentencePieceClass::kXlmRoberta;
  if (model_type == "camembert") return SentencePieceClass::kCamembert;
  BERTRAIN_FAIL(model_file << ": bertrain builds a tokenizer from a SentencePiece model for XLM-R and CamemBERT (its "
                           << "tokenizer_config.json's tokenizer_class or config.json's model_type says which), "
                           << "and " << config_file << " has "
                           << (model_type.empty() ? "no model_type" : "model_type " + hf::json_quote(model_type))
                           << ": " << tokenizer_json_advice(settings.dir()));
}

}  // namespace

std::string tokenizer_json_advice(const std::string& dir) {
  return "save the tokenizer with transformers to write tokenizer.json (python -c 'from transformers import "
         "AutoTokenizer as T; T.from_pretrained(\"" + dir + "\").save_pretrained(\"" + dir + "\")'), which bertrain "
         "reads as it is";
}

json byte_level_bpe_tokenizer_json(const std::string& dir) {
  const std::string vocab_file = dir + "/vocab.json";
  const std::map<std::string, int> vocab = read_bpe_vocab(vocab_file);
  const Settings settings(dir, read_settings(dir + "/tokenizer_config.json"));
  AddedTokens added(vocab, vocab_file);
  // RobertaTokenizer's specials, in the order transformers adds them.
  const SpecialToken bos = settings.special("bos_token", "<s>"), eos = settings.special("eos_token", "</s>");
  const SpecialToken unk = settings.special("unk_token", "<unk>"), sep = settings.special("sep_token", "</s>");
  const SpecialToken pad = settings.special("pad_token", "<pad>"), cls = settings.special("cls_token", "<s>");
  const SpecialToken mask = settings.special("mask_token", "<mask>");
  for (const SpecialToken* t : {&bos, &eos, &unk, &pad, &mask}) added.add_special(*t, settings);
  const int sep_id = added.add_special(sep, settings), cls_id = added.add_special(cls, settings);
  added.apply_decoder(settings);
  const bool prefix_space = settings.config().get_bool("add_prefix_space", false);
  const bool trim_offsets = settings.config().get_bool("trim_offsets", true);
  return {
      {"version", "1.0"},
      {"added_tokens", added.list()},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", prefix_space},
        {"trim_offsets", trim_offsets},
        {"use_regex", true}}},
      {"post_processor",
       {{"type", "RobertaProcessing"},
        {"sep", {sep.content, id_json(sep_id)}},
        {"cls", {cls.content, id_json(cls_id)}},
        {"trim_offsets", trim_offsets},
        {"add_prefix_space", prefix_space}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab_json(vocab)},
        {"merges", read_merges(dir + "/merges.txt")}}}};
}

std::optional<json> wordpiece_tokenizer_json(const std::string& dir) {
  // tokenizer_config.json decides; the other settings files are read only for a tokenizer built here.
  const std::string config_file = dir + "/tokenizer_config.json";
  json config = read_settings(config_file);
  const hf::JsonAt at{&config_file, "", &config};
  const bool lowercase = at.get_bool("do_lower_case", true);
  const bool chinese = at.get_bool("tokenize_chinese_chars", true);
  const json strip_accents = at.has("strip_accents") ? json(at.get_bool("strip_accents", false)) : json(nullptr);
  if (lowercase && chinese && strip_accents.is_null()) return std::nullopt;  // BertTokenizer's rules
  const Settings settings(dir, std::move(config));
  const std::string vocab_file = dir + "/vocab.txt";
  const Vocab lines = Vocab::load(vocab_file);
  std::map<std::string, int> vocab;
  for (int id = 0; id < lines.size(); ++id) vocab[lines.token(id)] = lines.find(lines.token(id));
  AddedTokens added(vocab, vocab_file);
  const SpecialToken pad = settings.special("pad_token", "[PAD]"), unk = settings.special("unk_token", "[UNK]");
  const SpecialToken cls = settings.special("cls_token", "[CLS]"), sep = settings.special("sep_token", "[SEP]");
  const SpecialToken mask = settings.special("mask_token", "[MASK]");
  for (const SpecialToken* t : {&pad, &unk, &mask}) added.add_special(*t, settings);
  const int cls_id = added.add_special(cls, settings), sep_id = added.add_special(sep, settings);
  added.apply_decoder(settings);
  return json{
      {"version", "1.0"},
      {"added_tokens", added.list()},
      {"normalizer",
       {{"type", "BertNormalizer"},
        {"clean_text", true},
        {"handle_chinese_chars", chinese},
        {"strip_accents", strip_accents},
        {"lowercase", lowercase}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {template_special(cls), template_sequence("A"), template_special(sep)}},
        {"special_tokens",
         {{cls.content, template_token_entry(cls, cls_id)}, {sep.content, template_token_entry(sep, sep_id)}}}}},
      {"model",
       {{"type", "WordPiece"},
        {"unk_token", unk.content},
        {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 100},
        {"vocab", vocab_json(vocab)}}}};
}

json sentencepiece_tokenizer_json(const std::string& dir) {
  const std::string model_file = dir + "/sentencepiece.bpe.model";
  const Settings settings(dir, read_settings(dir + "/tokenizer_config.json"));
  const SentencePieceClass cls = sentencepiece_class(settings, model_file);
  const SentencePieceModel spm = read_sentencepiece_model(model_file);
  const SpecialToken bos = settings.special("bos_token", "<s>"), eos = settings.special("eos_token", "</s>");
  const SpecialToken unk = settings.special("unk_token", "<unk>"), sep = settings.special("sep_token", "</s>");
  const SpecialToken pad = settings.special("pad_token", "<pad>"), cls_token = settings.special("cls_token", "<s>");
  SpecialToken mask = settings.special("mask_token", "<mask>");

  // The Unigram vocabulary as the classes' convert_from_spm lay it out: fairseq's special ids first, the model's
  // pieces after the ones they replace, <mask> last.
  std::vector<std::pair<std::string, double>> pieces;
  const auto add_pieces = [&](std::size_t from) {
    for (std::size_t i = from; i < spm.pieces.size(); ++i) pieces.emplace_back(spm.pieces[i].text, spm.pieces[i].score);
  };
  int unk_id = 3;
  if (cls == SentencePieceClass::kXlmRoberta) {
    pieces = {{bos.content, 0.0}, {pad.content, 0.0}, {eos.content, 0.0}, {unk.content, 0.0}};
    add_pieces(3);
  } else {
    // transformers 5 reads a CamemBERT model's pieces as a BPE vocabulary unless the model is a unigram one, and
    // then fails to build the tokenizer.
    BERTRAIN_CHECK(spm.model_type == SentencePieceModel::kUnigram,
                   model_file << ": a SentencePiece model of type " << spm.model_type << " (1 is unigram), from "
                              << "which transformers builds no CamemBERT tokenizer");
    pieces = {{"<s>NOTUSED", 0.0}, {pad.content, 0.0}, {"</s>NOTUSED", 0.0}, {unk.content, 0.0},
              {"<unk>NOTUSED", -100.0}};
    add_pieces(1);
    // CamembertTokenizer's unk id: the first piece that is unk_token, else 0.
    const auto unk_at =
        std::find_if(pieces.begin(), pieces.end(), [&](const auto& piece) { return piece.first == unk.content; });
    unk_id = unk_at == pieces.end() ? 0 : static_cast<int>(unk_at - pieces.begin());
    if (mask.plain) mask.lstrip = true;  // CamembertTokenizer makes a string mask_token an lstrip AddedToken
  }
  pieces.emplace_back(mask.content, 0.0);
  std::map<std::string, int> ids;  // a repeated piece: its last id, as tokenizers' Unigram
  json vocab = json::array();
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    ids[pieces[i].first] = static_cast<int>(i);
    vocab.push_back({pieces[i].first, pieces[i].second});
  }

  AddedTokens added(ids, model_file);
  const int bos_id = added.add_special(bos, settings), eos_id = added.add_special(eos, settings);
  const SpecialToken* const others[] = {&unk, &sep, &pad, &cls_token, &mask};
  for (const SpecialToken* t : others) added.add_special(*t, settings);
  // The extra special tokens: tokenizer_config.json's additional_special_tokens, else the model's control (special)
  // and user-defined (not special) pieces; special_tokens_map.json's list is replaced by the model's, as in
  // transformers.
  if (settings.config().has("additional_special_tokens")) {
    const hf::JsonAt list = settings.config().at("additional_special_tokens");
    if (!list.json().is_array()) list.fail("expected a list of tokens");
    for (std::size_t i = 0; i < list.size(); ++i) added.add_special(token_of(list.at(i)), settings);
  } else {
    for (const SentencePieceModel::Piece& piece : spm.pieces) {
      if (piece.type != SentencePieceModel::kControl && piece.type != SentencePieceModel::kUserDefined) continue;
      added.add(SpecialToken{piece.text}, piece.type == SentencePieceModel::kControl, settings);
    }
  }
  added.apply_decoder(settings);

  const std::string prepend = settings.config().get_bool("add_prefix_space", true) ? "always" : "never";
  const json bos_piece = template_special(bos), eos_piece = template_special(eos);
  json special_tokens = json::object();
  special_tokens[bos.content] = template_token_entry(bos, bos_id);
  special_tokens[eos.content] = template_token_entry(eos, eos_id);
  return {
      {"version", "1.0"},
      {"added_tokens", added.list()},
      {"normalizer", spm.precompiled_charsmap.empty()
                         ? json(nullptr)
                         : json{{"type", "Precompiled"},
                                {"precompiled_charsmap", encode_base64(spm.precompiled_charsmap)}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "WhitespaceSplit"}},
          {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", prepend}, {"split", true}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {bos_piece, template_sequence("A"), eos_piece}},
        {"pair", {bos_piece, template_sequence("A"), eos_piece, eos_piece, template_sequence("B"), eos_piece}},
        {"special_tokens", special_tokens}}},
      {"model", {{"type", "Unigram"}, {"unk_id", id_json(unk_id)}, {"vocab", vocab}, {"byte_fallback", false}}}};
}

}  // namespace bertrain
