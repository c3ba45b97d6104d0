// The searches of `bertrain tune`: which parameters trial i runs with, given the trials that have finished.
// random and grid ignore the results; tpe (engine/tpe_search.h) learns from them. Every search is seeded per
// trial (SearchRng(seed, i)): the same seed proposes the same trials, whatever order trials finish in, except that
// TPE's proposals after its start-up trials depend on which trials had finished when each was proposed.
// --initial-params (Ray's points_to_evaluate) are not proposed here: the caller runs them first, as trials
// 0..k-1, and the searches count them among the trials proposed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/search_space.h"

namespace bertrain {

// A finished trial as a search sees it: its parameters and its loss, lower is better (a metric to maximize is
// negated). Failed trials are not observations.
struct Observation {
  nlohmann::json params;  // every parameter of the space by name, fixed ones included
  double loss = 0;
};

class ParamSearch {
 public:
  virtual ~ParamSearch() = default;
  // The parameters of trial `index` (every parameter of the space by name), `finished` in trial order.
  virtual nlohmann::json propose(long index, const std::vector<Observation>& finished) = 0;
};

// HyperOpt's TPE settings (hyperopt.tpe.suggest's defaults, which Ray's HyperOptSearch keeps).
struct TpeOptions {
  long startup_trials = 20;  // n_initial_points: trials drawn at random before TPE takes over
  long candidates = 24;      // n_EI_candidates: draws from the good density per parameter
  double gamma = 0.25;       // the good set: the best ceil(gamma * sqrt(n)) trials
  double prior_weight = 1.0;
  long forgetting = 25;      // linear forgetting: older observations than the newest 25 weigh less
};

// "random": each parameter from its prior. "grid": every combination of the values of choice, int and quniform
// parameters (the last parameter changing fastest); uniform and loguniform ones are refused. "tpe": HyperOpt's.
// Throws Error naming the search or the parameter.
std::unique_ptr<ParamSearch> make_param_search(const std::string& kind, const SearchSpace& space, uint64_t seed,
                                               const TpeOptions& tpe = TpeOptions());

// How many points a grid search has (its parameters' value counts multiplied); Error as make_param_search.
long grid_size(const SearchSpace& space);

}  // namespace bertrain
