// Reading back the state objects that engine/ classes write into training checkpoints (to_json /
// from_json of the LR scheduler and early stopping): one accessor per field kind, each failing with one
// line that names the object and the field, so a hand-edited or truncated checkpoint says what is wrong.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace bertrain {

class StateFields {
 public:
  // `what` names the object in every message ("ReduceLROnPlateau state"). Throws Error unless `json` is
  // a JSON object. Keeps a reference: `json` must outlive this reader.
  StateFields(const nlohmann::json& json, std::string what);

  const nlohmann::json& field(const char* key) const;  // Error when missing
  double number(const char* key) const;                 // any JSON number
  // An integer in [lo, hi]; a float such as 2.5, or an unsigned value beyond int64, is an Error.
  int64_t integer(const char* key, int64_t lo, int64_t hi) const;
  std::string text(const char* key) const;
  bool boolean(const char* key) const;
  // A number, or "inf" / "-inf" (written by infinity_json: a best metric before any improvement).
  double number_or_infinity(const char* key) const;

 private:
  const nlohmann::json& json_;
  std::string what_;
};

// `value` as JSON, with +-infinity as the strings "inf" / "-inf" because JSON has no infinity
// (nlohmann/json would write null). Finite values are stored exactly (printed round-trip).
nlohmann::json infinity_json(double value);

}  // namespace bertrain
