#include "core/json_text.h"

#include "core/error.h"

namespace bertrain {

nlohmann::json parse_json_bounded(const std::string& text, bool* too_deep) {
  *too_deep = false;
  // A container's start and end come at its own depth (the top-level value's is 0), its elements one deeper.
  // Returning false leaves a value, with all it holds, out of the result: nothing deeper is ever built.
  const nlohmann::json::parser_callback_t bound = [too_deep](int depth, nlohmann::json::parse_event_t,
                                                             nlohmann::json&) {
    if (depth <= kMaxJsonDepth) return true;
    *too_deep = true;
    return false;
  };
  return nlohmann::json::parse(text, bound);
}

nlohmann::json parse_json(const std::string& text, const std::string& what) {
  bool too_deep = false;
  nlohmann::json value;
  try {
    value = parse_json_bounded(text, &too_deep);
  } catch (const nlohmann::json::exception& e) {
    BERTRAIN_FAIL(what << ": invalid JSON: " << e.what());
  }
  BERTRAIN_CHECK(!too_deep, what << ": JSON nested deeper than " << kMaxJsonDepth << " levels");
  return value;
}

nlohmann::json parse_json_or_discarded(const std::string& text, bool* too_deep) {
  bool deep = false;
  try {
    nlohmann::json value = parse_json_bounded(text, &deep);
    if (!deep) return value;
  } catch (const nlohmann::json::exception&) {
  }
  if (too_deep != nullptr) *too_deep = deep;
  return nlohmann::json(nlohmann::json::value_t::discarded);
}

}  // namespace bertrain
