#include "tools/serve/api_requests.h"

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "core/json_text.h"
#include "data/csv_parser.h"
#include "data/dataset.h"

namespace bertrain {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ApiError bad_request(const std::string& message) { return ApiError(400, "validation", message); }

json parse_object(const std::string& body) {
  json value;
  bool too_deep = false;
  try {
    value = parse_json_bounded(body, &too_deep);
  } catch (const json::parse_error& e) {
    // The parser's own words say where and why ("at line 1, column 12: syntax error ... invalid string: ill-formed
    // UTF-8 byte"), past its "[json.exception.parse_error.101] parse error " prefix.
    std::string why = e.what();
    const std::size_t at = why.find("parse error ");
    why = at == std::string::npos ? why : why.substr(at + 12);
    throw bad_request("the body is not valid JSON (" + why + ")");
  } catch (const json::exception& e) {
    // Valid JSON the parser cannot hold: a number beyond a double's range ("number overflow parsing '1e999'"), past
    // its "[json.exception.out_of_range.406] " prefix. Not a server error: the client's request is what to fix.
    std::string why = e.what();
    const std::size_t at = why.find("] ");
    why = at == std::string::npos ? why : why.substr(at + 2);
    throw bad_request("the body cannot be read (" + why + ")");
  }
  if (too_deep) throw bad_request("the body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  if (!value.is_object()) throw bad_request("the body must be a JSON object");
  return value;
}

// A JSON value's kind in messages: "a number", "an array", ...
std::string kind_of(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

std::string string_field(const json& object, const std::string& key, const std::string& where) {
  const json& v = object.at(key);
  if (!v.is_string()) throw bad_request(where + " must be a string, got " + kind_of(v));
  return v.get<std::string>();
}

bool bool_field(const json& object, const std::string& key, bool fallback) {
  if (!object.contains(key) || object.at(key).is_null()) return fallback;
  if (!object.at(key).is_boolean()) throw bad_request("\"" + key + "\" must be true or false, got " + kind_of(object.at(key)));
  return object.at(key).get<bool>();
}

void check_not_empty(const std::string& text, const std::string& where) {
  if (is_blank_text(text)) throw bad_request(where + " is empty");
}

PredictCall parse_made_with_ml(const json& body) {
  PredictCall call;
  call.shape = AnswerShape::kMadeWithMl;
  // As serve.py's data.get("title", ""): either may be absent; the text is the two joined as a dataset row's.
  const std::string title = body.contains("title") ? string_field(body, "title", "\"title\"") : "";
  const std::string description = body.contains("description") ? string_field(body, "description", "\"description\"") : "";
  const std::string text = join_text_columns({title, description});
  if (text.empty()) throw bad_request("\"title\" and \"description\" are both empty");
  call.texts.push_back(text);
  return call;
}

// One of TEI's inputs: a text, or a list of one text; a pair [a, b] is a cross-encoder's input, which a classifier of
// one text cannot take.
std::string tei_input(const json& value, const std::string& where) {
  if (value.is_array() && value.size() == 1 && !value[0].is_array()) return tei_input(value[0], where + "[0]");
  if (value.is_array() && value.size() == 2) {
    throw bad_request(where + " is a text pair (two texts for a cross-encoder); this model classifies one text: send "
                              "\"text\", [\"text\"], or a batch [[\"text\"], [\"text\"], ...]");
  }
  if (value.is_array()) {
    throw bad_request(where + " must be a text, [text] or a pair [text, text], got a list of " +
                      std::to_string(value.size()));
  }
  if (!value.is_string()) throw bad_request(where + " must be a string, got " + kind_of(value));
  const std::string text = value.get<std::string>();
  check_not_empty(text, where);
  return text;
}

PredictCall parse_tei(const json& body) {
  PredictCall call;
  call.shape = AnswerShape::kTei;
  if (!body.contains("inputs")) {
    throw bad_request("missing field \"inputs\" (text-embeddings-inference's body), or \"title\" / \"description\" "
                      "(Made-With-ML's)");
  }
  // TEI's PredictInput: a text; a list whose first item is a text is one input ([text], or a pair); a list of lists
  // is a batch, each item [text] or a pair.
  const json& inputs = body.at("inputs");
  if (inputs.is_array() && inputs.empty()) throw bad_request("\"inputs\" is an empty list");
  if (inputs.is_array() && inputs[0].is_array()) {
    call.tei_list = true;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string where = "inputs[" + std::to_string(i) + "]";
      if (!inputs[i].is_array()) throw bad_request(where + " must be a list, [text], as the batch's first is");
      call.texts.push_back(tei_input(inputs[i], where));
    }
  } else if (inputs.is_string() || inputs.is_array()) {
    call.texts.push_back(tei_input(inputs, "\"inputs\""));
  } else {
    throw bad_request("\"inputs\" must be a text, [text], or a batch of them [[text], ...], got " + kind_of(inputs));
  }
  call.raw_scores = bool_field(body, "raw_scores", false);
  // TEI (since 1.9, --auto-truncate's default) cuts a text too long unless told "truncate": false.
  call.truncate = bool_field(body, "truncate", true);
  if (body.contains("truncation_direction") && !body.at("truncation_direction").is_null()) {
    const json& direction = body.at("truncation_direction");
    const std::string value = direction.is_string() ? direction.get<std::string>() : "";
    if (value != "left" && value != "Left" && value != "right" && value != "Right") {
      throw bad_request("\"truncation_direction\" must be \"left\" or \"right\" (or \"Left\", \"Right\"), got " +
                        (direction.is_string() ? "\"" + value + "\"" : kind_of(direction)));
    }
    call.keep_end = value == "left" || value == "Left";
  }
  return call;
}

ordered_json tei_scores(const float* scores, const LabelSet& labels) {
  std::vector<int> order(static_cast<std::size_t>(labels.size()));
  std::iota(order.begin(), order.end(), 0);
  // Highest score first, as TEI answers; ties keep the labels' order.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  ordered_json out = ordered_json::array();
  for (int c : order) out.push_back(ordered_json{{"label", labels.name(c)}, {"score", scores[c]}});
  return out;
}

}  // namespace

std::string error_body(const std::string& message, const std::string& type) {
  // A message may quote the request's bytes (a path, a field): invalid UTF-8 becomes U+FFFD, never an exception.
  return json{{"error", message}, {"error_type", type}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

PredictCall parse_predict_body(const std::string& body) {
  const json value = parse_object(body);
  if (value.contains("title") || value.contains("description")) return parse_made_with_ml(value);
  return parse_tei(value);
}

PredictCall parse_v1_predict_body(const std::string& body, const std::vector<std::string>& text_columns) {
  const json value = parse_object(body);
  PredictCall call;
  call.shape = AnswerShape::kBertrain;
  const bool has_texts = value.contains("texts"), has_rows = value.contains("rows");
  if (has_texts == has_rows) throw bad_request("give one of \"texts\" (a list of strings) or \"rows\" (a list of objects)");
  const std::string key = has_texts ? "texts" : "rows";
  const json& list = value.at(key);
  if (!list.is_array()) throw bad_request("\"" + key + "\" must be a list, got " + kind_of(list));
  if (list.empty()) throw bad_request("\"" + key + "\" is an empty list");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = key + "[" + std::to_string(i) + "]";
    if (has_texts) {
      if (!list[i].is_string()) throw bad_request(where + " must be a string, got " + kind_of(list[i]));
      call.texts.push_back(join_text_columns({list[i].get<std::string>()}));
      if (call.texts.back().empty()) throw bad_request(where + " is empty");
      continue;
    }
    if (!list[i].is_object()) throw bad_request(where + " must be an object of text columns, got " + kind_of(list[i]));
    // A column absent or null is an empty value, as in a JSON Lines file.
    std::vector<std::string> values;
    for (const std::string& column : text_columns) {
      const bool present = list[i].contains(column) && !list[i].at(column).is_null();
      values.push_back(present ? string_field(list[i], column, where + "." + column) : "");
    }
    call.texts.push_back(join_text_columns(values));
    if (call.texts.back().empty()) {
      throw bad_request(where + ": every text column of the model (" + join_names(text_columns) +
                        ") is empty or absent");
    }
  }
  return call;
}

std::string parse_evaluate_body(const std::string& body) {
  const json value = parse_object(body);
  if (!value.contains("dataset")) throw bad_request("missing field \"dataset\" (the path of a labelled dataset file)");
  const std::string path = string_field(value, "dataset", "\"dataset\"");
  if (path.empty()) throw bad_request("\"dataset\" is empty");
  // The file system would read such a path only up to the NUL: the file evaluated would not be the one named.
  if (path.find('\0') != std::string::npos) throw bad_request("\"dataset\" holds a NUL character");
  return path;
}

std::string predict_answer(const PredictCall& call, const std::vector<float>& probs, const std::vector<float>& logits,
                           const std::vector<bool>& truncated, const LabelSet& labels, const PredictionRule& rule) {
  const std::size_t classes = static_cast<std::size_t>(labels.size());
  if (call.shape == AnswerShape::kTei) {
    const std::vector<float>& scores = call.raw_scores ? logits : probs;
    if (!call.tei_list) return tei_scores(scores.data(), labels).dump();
    ordered_json out = ordered_json::array();
    for (std::size_t i = 0; i < call.texts.size(); ++i) out.push_back(tei_scores(scores.data() + i * classes, labels));
    return out.dump();
  }
  ordered_json results = ordered_json::array();
  for (std::size_t i = 0; i < call.texts.size(); ++i) {
    ordered_json one = rule.predict(probs.data() + i * classes, labels);
    if (truncated[i]) one["truncated"] = true;
    results.push_back(std::move(one));
  }
  return ordered_json{{"results", results}}.dump();
}

std::string dataset_under_root(const std::string& root, const std::string& requested) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path base = fs::canonical(root, ec);
  if (ec) throw ApiError(500, "backend", "--evaluate-root " + root + ": " + ec.message());
  const fs::path asked = fs::path(requested).is_absolute() ? fs::path(requested) : base / requested;
  // weakly_canonical resolves the links and ".." of the part that exists, so a link out of the root is caught.
  const fs::path resolved = fs::weakly_canonical(asked, ec);
  if (ec) throw ApiError(400, "validation", "\"dataset\" " + requested + ": " + ec.message());
  const auto [root_end, unused] = std::mismatch(base.begin(), base.end(), resolved.begin(), resolved.end());
  if (root_end != base.end()) {
    throw ApiError(403, "forbidden", "\"dataset\" " + requested + " is outside --evaluate-root");
  }
  if (!fs::exists(resolved, ec)) {
    // Made-With-ML's evaluate.py takes a URL; a server that fetched what its clients name would be an open proxy.
    const bool url = requested.find("://") != std::string::npos;
    throw ApiError(404, "not_found", "\"dataset\" " + requested + (url ? ": URLs are not fetched; give a file under --evaluate-root"
                                                                         : ": no such file"));
  }
  if (!fs::is_regular_file(resolved, ec)) throw ApiError(400, "validation", "\"dataset\" " + requested + " is not a file");
  return resolved.string();
}

}  // namespace bertrain
