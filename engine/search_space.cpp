#include "engine/search_space.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"

namespace bertrain {

using nlohmann::json;

namespace {

bool is_integer(double x) { return std::isfinite(x) && std::floor(x) == x; }

double number_field(const json& spec, const char* key, const std::string& where) {
  BERTRAIN_CHECK(spec.contains(key), where << ": no \"" << key << "\"");
  BERTRAIN_CHECK(spec[key].is_number() && std::isfinite(spec[key].get<double>()),
                 where << ": \"" << key << "\" must be a finite number, got " << spec[key].dump());
  return spec[key].get<double>();
}

void check_value(const json& value, const std::string& where) {
  BERTRAIN_CHECK(value.is_number() || value.is_string() || value.is_boolean(),
                 where << ": a value must be a number, a string or a boolean, got " << value.dump());
}

Distribution parse_distribution(const std::string& type, const std::string& where) {
  if (type == "uniform") return Distribution::kUniform;
  if (type == "loguniform") return Distribution::kLogUniform;
  if (type == "quniform") return Distribution::kQUniform;
  if (type == "int" || type == "randint") return Distribution::kInt;
  if (type == "choice") return Distribution::kChoice;
  BERTRAIN_FAIL(where << ": unknown \"type\" '" << type
                      << "' (uniform, loguniform, quniform, int, randint or choice; a plain value is fixed)");
}

SearchParam parse_param(const std::string& name, const json& spec, const std::string& where) {
  SearchParam p;
  p.name = name;
  if (!spec.is_object()) {
    check_value(spec, where);
    p.values = {spec};
    return p;
  }
  BERTRAIN_CHECK(spec.contains("type") && spec["type"].is_string(),
                 where << ": no \"type\" (uniform, loguniform, quniform, int, randint or choice)");
  p.distribution = parse_distribution(spec["type"].get<std::string>(), where);
  std::set<std::string> allowed{"type"};
  if (p.distribution == Distribution::kChoice) {
    allowed.insert("values");
    BERTRAIN_CHECK(spec.contains("values") && spec["values"].is_array(), where << ": a choice needs \"values\", an array");
    BERTRAIN_CHECK(!spec["values"].empty(), where << ": a choice needs at least one value");
    for (const json& v : spec["values"]) {
      check_value(v, where);
      BERTRAIN_CHECK(std::find(p.values.begin(), p.values.end(), v) == p.values.end(),
                     where << ": the value " << v.dump() << " is given twice");
      p.values.push_back(v);
    }
  } else {
    allowed.insert({"low", "high"});
    p.low = number_field(spec, "low", where);
    p.high = number_field(spec, "high", where);
    if (p.distribution == Distribution::kInt) {
      BERTRAIN_CHECK(is_integer(p.low) && is_integer(p.high),
                     where << ": an int's low and high must be integers, got " << p.low << " and " << p.high);
      if (spec["type"] == "randint") {  // Ray's tune.randint(low, high): high left out
        BERTRAIN_CHECK(p.low < p.high, where << ": a randint's high is left out (as Ray's): low (" << p.low
                                             << ") must be below high (" << p.high << ")");
        p.high -= 1;
      }
      BERTRAIN_CHECK(p.low <= p.high, where << ": low (" << p.low << ") must not exceed high (" << p.high << ")");
    } else {
      BERTRAIN_CHECK(p.low < p.high, where << ": low (" << p.low << ") must be below high (" << p.high << ")");
    }
    if (p.distribution == Distribution::kLogUniform) {
      BERTRAIN_CHECK(p.low > 0, where << ": a loguniform's low must be positive, got " << p.low);
    }
    if (p.distribution == Distribution::kQUniform) {
      allowed.insert("q");
      p.q = number_field(spec, "q", where);
      BERTRAIN_CHECK(p.q > 0, where << ": q must be positive, got " << p.q);
    }
  }
  for (const auto& item : spec.items()) {
    BERTRAIN_CHECK(allowed.count(item.key()) != 0, where << ": unknown field \"" << item.key() << "\" for a "
                                                         << spec["type"].get<std::string>());
  }
  return p;
}

}  // namespace

long SearchParam::categories() const {
  if (distribution == Distribution::kInt) return static_cast<long>(high - low) + 1;
  if (distribution == Distribution::kChoice) return static_cast<long>(values.size());
  return 0;
}

long SearchParam::category_of(const json& value) const {
  if (distribution == Distribution::kChoice) {
    const auto it = std::find(values.begin(), values.end(), value);
    return it == values.end() ? -1 : static_cast<long>(it - values.begin());
  }
  if (distribution == Distribution::kInt && value.is_number()) {
    const double x = value.get<double>();
    if (is_integer(x) && x >= low && x <= high) return static_cast<long>(x - low);
  }
  return -1;
}

json SearchParam::category(long index) const {
  if (distribution == Distribution::kChoice) return values.at(static_cast<std::size_t>(index));
  return json(static_cast<long>(low) + index);
}

std::vector<const SearchParam*> SearchSpace::searched() const {
  std::vector<const SearchParam*> out;
  for (const SearchParam& p : params) {
    if (p.searched()) out.push_back(&p);
  }
  return out;
}

const SearchParam* SearchSpace::find(const std::string& name) const {
  for (const SearchParam& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

SearchSpace parse_search_space(const json& space, const std::string& origin) {
  BERTRAIN_CHECK(space.is_object(), origin << ": a search space is a JSON object of parameters");
  SearchSpace s;
  for (const auto& item : space.items()) {
    s.params.push_back(parse_param(item.key(), item.value(), origin + ": \"" + item.key() + "\""));
  }
  BERTRAIN_CHECK(!s.searched().empty(), origin << ": nothing to search (every parameter has a fixed value)");
  return s;
}

void check_point(const SearchSpace& space, const json& point, const std::string& origin) {
  BERTRAIN_CHECK(point.is_object(), origin << ": a point is a JSON object of parameter values, got " << point.dump());
  for (const auto& item : point.items()) {
    const SearchParam* p = space.find(item.key());
    BERTRAIN_CHECK(p != nullptr, origin << ": \"" << item.key() << "\" is not in the search space");
    const std::string where = origin + ": \"" + item.key() + "\"";
    const json& v = item.value();
    switch (p->distribution) {
      case Distribution::kFixed:
        BERTRAIN_CHECK(v == p->values[0], where << " is fixed at " << p->values[0].dump() << " in the space, got "
                                                << v.dump());
        break;
      case Distribution::kChoice:
      case Distribution::kInt:
        BERTRAIN_CHECK(p->category_of(v) >= 0, where << ": " << v.dump() << " is not one of its values");
        break;
      default: {
        // What the searches can propose, ends included (a study's trials are checked so too): a quniform's
        // rounding reaches the multiples of q nearest its ends, which may lie outside [low, high], and a
        // loguniform's draw comes back from log space within a few ulps of its ends.
        double low = p->low, high = p->high;
        if (p->distribution == Distribution::kQUniform) {
          low = std::min(low, quantize(p->low, p->q));
          high = std::max(high, quantize(std::nextafter(p->high, p->low), p->q));
        } else if (p->distribution == Distribution::kLogUniform) {
          low *= 1 - 1e-12, high *= 1 + 1e-12;
        }
        BERTRAIN_CHECK(v.is_number() && v.get<double>() >= low && v.get<double>() <= high,
                       where << ": " << v.dump() << " is not a number in [" << p->low << ", " << p->high << "]");
      }
    }
  }
  for (const SearchParam* p : space.searched()) {
    BERTRAIN_CHECK(point.contains(p->name), origin << ": no value for \"" << p->name << "\"");
  }
}

namespace {

// SplitMix64's output function: a bijection of 64-bit words in which every input bit moves every output bit.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

// The seed mixed before the trial is added, and the sum mixed again: each (seed, trial) starts its SplitMix64 stream at
// an unrelated point. (seed * gamma + trial, SplitMix64's own step gamma, made seed s + 1's streams seed s's one draw
// later, so that studies with neighbouring seeds proposed nearly the same trials.)
SearchRng::SearchRng(uint64_t seed, uint64_t trial) : state_(mix64(mix64(seed) + trial)) {}

uint64_t SearchRng::next() { return mix64(state_ += 0x9E3779B97F4A7C15ULL); }

double SearchRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double SearchRng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

long SearchRng::below(long n) { return static_cast<long>(uniform() * static_cast<double>(n)); }

double quantize(double value, double q) { return std::nearbyint(value / q) * q; }

std::vector<json> extreme_values(const SearchParam& p) {
  switch (p.distribution) {
    case Distribution::kFixed:
      return p.values;
    case Distribution::kUniform:
    case Distribution::kLogUniform:
      return {p.low, std::nextafter(p.high, p.low)};
    case Distribution::kQUniform:
      return {quantize(p.low, p.q), quantize(std::nextafter(p.high, p.low), p.q)};
    case Distribution::kInt:
      return {p.category(0), p.category(p.categories() - 1)};
    case Distribution::kChoice:
      return p.values;
  }
  return {};
}

json sample_prior(const SearchParam& p, SearchRng& rng) {
  switch (p.distribution) {
    case Distribution::kFixed:
      return p.values[0];
    case Distribution::kUniform:
      return p.low + (p.high - p.low) * rng.uniform();
    case Distribution::kLogUniform:
      return std::exp(std::log(p.low) + (std::log(p.high) - std::log(p.low)) * rng.uniform());
    case Distribution::kQUniform:
      return quantize(p.low + (p.high - p.low) * rng.uniform(), p.q);
    case Distribution::kInt:
    case Distribution::kChoice:
      return p.category(rng.below(p.categories()));
  }
  return json();
}

}  // namespace bertrain
