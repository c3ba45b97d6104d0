// A hyper-parameter search space, as `bertrain tune --space FILE` reads it: a JSON object from a parameter's name
// to its distribution, the ones Ray Tune and HyperOpt offer Made-With-ML:
//   {"lr": {"type": "loguniform", "low": 1e-5, "high": 5e-4},   e^uniform(ln low, ln high)
//    "dropout": {"type": "uniform", "low": 0.3, "high": 0.9},   uniform in [low, high)
//    "warmup-steps": {"type": "quniform", "low": 0, "high": 100, "q": 10},  round(uniform / q) * q
//    "lr-patience": {"type": "int", "low": 1, "high": 10},     an integer, both ends included
//    "batch-size": {"type": "choice", "values": [128, 256]},    one of the values, each equally likely a priori
//    "lr-scheduler": "plateau"}                                 a fixed value (a number, string or boolean)
// The names are not checked here (tools/tune knows which flags `bertrain train` has); draws come from a seeded
// generator of this file's own, so a seed proposes the same values on every machine and standard library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bertrain {

enum class Distribution { kUniform, kLogUniform, kQUniform, kInt, kChoice, kFixed };

struct SearchParam {
  std::string name;
  Distribution distribution = Distribution::kFixed;
  double low = 0, high = 0;  // uniform, loguniform, quniform: [low, high); int: [low, high], both integers
  double q = 0;              // quniform's step
  std::vector<nlohmann::json> values;  // choice: the options; fixed: the one value

  bool searched() const { return distribution != Distribution::kFixed; }
  // The number of values an int or choice parameter can take (0 for the continuous ones).
  long categories() const;
  // Of a categorical (int, choice) parameter: the index of `value` among its values, -1 when it is not one.
  long category_of(const nlohmann::json& value) const;
  // Of a categorical parameter: its value number `index`.
  nlohmann::json category(long index) const;
};

struct SearchSpace {
  std::vector<SearchParam> params;  // in the order of the file's keys, sorted by name (nlohmann/json's objects are)

  std::vector<const SearchParam*> searched() const;
  const SearchParam* find(const std::string& name) const;  // null when there is none
};

// Parses a space. Throws Error (the command makes it an InputError) naming `origin` (the file) and the key: an unknown "type", low >= high, a
// loguniform low <= 0, a quniform q <= 0, int bounds that are not integers, an empty or repeated choice, a value
// that is not a number, string or boolean, or a space with nothing to search.
SearchSpace parse_search_space(const nlohmann::json& space, const std::string& origin);

// Throws Error naming `origin` and the key unless `point` (an object, e.g. one of --initial-params) gives
// every searched parameter a value it can take (for the continuous ones a number in [low, high], widened to what
// the searches propose: a quniform's rounding at its ends, a loguniform's few ulps; an integer in range for int,
// one of the values for choice) and names nothing else; fixed parameters may be left out.
void check_point(const SearchSpace& space, const nlohmann::json& point, const std::string& origin);

// A seeded stream of doubles for the searches: splitmix64, so that every platform draws the same numbers.
class SearchRng {
 public:
  // One stream per (seed, trial): a trial's draws do not depend on which other trials were proposed before it.
  SearchRng(uint64_t seed, uint64_t trial);
  uint64_t next();
  double uniform();  // [0, 1), 53 random bits
  double normal();   // standard normal (Box-Muller)
  long below(long n);  // an integer in [0, n)

 private:
  uint64_t state_;
};

// A draw from the parameter's own distribution (its prior); fixed parameters give their value.
nlohmann::json sample_prior(const SearchParam& param, SearchRng& rng);

// `value` rounded to a multiple of q, as HyperOpt's and Ray's quniform do: round(value / q) * q.
double quantize(double value, double q);

// The values a searched parameter can propose at its ends, for checking a space against what train accepts: every
// choice, an int's two bounds, a range's low and its largest value below high (uniform, loguniform; quantized for
// quniform, whose rounding can reach high).
std::vector<nlohmann::json> extreme_values(const SearchParam& p);

}  // namespace bertrain
