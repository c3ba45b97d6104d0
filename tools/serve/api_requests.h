// The bodies `bertrain serve` reads and the answers it writes, for its three APIs, as plain functions (the HTTP
// layer calls them; the tests drive them without a socket):
//   Made-With-ML's serve.py   POST /predict/ {"title", "description"} -> {"results": [{"prediction", "probabilities"}]}
//   bertrain's own            POST /v1/predict {"texts": [...]} | {"rows": [{column: value}]} -> {"results": [...]}
//   text-embeddings-inference POST /predict {"inputs": "..." | ["..."] | [["..."], ...], "raw_scores", "truncate",
//                             "truncation_direction"} -> [{"label", "score"}] (a list of them for a batch)
// Every error is an ApiError: the HTTP status and a one-line message naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/labels.h"
#include "tools/prediction_rule.h"

namespace bertrain {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message)
      : std::runtime_error(message), status_(status), type_(std::move(type)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }  // TEI's error_type: "validation", "overloaded", ...

 private:
  int status_;
  std::string type_;
};

// {"error": message, "error_type": type}: TEI's error body, which every bertrain error answer uses.
std::string error_body(const std::string& message, const std::string& type);

enum class AnswerShape { kMadeWithMl, kBertrain, kTei };

// What one prediction request asks for: its rows' texts (text columns already joined) and how to answer.
struct PredictCall {
  AnswerShape shape = AnswerShape::kBertrain;
  std::vector<std::string> texts;
  bool tei_list = false;     // TEI: "inputs" was a batch (a list of lists), so the answer is a list of lists
  bool raw_scores = false;   // TEI: scores are the logits, not probabilities
  bool truncate = true;      // false (TEI's "truncate": false): a row longer than the model's max length is an error
  bool keep_end = false;     // TEI's "truncation_direction": "left": a row too long keeps its last tokens
};

// POST /predict and /predict/: Made-With-ML's body when it has "title" or "description", else TEI's.
PredictCall parse_predict_body(const std::string& body);
// POST /v1/predict. `text_columns`: the model's (as `predict --data` reads a row); rows join them as training did.
PredictCall parse_v1_predict_body(const std::string& body, const std::vector<std::string>& text_columns);
// POST /evaluate/: the "dataset" path, as given.
std::string parse_evaluate_body(const std::string& body);

// The answer to `call`: probs and logits [texts, labels] row-major; truncated[i]: row i was cut to the max length.
// `rule` decides the prediction (Made-With-ML's and bertrain's shapes); rows that were cut say "truncated": true.
std::string predict_answer(const PredictCall& call, const std::vector<float>& probs, const std::vector<float>& logits,
                           const std::vector<bool>& truncated, const LabelSet& labels, const PredictionRule& rule);

// The file a POST /evaluate/ may read: `requested` (relative paths are relative to `root`), with symbolic links
// and ".." resolved, must be a regular file inside `root` (403 otherwise, 404 when it does not exist), so that a
// request can never read an arbitrary file of the server.
std::string dataset_under_root(const std::string& root, const std::string& requested);

}  // namespace bertrain
