// Tree-structured Parzen Estimator search (Bergstra, Bardenet, Bengio, Kegl 2011), as HyperOpt's tpe.suggest
// does it for a flat space, so that `bertrain tune --search tpe` proposes what Made-With-ML's HyperOptSearch would:
//  - the first startup_trials trials (counting --initial-params) are drawn from the priors;
//  - then the finished trials are split by loss: the best ceil(gamma * sqrt(n)) (at most `forgetting`) are good;
//  - for each parameter independently, a Parzen estimator of the good values and one of the other values, each
//    with the prior as one more component (adaptive_parzen_normal: a Gaussian on each observation, its width the
//    larger gap to a neighbour, clipped to [prior_sigma / min(100, n + 1), prior_sigma]; weights fading linearly
//    for all but the newest `forgetting`); int and choice parameters get a categorical with pseudo-counts instead;
//  - `candidates` values are drawn from the good estimator (truncated to [low, high); loguniform in log space;
//    quniform rounded to q) and the one with the largest log l(x) - log g(x) is taken.
#pragma once

#include <vector>

#include "engine/param_search.h"

namespace bertrain {

// A one-dimensional Gaussian mixture (weights sum to 1), HyperOpt's GMM1.
struct ParzenMixture {
  std::vector<double> weights, mus, sigmas;
};

// HyperOpt's adaptive_parzen_normal of observations `mus` (in trial order) with the prior N(prior_mu, prior_sigma).
ParzenMixture adaptive_parzen_normal(const std::vector<double>& mus, double prior_weight, double prior_mu,
                                     double prior_sigma, long forgetting);

// HyperOpt's linear_forgetting_weights: n ones, or a ramp from 1/n to 1 over the oldest n - lf and ones after.
std::vector<double> linear_forgetting_weights(long n, long lf);

// The log density of x under `m` truncated to [low, high) (HyperOpt's GMM1_lpdf); with q > 0 the log of the mass
// of [x - q/2, x + q/2] within [low, high] (quniform).
double mixture_log_density(const ParzenMixture& m, double x, double low, double high, double q);

std::unique_ptr<ParamSearch> make_tpe_search(const SearchSpace& space, uint64_t seed, const TpeOptions& options);

}  // namespace bertrain
