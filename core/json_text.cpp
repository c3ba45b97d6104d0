#include "core/json_text.h"

#include "core/error.h"

namespace bertrain {

namespace {

// A first pass over the text that builds nothing and only counts how deep it nests: every value's depth is the
// number of containers around it (the top-level value's is 0). It stops at the first value deeper than
// kMaxJsonDepth, or at a syntax error (which the parse proper then reports in its own words).
class DepthCheck final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool too_deep = false;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool key(string_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool value() {
    too_deep = containers_ > kMaxJsonDepth;
    return !too_deep;
  }
  bool open() {
    if (!value()) return false;
    ++containers_;
    return true;
  }
  bool close() {
    --containers_;
    return true;
  }
  int containers_ = 0;
};

}  // namespace

nlohmann::json parse_json_bounded(const std::string& text, bool* too_deep) {
  // Not json::parse with a callback that drops what is too deep: nlohmann's callback parser searches an array's
  // elements for a dropped one each time an object in it ends, so an array of n objects took time n² (a 2 MiB
  // request of 200,000 "{}" held a serve thread for minutes). Two linear passes instead.
  DepthCheck depth;
  nlohmann::json::sax_parse(text, &depth);
  *too_deep = depth.too_deep;
  if (*too_deep) return nlohmann::json();
  return nlohmann::json::parse(text);
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
