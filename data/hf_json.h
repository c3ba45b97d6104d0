// Reading tokenizer.json's objects with errors that say where: every component parser gets a JsonAt (the file,
// the JSON path of the object, the object) and reports "FILE: PATH: what is wrong", e.g.
// `m/tokenizer.json: pre_tokenizer.pretokenizers[1]: unsupported pre-tokenizer type "UnicodeScripts"`.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <sstream>
#include <string>

#include "core/error.h"

namespace bertrain {
namespace hf {

struct JsonAt {
  const std::string* source;  // the file
  std::string path;           // "normalizer.normalizers[0]"
  const nlohmann::json* node;

  const nlohmann::json& json() const { return *node; }
  [[noreturn]] void fail(const std::string& message) const {
    BERTRAIN_FAIL(*source << ": " << (path.empty() ? "(top level)" : path) << ": " << message);
  }
  bool has(const char* key) const { return node->is_object() && node->contains(key) && !(*node)[key].is_null(); }
  JsonAt at(const char* key) const {
    if (!node->is_object()) fail("expected a JSON object");
    const auto it = node->find(key);
    if (it == node->end()) fail(std::string("missing field \"") + key + "\"");
    return {source, path.empty() ? std::string(key) : path + "." + key, &*it};
  }
  JsonAt at(std::size_t i) const {
    return {source, path + "[" + std::to_string(i) + "]", &(*node)[i]};
  }
  std::size_t size() const {
    if (!node->is_array()) fail("expected a JSON array");
    return node->size();
  }
  // The object's "type" (a string), as every component names itself.
  std::string type() const {
    if (!node->is_object()) fail("expected a JSON object");
    return at("type").str();
  }
  std::string str() const {
    if (!node->is_string()) fail("expected a string");
    return node->get<std::string>();
  }
  bool boolean() const {
    if (!node->is_boolean()) fail("expected true or false");
    return node->get<bool>();
  }
  int64_t integer() const {
    if (!node->is_number_integer()) fail("expected an integer");
    return node->get<int64_t>();
  }
  double number() const {
    if (!node->is_number()) fail("expected a number");
    return node->get<double>();
  }
  // Optional fields: the default when absent or null.
  bool get_bool(const char* key, bool def) const { return has(key) ? at(key).boolean() : def; }
  std::string get_str(const char* key, const std::string& def) const { return has(key) ? at(key).str() : def; }
};

// A JSON number's text read as the tokenizers library reads tokenizer.json (Rust's serde_json without its
// float_roundtrip feature): the decimal digits as a 64-bit integer (digits past it dropped, the exponent counting
// them), converted to double, then multiplied or divided by a power of ten. Two roundings, where a correct reading
// has one: 1,449 of 6,000 varied texts (17-digit Unigram scores among them) come out one ulp away, and a Unigram
// model whose scores tie one way read correctly ties the other way in Rust. `text` is a valid JSON number (the
// parser's); past the double range ±infinity, which the parser's own check (it refuses 1e400) keeps from a file.
double read_json_number_as_tokenizers(const std::string& text);

// Quotes a JSON value for a message: a string with its quotes, anything else as JSON.
inline std::string json_quote(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace hf
}  // namespace bertrain
