#include "data/tokenizer_files.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/files.h"
#include "data/hf_json.h"
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
};

json added_token(int id, const SpecialToken& t, bool special) {
  return {{"id", id_json(id)},  {"content", t.content}, {"single_word", t.single_word}, {"lstrip", t.lstrip},
          {"rstrip", t.rstrip}, {"normalized", t.normalized}, {"special", special}};
}

// A settings value naming a token: a string, or an AddedToken object {"content", "lstrip", ...}.
SpecialToken token_of(const hf::JsonAt& value) {
  if (value.json().is_string()) return {value.str()};
  SpecialToken t{value.at("content").str()};
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

// The settings of a tokenizer built here: tokenizer_config.json (read by the caller, who decides from it whether
// to build one) and special_tokens_map.json; a non-empty added_tokens.json is refused.
class Settings {
 public:
  Settings(const std::string& dir, json config)
      : dir_(dir), config_file_(dir + "/tokenizer_config.json"), map_file_(dir + "/special_tokens_map.json"),
        config_(std::move(config)), map_(read_settings(map_file_)) {
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

  // The special token `key` ("mask_token"): tokenizer_config.json's, else special_tokens_map.json's, else
  // `fallback`; an Error when the two files name different tokens.
  SpecialToken special(const char* key, const char* fallback) const {
    const hf::JsonAt map{&map_file_, "", &map_};
    if (!config().has(key) && !map.has(key)) return {fallback};
    if (!map.has(key)) return token_of(config().at(key));
    const SpecialToken mapped = token_of(map.at(key));
    if (!config().has(key)) return mapped;
    SpecialToken configured = token_of(config().at(key));
    BERTRAIN_CHECK(configured.content == mapped.content,
                   config_file_ << ": " << key << " \"" << configured.content
                                << "\" is not special_tokens_map.json's \"" << mapped.content
                                << "\": " << tokenizer_json_advice(dir_));
    return configured;
  }

 private:
  std::string dir_, config_file_, map_file_;
  json config_, map_;
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

  int add_special(const SpecialToken& t, const Settings& settings) {
    const auto it = vocab_.find(t.content);
    BERTRAIN_CHECK(it != vocab_.end(), vocab_file_ << ": special token \"" << t.content << "\" is not in the "
                                                   << "vocabulary: " << tokenizer_json_advice(settings.dir()));
    tokens_[it->second] = added_token(it->second, t, true);
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
  const auto special = [](const SpecialToken& t) {
    return json{{"SpecialToken", {{"id", t.content}, {"type_id", 0}}}};
  };
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
        {"single", {special(cls), {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, special(sep)}},
        {"special_tokens",
         {{cls.content, {{"id", cls.content}, {"ids", {id_json(cls_id)}}, {"tokens", {cls.content}}}},
          {sep.content, {{"id", sep.content}, {"ids", {id_json(sep_id)}}, {"tokens", {sep.content}}}}}}}},
      {"model",
       {{"type", "WordPiece"},
        {"unk_token", unk.content},
        {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 100},
        {"vocab", vocab_json(vocab)}}}};
}

}  // namespace bertrain
