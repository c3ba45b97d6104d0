#include "engine/asha_scheduler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace bertrain {

double nan_percentile(std::vector<double> values, double percent) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }), values.end());
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const double position = percent / 100.0 * static_cast<double>(values.size() - 1);
  const std::size_t below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  const double t = position - static_cast<double>(below);
  // numpy's _lerp, which interpolates from the nearer end so that t = 1 gives exactly the upper value.
  const double a = values[below], b = values[above], diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

AshaScheduler::AshaScheduler(double grace_period, double max_t, double reduction_factor, bool lower_is_better)
    : max_t_(max_t), reduction_factor_(reduction_factor), lower_is_better_(lower_is_better) {
  BERTRAIN_CHECK(grace_period > 0, "--grace-period must be positive, got " << grace_period);
  BERTRAIN_CHECK(max_t >= grace_period,
                 "--grace-period (" << grace_period << ") must not exceed the trials' epochs (" << max_t << ")");
  BERTRAIN_CHECK(reduction_factor > 1, "--reduction-factor must be above 1, got " << reduction_factor);
  // Ray: MAX_RUNGS = int(np.log(max_t / min_t) / np.log(rf) - s + 1) with s = 0, computed the same way.
  const long rungs = static_cast<long>(std::log(max_t / grace_period) / std::log(reduction_factor) + 1);
  for (long k = rungs - 1; k >= 0; --k) {
    rungs_.push_back({grace_period * std::pow(reduction_factor, static_cast<double>(k)), {}});
  }
}

double AshaScheduler::quantile(const Rung& rung) const {
  std::vector<double> rewards;
  for (const auto& entry : rung.rewards) rewards.push_back(entry.second);
  return nan_percentile(rewards, (1 - 1 / reduction_factor_) * 100);
}

AshaScheduler::Decision AshaScheduler::on_result(const std::string& trial, long iteration, double value) {
  if (static_cast<double>(iteration) >= max_t_) return Decision::kContinue;
  const double reward = lower_is_better_ ? -value : value;
  for (Rung& rung : rungs_) {
    if (static_cast<double>(iteration) < rung.milestone || rung.rewards.count(trial) != 0) continue;
    Decision decision = Decision::kContinue;
    if (!rung.rewards.empty()) {
      const double cut = quantile(rung);
      if (reward < cut) decision = Decision::kStop;  // NaN on either side compares false: the trial goes on
    }
    rung.rewards[trial] = reward;
    return decision;
  }
  return Decision::kContinue;
}

std::vector<double> AshaScheduler::milestones() const {
  std::vector<double> out;
  for (const Rung& rung : rungs_) out.push_back(rung.milestone);
  return out;
}

const std::map<std::string, double>& AshaScheduler::recorded(double milestone) const {
  for (const Rung& rung : rungs_) {
    if (rung.milestone == milestone) return rung.rewards;
  }
  BERTRAIN_FAIL("no ASHA rung at " << milestone);
}

double AshaScheduler::cutoff(double milestone) const {
  for (const Rung& rung : rungs_) {
    if (rung.milestone == milestone) return rung.rewards.empty() ? NAN : quantile(rung);
  }
  BERTRAIN_FAIL("no ASHA rung at " << milestone);
}

}  // namespace bertrain
