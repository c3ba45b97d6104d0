// Asynchronous successive halving (ASHA, Li et al. 2018) as Ray Tune's AsyncHyperBandScheduler defines it with
// one bracket, the scheduler of Made-With-ML's tune.py: rungs at grace_period * reduction_factor^k iterations
// (k = 0 .. floor(log(max_t / grace_period) / log(reduction_factor))); the first time a trial reports at or past
// a rung's milestone (the highest such rung), it is compared with the rewards other trials recorded at that rung
// and stopped when below their (1 - 1/reduction_factor) quantile (numpy.nanpercentile, linear), then its own reward
// is recorded there. The reward is the metric, negated when lower is better. A trial that reaches max_t ends by
// itself (`bertrain train` runs --epochs), so results at or past max_t decide nothing and are not recorded.
// An iteration is one evaluation of the trial (a line of its metrics.jsonl), Ray's training_iteration.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace bertrain {

class AshaScheduler {
 public:
  enum class Decision { kContinue, kStop };

  // Throws Error naming the flag when grace_period <= 0, grace_period > max_t or reduction_factor <= 1.
  AshaScheduler(double grace_period, double max_t, double reduction_factor, bool lower_is_better);

  // Trial `trial`'s result after `iteration` evaluations (1, 2, ...) with metric `value` (NaN: none).
  Decision on_result(const std::string& trial, long iteration, double value);

  // The rungs' milestones, highest first.
  std::vector<double> milestones() const;
  // The rewards recorded at the rung of `milestone` (trial -> reward), for messages and tests.
  const std::map<std::string, double>& recorded(double milestone) const;
  // The rung's cutoff: the reward below which a trial stops there (NaN with nothing recorded).
  double cutoff(double milestone) const;

 private:
  struct Rung {
    double milestone;
    std::map<std::string, double> rewards;
  };
  double quantile(const Rung& rung) const;

  double max_t_, reduction_factor_;
  bool lower_is_better_;
  std::vector<Rung> rungs_;  // highest milestone first, as Ray keeps them
};

// numpy.percentile(values, percent) with linear interpolation, NaNs left out (nanpercentile); NaN when none is left.
double nan_percentile(std::vector<double> values, double percent);

}  // namespace bertrain
