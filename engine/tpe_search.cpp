#include "engine/tpe_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace bertrain {

using nlohmann::json;

namespace {

double normal_cdf(double x, double mu, double sigma) {
  return 0.5 * std::erfc(-(x - mu) / (sigma * std::sqrt(2.0)));
}

// log(sum(exp(v))), stable.
double log_sum_exp(const std::vector<double>& v) {
  const double top = *std::max_element(v.begin(), v.end());
  if (!std::isfinite(top)) return top;
  double sum = 0;
  for (double x : v) sum += std::exp(x - top);
  return top + std::log(sum);
}

// The mass of the mixture inside [low, high): the truncation's normaliser.
double accepted_mass(const ParzenMixture& m, double low, double high) {
  double p = 0;
  for (std::size_t i = 0; i < m.mus.size(); ++i) {
    p += m.weights[i] * (normal_cdf(high, m.mus[i], m.sigmas[i]) - normal_cdf(low, m.mus[i], m.sigmas[i]));
  }
  return p;
}

// A draw from the mixture truncated to [low, high) by rejection, as HyperOpt's GMM1 draws.
double sample_mixture(const ParzenMixture& m, double low, double high, SearchRng& rng) {
  for (long tries = 0; tries < 1000000; ++tries) {
    double u = rng.uniform();
    std::size_t k = 0;
    while (k + 1 < m.weights.size() && u >= m.weights[k]) u -= m.weights[k++];
    const double draw = m.mus[k] + m.sigmas[k] * rng.normal();
    if (draw >= low && draw < high) return draw;
  }
  // The prior component alone keeps over 38 % of its mass inside [low, high): never reached in practice.
  return low + (high - low) * rng.uniform();
}

// One parameter's observations, good and bad, as HyperOpt's ap_split_trials splits them.
struct Split {
  std::vector<double> good, bad;          // continuous values (in log space for loguniform)
  std::vector<long> good_cat, bad_cat;    // category indices for int and choice
};

class TpeSearch : public ParamSearch {
 public:
  TpeSearch(SearchSpace space, uint64_t seed, TpeOptions options)
      : space_(std::move(space)), seed_(seed), o_(options) {}

  json propose(long index, const std::vector<Observation>& finished) override {
    SearchRng rng(seed_, static_cast<uint64_t>(index));
    json point = json::object();
    if (index < o_.startup_trials || finished.empty()) {
      for (const SearchParam& p : space_.params) point[p.name] = sample_prior(p, rng);
      return point;
    }
    const std::vector<bool> good = good_trials(finished);
    for (const SearchParam& p : space_.params) {
      if (!p.searched()) {
        point[p.name] = p.values[0];
        continue;
      }
      Split split;
      for (std::size_t t = 0; t < finished.size(); ++t) {
        const json& v = finished[t].params.at(p.name);
        if (p.categories() > 0) {
          (good[t] ? split.good_cat : split.bad_cat).push_back(p.category_of(v));
        } else {
          const double x = v.get<double>();
          (good[t] ? split.good : split.bad).push_back(p.distribution == Distribution::kLogUniform ? std::log(x) : x);
        }
      }
      point[p.name] = p.categories() > 0 ? propose_category(p, split, rng) : propose_continuous(p, split, rng);
    }
    return point;
  }

 private:
  // Which finished trials are good: the lowest ceil(gamma * sqrt(n)) losses, at most `forgetting` of them (ties
  // broken by trial order).
  std::vector<bool> good_trials(const std::vector<Observation>& finished) const {
    const std::size_t n = finished.size();
    const std::size_t n_good = std::min<std::size_t>(
        static_cast<std::size_t>(std::ceil(o_.gamma * std::sqrt(static_cast<double>(n)))),
        static_cast<std::size_t>(o_.forgetting));
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return finished[a].loss < finished[b].loss; });
    std::vector<bool> good(n, false);
    for (std::size_t i = 0; i < n_good && i < n; ++i) good[order[i]] = true;
    return good;
  }

  json propose_continuous(const SearchParam& p, const Split& split, SearchRng& rng) const {
    const bool log_space = p.distribution == Distribution::kLogUniform;
    const double low = log_space ? std::log(p.low) : p.low;
    const double high = log_space ? std::log(p.high) : p.high;
    const double prior_mu = 0.5 * (high + low), prior_sigma = high - low;
    const ParzenMixture l = adaptive_parzen_normal(split.good, o_.prior_weight, prior_mu, prior_sigma, o_.forgetting);
    const ParzenMixture g = adaptive_parzen_normal(split.bad, o_.prior_weight, prior_mu, prior_sigma, o_.forgetting);
    const double q = p.distribution == Distribution::kQUniform ? p.q : 0;
    double best = 0, best_score = -std::numeric_limits<double>::infinity();
    for (long c = 0; c < o_.candidates; ++c) {
      double x = sample_mixture(l, low, high, rng);
      if (q > 0) x = quantize(x, q);
      // loguniform in log space: the density's 1/x factor is the same in l and g and cancels in the ratio.
      const double score = mixture_log_density(l, x, low, high, q) - mixture_log_density(g, x, low, high, q);
      if (c == 0 || score > best_score) best = x, best_score = score;
    }
    return log_space ? std::exp(best) : best;
  }

  // HyperOpt's ap_categorical_sampler: weighted counts plus prior_weight per category, normalised.
  std::vector<double> categorical_posterior(const std::vector<long>& obs, long k) const {
    const std::vector<double> w = linear_forgetting_weights(static_cast<long>(obs.size()), o_.forgetting);
    std::vector<double> p(static_cast<std::size_t>(k), o_.prior_weight);
    for (std::size_t i = 0; i < obs.size(); ++i) p[static_cast<std::size_t>(obs[i])] += w[i];
    const double sum = std::accumulate(p.begin(), p.end(), 0.0);
    for (double& x : p) x /= sum;
    return p;
  }

  json propose_category(const SearchParam& p, const Split& split, SearchRng& rng) const {
    const long k = p.categories();
    const std::vector<double> l = categorical_posterior(split.good_cat, k);
    const std::vector<double> g = categorical_posterior(split.bad_cat, k);
    long best = 0;
    double best_score = -std::numeric_limits<double>::infinity();
    for (long c = 0; c < o_.candidates; ++c) {
      double u = rng.uniform();
      long x = 0;
      while (x + 1 < k && u >= l[static_cast<std::size_t>(x)]) u -= l[static_cast<std::size_t>(x++)];
      const double score = std::log(l[static_cast<std::size_t>(x)]) - std::log(g[static_cast<std::size_t>(x)]);
      if (c == 0 || score > best_score) best = x, best_score = score;
    }
    return p.category(best);
  }

  SearchSpace space_;
  uint64_t seed_;
  TpeOptions o_;
};

}  // namespace

std::vector<double> linear_forgetting_weights(long n, long lf) {
  if (n <= 0) return {};
  if (n < lf) return std::vector<double>(static_cast<std::size_t>(n), 1.0);
  std::vector<double> w;
  const long ramp = n - lf;  // numpy.linspace(1/n, 1, ramp)
  for (long i = 0; i < ramp; ++i) {
    const double start = 1.0 / static_cast<double>(n);
    w.push_back(ramp == 1 ? start : start + (1.0 - start) * static_cast<double>(i) / static_cast<double>(ramp - 1));
  }
  w.resize(static_cast<std::size_t>(n), 1.0);
  return w;
}

ParzenMixture adaptive_parzen_normal(const std::vector<double>& mus, double prior_weight, double prior_mu,
                                     double prior_sigma, long forgetting) {
  const std::size_t n = mus.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return mus[a] < mus[b]; });
  // The prior goes where numpy.searchsorted puts it: before the first observation not below it.
  std::size_t prior_pos = 0;
  while (prior_pos < n && mus[order[prior_pos]] < prior_mu) ++prior_pos;
  ParzenMixture m;
  for (std::size_t i = 0; i <= n; ++i) {
    m.mus.push_back(i < prior_pos ? mus[order[i]] : i == prior_pos ? prior_mu : mus[order[i - 1]]);
  }
  const std::size_t size = m.mus.size();
  m.sigmas.assign(size, prior_sigma);
  if (n == 1) {
    m.sigmas[prior_pos == 0 ? 1 : 0] = prior_sigma * 0.5;
  } else if (n >= 2) {
    for (std::size_t i = 1; i + 1 < size; ++i) {
      m.sigmas[i] = std::max(m.mus[i] - m.mus[i - 1], m.mus[i + 1] - m.mus[i]);
    }
    m.sigmas[0] = m.mus[1] - m.mus[0];
    m.sigmas[size - 1] = m.mus[size - 1] - m.mus[size - 2];
  }
  const bool forget = forgetting > 0 && forgetting < static_cast<long>(n);
  const std::vector<double> unsorted = forget ? linear_forgetting_weights(static_cast<long>(n), forgetting)
                                              : std::vector<double>(n, 1.0);
  for (std::size_t i = 0; i < size; ++i) {
    m.weights.push_back(i < prior_pos ? unsorted[order[i]] : i == prior_pos ? prior_weight : unsorted[order[i - 1]]);
  }
  // HyperOpt's "magic formula": no component narrower than prior_sigma / min(100, n + 2) or wider than the prior.
  const double max_sigma = prior_sigma;
  const double min_sigma = prior_sigma / std::min(100.0, 1.0 + static_cast<double>(size));
  for (double& s : m.sigmas) s = std::clamp(s, min_sigma, max_sigma);
  m.sigmas[prior_pos] = prior_sigma;
  const double total = std::accumulate(m.weights.begin(), m.weights.end(), 0.0);
  for (double& w : m.weights) w /= total;
  return m;
}

double mixture_log_density(const ParzenMixture& m, double x, double low, double high, double q) {
  const double accepted = accepted_mass(m, low, high);
  if (q > 0) {
    const double upper = std::min(x + q / 2, high), lower = std::max(x - q / 2, low);
    double mass = 0;
    for (std::size_t i = 0; i < m.mus.size(); ++i) {
      mass += m.weights[i] * (normal_cdf(upper, m.mus[i], m.sigmas[i]) - normal_cdf(lower, m.mus[i], m.sigmas[i]));
    }
    return std::log(mass) - std::log(accepted);
  }
  std::vector<double> terms;
  for (std::size_t i = 0; i < m.mus.size(); ++i) {
    const double z = (x - m.mus[i]) / m.sigmas[i];
    terms.push_back(-0.5 * z * z + std::log(m.weights[i] / std::sqrt(2 * M_PI * m.sigmas[i] * m.sigmas[i]) / accepted));
  }
  return log_sum_exp(terms);
}

std::unique_ptr<ParamSearch> make_tpe_search(const SearchSpace& space, uint64_t seed, const TpeOptions& options) {
  BERTRAIN_CHECK(options.startup_trials >= 0, "--startup-trials must be >= 0, got " << options.startup_trials);
  BERTRAIN_CHECK(options.candidates >= 1, "TPE needs at least one candidate");
  return std::make_unique<TpeSearch>(space, seed, options);
}

}  // namespace bertrain
