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

// nlohmann's own builder of a value from parse events, except that each float is read from its text by `read_float`.
class FloatReadingDom {
 public:
  using json = nlohmann::json;
  FloatReadingDom(json* result, double (*read_float)(const std::string&)) : dom_(*result), read_float_(read_float) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t, const json::string_t& text) {
    return dom_.number_float(read_float_(text), text);
  }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool key(json::string_t& v) { return dom_.key(v); }
  bool start_object(std::size_t n) { return dom_.start_object(n); }
  bool start_array(std::size_t n) { return dom_.start_array(n); }
  bool end_object() { return dom_.end_object(); }
  bool end_array() { return dom_.end_array(); }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    return dom_.parse_error(position, token, e);  // throws e, as json::parse does
  }

 private:
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  double (*read_float_)(const std::string&);
};

}  // namespace

nlohmann::json parse_json_bounded(const std::string& text, bool* too_deep, double (*read_float)(const std::string&)) {
  // Not json::parse with a callback that drops what is too deep: nlohmann's callback parser searches an array's
  // elements for a dropped one each time an object in it ends, so an array of n objects took time n² (a 2 MiB
  // request of 200,000 "{}" held a serve thread for minutes). Two linear passes instead.
  DepthCheck depth;
  nlohmann::json::sax_parse(text, &depth);
  *too_deep = depth.too_deep;
  if (*too_deep) return nlohmann::json();
  if (read_float == nullptr) return nlohmann::json::parse(text);
  // nlohmann's own builder (detail::json_sax_dom_parser, the one json::parse uses; pinned with the library's
  // version) with the floats read by read_float.
  nlohmann::json value;
  FloatReadingDom dom(&value, read_float);
  nlohmann::json::sax_parse(text, &dom);
  return value;
}

nlohmann::json parse_json_bounded(const std::string& text, bool* too_deep) {
  return parse_json_bounded(text, too_deep, nullptr);
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
