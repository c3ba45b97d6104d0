// StateFields: checked reads of checkpoint state objects (see the header).
#include "engine/state_json.h"

#include <cmath>
#include <limits>
#include <utility>

#include "core/error.h"

namespace bertrain {

StateFields::StateFields(const nlohmann::json& json, std::string what) : json_(json), what_(std::move(what)) {
  BERTRAIN_CHECK(json_.is_object(), what_ << ": expected a JSON object, got " << json_.type_name());
}

const nlohmann::json& StateFields::field(const char* key) const {
  auto it = json_.find(key);
  BERTRAIN_CHECK(it != json_.end(), what_ << ": missing field \"" << key << "\"");
  return *it;
}

double StateFields::number(const char* key) const {
  const nlohmann::json& v = field(key);
  BERTRAIN_CHECK(v.is_number(), what_ << ": field \"" << key << "\" must be a number, got " << v.type_name());
  return v.get<double>();
}

int64_t StateFields::integer(const char* key, int64_t lo, int64_t hi) const {
  const nlohmann::json& v = field(key);
  BERTRAIN_CHECK(v.is_number_integer(), what_ << ": field \"" << key << "\" must be an integer, got " << v.dump());
  // Unsigned values above int64's range would wrap in get<int64_t>(); compare them as unsigned.
  BERTRAIN_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(hi),
                 what_ << ": field \"" << key << "\" = " << v.dump() << " is out of range [" << lo << ", " << hi
                       << "]");
  const int64_t value = v.get<int64_t>();
  BERTRAIN_CHECK(value >= lo && value <= hi, what_ << ": field \"" << key << "\" = " << value
                                                   << " is out of range [" << lo << ", " << hi << "]");
  return value;
}

std::string StateFields::text(const char* key) const {
  const nlohmann::json& v = field(key);
  BERTRAIN_CHECK(v.is_string(), what_ << ": field \"" << key << "\" must be a string, got " << v.type_name());
  return v.get<std::string>();
}

bool StateFields::boolean(const char* key) const {
  const nlohmann::json& v = field(key);
  BERTRAIN_CHECK(v.is_boolean(), what_ << ": field \"" << key << "\" must be true or false, got " << v.dump());
  return v.get<bool>();
}

double StateFields::number_or_infinity(const char* key) const {
  const nlohmann::json& v = field(key);
  if (v.is_string()) {
    const std::string text = v.get<std::string>();
    BERTRAIN_CHECK(text == "inf" || text == "-inf", what_ << ": field \"" << key
                                                          << "\" must be a number, \"inf\" or \"-inf\", got \""
                                                          << text << "\"");
    return text == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  }
  BERTRAIN_CHECK(v.is_number(), what_ << ": field \"" << key << "\" must be a number, \"inf\" or \"-inf\", got "
                                      << v.type_name());
  return v.get<double>();
}

nlohmann::json infinity_json(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

}  // namespace bertrain
