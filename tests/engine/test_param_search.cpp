// bertrain tune's searches: the space file's distributions and their errors, random and grid proposals, and TPE
// as HyperOpt computes it (its Parzen estimators by hand, and better optima than random search over seeds).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/error.h"
#include "engine/param_search.h"
#include "engine/search_space.h"
#include "engine/tpe_search.h"
#include "tests/expect_error.h"

namespace bertrain {
namespace {

using nlohmann::json;

SearchSpace space_of(const std::string& text) { return parse_search_space(json::parse(text), "space.json"); }

const char kSpace[] = R"({"dropout": {"type": "uniform", "low": 0.3, "high": 0.9},
                          "lr": {"type": "loguniform", "low": 1e-5, "high": 5e-4},
                          "warmup-steps": {"type": "quniform", "low": 0, "high": 100, "q": 10},
                          "lr-patience": {"type": "int", "low": 1, "high": 4},
                          "batch-size": {"type": "choice", "values": [64, 128, 256]},
                          "lr-scheduler": "plateau"})";

TEST(SearchSpace, ParsesEveryDistribution) {
  const SearchSpace s = space_of(kSpace);
  ASSERT_EQ(s.params.size(), 6u);
  EXPECT_EQ(s.searched().size(), 5u);
  const SearchParam* lr = s.find("lr");
  ASSERT_NE(lr, nullptr);
  EXPECT_EQ(lr->distribution, Distribution::kLogUniform);
  EXPECT_EQ(s.find("lr-patience")->categories(), 4);
  EXPECT_EQ(s.find("lr-patience")->category(3), json(4));
  EXPECT_EQ(s.find("batch-size")->category_of(json(128)), 1);
  EXPECT_EQ(s.find("batch-size")->category_of(json(100)), -1);
  EXPECT_FALSE(s.find("lr-scheduler")->searched());
}

// What tune checks a space against train with: the values each parameter can propose at its ends.
TEST(SearchSpace, ExtremeValuesAreTheEndsAParameterCanReach) {
  const SearchSpace s = space_of(R"({"a": {"type": "uniform", "low": 0.3, "high": 1},
                                     "b": {"type": "loguniform", "low": 1e-5, "high": 1e-3},
                                     "c": {"type": "quniform", "low": 0, "high": 1, "q": 0.25},
                                     "d": {"type": "int", "low": 1, "high": 10},
                                     "e": {"type": "choice", "values": ["x", 2, true]},
                                     "f": 7})");
  // uniform and loguniform draw from [low, high): the largest value below high, not high.
  EXPECT_EQ(extreme_values(*s.find("a")), (std::vector<json>{0.3, std::nextafter(1.0, 0.0)}));
  EXPECT_EQ(extreme_values(*s.find("b")), (std::vector<json>{1e-5, std::nextafter(1e-3, 0.0)}));
  // quniform's rounding reaches high.
  EXPECT_EQ(extreme_values(*s.find("c")), (std::vector<json>{0.0, 1.0}));
  EXPECT_EQ(extreme_values(*s.find("d")), (std::vector<json>{1, 10}));
  EXPECT_EQ(extreme_values(*s.find("e")), (std::vector<json>{"x", 2, true}));
  EXPECT_EQ(extreme_values(*s.find("f")), (std::vector<json>{7}));
}

TEST(SearchSpace, ErrorsNameTheKey) {
  testing::expect_error([&] { space_of(R"({"lr": {"type": "uniform", "low": 2, "high": 1}})"); }, "\"lr\": low (2) must be below high (1)");
  testing::expect_error([&] { space_of(R"({"lr": {"type": "loguniform", "low": 0, "high": 1}})"); }, "\"lr\": a loguniform's low must be positive");
  testing::expect_error([&] { space_of(R"({"b": {"type": "choice", "values": []}})"); }, "\"b\": a choice needs at least one value");
  testing::expect_error([&] { space_of(R"({"b": {"type": "choice", "values": [1, 1]}})"); }, "\"b\": the value 1 is given twice");
  testing::expect_error([&] { space_of(R"({"b": {"type": "gauss", "low": 0, "high": 1}})"); }, "\"b\": unknown \"type\" 'gauss'");
  testing::expect_error([&] { space_of(R"({"b": {"type": "int", "low": 0.5, "high": 3}})"); }, "\"b\": an int's low and high must be integers");
  testing::expect_error([&] { space_of(R"({"b": {"type": "quniform", "low": 0, "high": 3, "q": 0}})"); }, "\"b\": q must be positive");
  testing::expect_error([&] { space_of(R"({"b": {"type": "uniform", "low": 0, "hi": 3}})"); }, "\"b\": no \"high\"");
  testing::expect_error([&] { space_of(R"({"b": {"type": "uniform", "low": 0, "high": 3, "q": 1}})"); }, "\"b\": unknown field \"q\"");
  testing::expect_error([&] { space_of(R"({"b": [1, 2]})"); }, "\"b\": a value must be a number, a string or a boolean");
  testing::expect_error([&] { space_of(R"({"b": 3})"); }, "nothing to search");
  testing::expect_error([&] { space_of("[1]"); }, "a search space is a JSON object");
}

TEST(SearchSpace, CheckPointNamesWhatIsWrong) {
  const SearchSpace s = space_of(kSpace);
  const json good = {{"dropout", 0.5}, {"lr", 1e-4}, {"warmup-steps", 20}, {"lr-patience", 3}, {"batch-size", 256}};
  EXPECT_NO_THROW(check_point(s, good, "--initial-params[0]"));
  json bad = good;
  bad["lr"] = 1.0;
  testing::expect_error([&] { check_point(s, bad, "--initial-params[0]"); }, "--initial-params[0]: \"lr\": 1.0 is not a number in [1e-05, 0.0005]");
  bad = good;
  bad.erase("dropout");
  testing::expect_error([&] { check_point(s, bad, "p"); }, "p: no value for \"dropout\"");
  bad = good;
  bad["seed"] = 1;
  testing::expect_error([&] { check_point(s, bad, "p"); }, "p: \"seed\" is not in the search space");
  bad = good;
  bad["batch-size"] = 100;
  testing::expect_error([&] { check_point(s, bad, "p"); }, "\"batch-size\": 100 is not one of its values");
}

// A study's trials are checked with check_point when study.json is read (--resume, report), so every search must
// propose points it accepts, at ends that are not multiples of q too; and the ends of a quniform are the
// multiples its rounding reaches.
TEST(SearchSpace, EveryProposalIsAPointOfItsSpace) {
  const SearchSpace s = space_of(R"({"w": {"type": "quniform", "low": 0.3, "high": 0.9, "q": 0.25},
                                     "lr": {"type": "loguniform", "low": 1e-7, "high": 3e-7},
                                     "d": {"type": "uniform", "low": -1, "high": 1e-300},
                                     "k": {"type": "int", "low": -2, "high": 2},
                                     "c": {"type": "choice", "values": ["a", 1, false]}, "f": 7})");
  const auto with = [](const char* key, double value) {
    json point = {{"w", 0.5}, {"lr", 2e-7}, {"d", 0}, {"k", 0}, {"c", "a"}};
    point[key] = value;
    return point;
  };
  for (double w : {0.25, 1.0}) EXPECT_NO_THROW(check_point(s, with("w", w), "p")) << w;
  for (double w : {0.0, 1.25}) {
    testing::expect_error([&] { check_point(s, with("w", w), "p"); }, "is not a number in [0.3, 0.9]");
  }
  EXPECT_NO_THROW(check_point(s, with("lr", std::exp(std::log(1e-7))), "p"));
  testing::expect_error([&] { check_point(s, with("lr", 1e-7 * (1 - 1e-9)), "p"); }, "\"lr\"");
  for (const char* name : {"random", "tpe", "grid"}) {
    const SearchSpace space = std::string(name) == "grid" ? space_of(R"({"w": {"type": "quniform", "low": 0.3,
        "high": 0.9, "q": 0.25}, "k": {"type": "int", "low": -2, "high": 2}, "c": {"type": "choice", "values": ["a", 1]}})")
                                                           : s;
    auto search = make_param_search(name, space, 11);
    std::vector<Observation> done;
    for (long i = 0; i < 120; ++i) {
      const json p = search->propose(i, done);
      EXPECT_NO_THROW(check_point(space, p, "trial")) << name << " " << p.dump();
      done.push_back({p, std::fabs(p["w"].get<double>() - 0.3) + 0.1 * static_cast<double>(i % 3)});
    }
  }
}

TEST(RandomSearch, DrawsInRangeAndTheSameSeedProposesTheSameTrials) {
  const SearchSpace s = space_of(kSpace);
  auto a = make_param_search("random", s, 7), b = make_param_search("random", s, 7), c = make_param_search("random", s, 8);
  std::set<long> patience;
  bool any_different = false;
  for (long i = 0; i < 200; ++i) {
    const json p = a->propose(i, {});
    EXPECT_EQ(p, b->propose(i, {})) << i;
    any_different = any_different || p != c->propose(i, {});
    EXPECT_GE(p["dropout"].get<double>(), 0.3);
    EXPECT_LT(p["dropout"].get<double>(), 0.9);
    EXPECT_GE(p["lr"].get<double>(), 1e-5);
    EXPECT_LT(p["lr"].get<double>(), 5e-4);
    const double w = p["warmup-steps"].get<double>();
    EXPECT_EQ(std::fmod(w, 10.0), 0.0) << w;
    patience.insert(p["lr-patience"].get<long>());
    EXPECT_EQ(p["lr-scheduler"], "plateau");
  }
  EXPECT_TRUE(any_different);
  EXPECT_EQ(patience, (std::set<long>{1, 2, 3, 4}));  // both ends of an int are drawn
}

// Neighbouring seeds and trials draw unrelated streams: seed s + 1's used to be seed s's one draw later, so that
// studies repeated with seeds 0, 1, 2 proposed nearly the same trials.
TEST(SearchRng, NeighbouringSeedsAndTrialsShareNoDraws) {
  std::set<uint64_t> seen;
  std::size_t draws = 0;
  for (uint64_t seed : {7u, 8u, 9u}) {
    for (uint64_t trial : {0u, 1u, 2u}) {
      SearchRng rng(seed, trial);
      for (int i = 0; i < 100; ++i, ++draws) seen.insert(rng.next());
    }
  }
  EXPECT_EQ(seen.size(), draws);
}

TEST(RandomSearch, LogUniformIsUniformInTheLog) {
  const SearchSpace s = space_of(R"({"lr": {"type": "loguniform", "low": 1e-6, "high": 1e-2}})");
  auto search = make_param_search("random", s, 1);
  int below_1e4 = 0;
  const int n = 4000;
  for (long i = 0; i < n; ++i) below_1e4 += search->propose(i, {})["lr"].get<double>() < 1e-4 ? 1 : 0;
  EXPECT_NEAR(static_cast<double>(below_1e4) / n, 0.5, 0.03);  // half the decades lie below 1e-4
}

TEST(GridSearch, EnumeratesEveryCombinationLastParameterFastest) {
  const SearchSpace s = space_of(R"({"a": {"type": "choice", "values": ["x", "y"]},
                                     "b": {"type": "int", "low": 1, "high": 3},
                                     "c": {"type": "quniform", "low": 0.1, "high": 0.5, "q": 0.2}, "d": true})");
  ASSERT_EQ(grid_size(s), 2 * 3 * 2);  // c: 0.2 and 0.4 are the multiples of 0.2 in [0.1, 0.5]
  auto grid = make_param_search("grid", s, 0);
  std::set<std::string> seen;
  for (long i = 0; i < 12; ++i) seen.insert(grid->propose(i, {}).dump());
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(grid->propose(0, {}), json::parse(R"({"a": "x", "b": 1, "c": 0.2, "d": true})"));
  EXPECT_EQ(grid->propose(1, {}), json::parse(R"({"a": "x", "b": 1, "c": 0.4, "d": true})"));
  EXPECT_EQ(grid->propose(2, {}), json::parse(R"({"a": "x", "b": 2, "c": 0.2, "d": true})"));
  testing::expect_error([&] { grid_size(space_of(R"({"lr": {"type": "uniform", "low": 0, "high": 1}})")); }, "grid search: \"lr\" is continuous (uniform)");
  // Both ends of a quniform whose quotients are not exact in binary (3 · 0.1 > 0.3, 0.7 / 0.1 < 7): what
  // quantize() proposes near them.
  EXPECT_EQ(grid_size(space_of(R"({"p": {"type": "quniform", "low": 0.1, "high": 0.3, "q": 0.1}})")), 3);
  EXPECT_EQ(grid_size(space_of(R"({"p": {"type": "quniform", "low": 0.1, "high": 0.7, "q": 0.1}})")), 7);
  EXPECT_EQ(grid_size(space_of(R"({"p": {"type": "quniform", "low": 0, "high": 0.6, "q": 0.2}})")), 4);
}

// Ray's tune.randint(low, high) leaves high out; "int" includes it.
TEST(SearchSpace, RandintLeavesItsHighOutAsRays) {
  const SearchSpace s = space_of(R"({"a": {"type": "randint", "low": 1, "high": 3}, "b": {"type": "int", "low": 1, "high": 3}})");
  EXPECT_EQ(s.find("a")->categories(), 2);
  EXPECT_EQ(s.find("a")->category_of(json(3)), -1);
  EXPECT_EQ(s.find("b")->categories(), 3);
  testing::expect_error([&] { space_of(R"({"a": {"type": "randint", "low": 2, "high": 2}})"); },
                        "a randint's high is left out (as Ray's): low (2) must be below high (2)");
}

// HyperOpt's adaptive_parzen_normal, worked by hand: observations 0.2, 0.6, 0.4 and the prior N(0.5, 1).
TEST(Tpe, AdaptiveParzenNormalAsHyperOpt) {
  const ParzenMixture m = adaptive_parzen_normal({0.2, 0.6, 0.4}, 1.0, 0.5, 1.0, 25);
  // Sorted with the prior inserted where searchsorted puts it: 0.2, 0.4, [0.5], 0.6.
  EXPECT_EQ(m.mus, (std::vector<double>{0.2, 0.4, 0.5, 0.6}));
  // Widths: the larger neighbour gap (0.2, 0.2, -, 0.1 at the end), clipped to >= 1 / min(100, 1 + 4) = 0.2;
  // the prior keeps its own.
  ASSERT_EQ(m.sigmas.size(), 4u);
  EXPECT_DOUBLE_EQ(m.sigmas[0], 0.2);
  EXPECT_DOUBLE_EQ(m.sigmas[1], 0.2);
  EXPECT_DOUBLE_EQ(m.sigmas[2], 1.0);
  EXPECT_DOUBLE_EQ(m.sigmas[3], 0.2);
  for (double w : m.weights) EXPECT_DOUBLE_EQ(w, 0.25);

  // One observation above the prior's mean: [prior, obs] with widths [prior_sigma, prior_sigma / 2].
  const ParzenMixture one = adaptive_parzen_normal({0.7}, 1.0, 0.5, 1.0, 25);
  EXPECT_EQ(one.mus, (std::vector<double>{0.5, 0.7}));
  EXPECT_EQ(one.sigmas, (std::vector<double>{1.0, 0.5}));
  // None: the prior alone.
  const ParzenMixture none = adaptive_parzen_normal({}, 1.0, 0.5, 2.0, 25);
  EXPECT_EQ(none.mus, (std::vector<double>{0.5}));
  EXPECT_EQ(none.sigmas, (std::vector<double>{2.0}));
  EXPECT_EQ(none.weights, (std::vector<double>{1.0}));
}

TEST(Tpe, LinearForgettingWeights) {
  EXPECT_EQ(linear_forgetting_weights(3, 25), (std::vector<double>{1, 1, 1}));
  const std::vector<double> w = linear_forgetting_weights(27, 25);  // numpy.linspace(1/27, 1, 2), then 25 ones
  ASSERT_EQ(w.size(), 27u);
  EXPECT_DOUBLE_EQ(w[0], 1.0 / 27);
  EXPECT_DOUBLE_EQ(w[1], 1.0);
  EXPECT_DOUBLE_EQ(w[26], 1.0);
  const std::vector<double> w3 = linear_forgetting_weights(28, 25);  // linspace(1/28, 1, 3)
  EXPECT_DOUBLE_EQ(w3[1], (1.0 / 28 + 1.0) / 2);
}

TEST(Tpe, MixtureDensityIsNormalisedOverItsRange) {
  const ParzenMixture m = adaptive_parzen_normal({0.2, 0.9}, 1.0, 0.5, 1.0, 25);
  // The truncated density integrates to 1 over [0, 1): a midpoint sum.
  double integral = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) integral += std::exp(mixture_log_density(m, (i + 0.5) / n, 0, 1, 0)) / n;
  EXPECT_NEAR(integral, 1.0, 1e-6);
  // quniform: the bins' masses add up to 1 too.
  double mass = 0;
  for (int k = 0; k <= 10; ++k) mass += std::exp(mixture_log_density(m, k * 0.1, 0, 1, 0.1));
  EXPECT_NEAR(mass, 1.0, 1e-9);
}

// The best loss a search finds on a smooth objective with its optimum at x = 1.3, lr = 1e-2, k = 2.
double best_found(const std::string& kind, uint64_t seed, long trials) {
  const SearchSpace s = parse_search_space(json::parse(R"({"x": {"type": "uniform", "low": -5, "high": 5},
      "lr": {"type": "loguniform", "low": 1e-5, "high": 1}, "k": {"type": "choice", "values": [0, 1, 2, 3, 4]}})"), "s");
  TpeOptions tpe;
  tpe.startup_trials = 10;
  auto search = make_param_search(kind, s, seed, tpe);
  std::vector<Observation> done;
  double best = INFINITY;
  for (long i = 0; i < trials; ++i) {
    const json p = search->propose(i, done);
    const double x = p["x"].get<double>(), lr = p["lr"].get<double>();
    const double loss = (x - 1.3) * (x - 1.3) + std::pow(std::log10(lr) + 2, 2) + std::abs(p["k"].get<int>() - 2);
    done.push_back({p, loss});
    best = std::min(best, loss);
  }
  return best;
}

// HyperOpt 0.2.7 itself on this objective (fmin, 60 evaluations, n_startup_jobs 10, seeds 1-12): mean best 0.51
// with TPE against 0.85 at random, TPE ahead on 8 seeds of 12.
TEST(Tpe, FindsBetterOptimaThanRandomSearchOnAverage) {
  double tpe = 0, random = 0;
  int tpe_wins = 0;
  const int seeds = 24;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const double t = best_found("tpe", seed, 60), r = best_found("random", seed, 60);
    tpe += t / seeds;
    random += r / seeds;
    tpe_wins += t < r ? 1 : 0;
  }
  EXPECT_LT(tpe, 0.7 * random) << "mean best loss: tpe " << tpe << ", random " << random;
  EXPECT_GE(tpe_wins, 15) << "of " << seeds << " seeds";
}

TEST(Tpe, StartupTrialsAreRandomAndTheSameSeedProposesTheSame) {
  const SearchSpace s = space_of(kSpace);
  auto tpe = make_param_search("tpe", s, 3), random = make_param_search("random", s, 3);
  std::vector<Observation> done;
  for (long i = 0; i < 20; ++i) {  // HyperOpt's n_initial_points: 20 draws from the priors
    const json p = tpe->propose(i, done);
    EXPECT_EQ(p, random->propose(i, done)) << i;
    done.push_back({p, p["dropout"].get<double>()});
  }
  auto again = make_param_search("tpe", s, 3);
  for (long i = 20; i < 30; ++i) {
    const json p = tpe->propose(i, done);
    EXPECT_EQ(p, again->propose(i, done)) << i;
    EXPECT_GE(p["dropout"].get<double>(), 0.3);
    EXPECT_LT(p["dropout"].get<double>(), 0.9);
    EXPECT_GE(s.find("batch-size")->category_of(p["batch-size"]), 0);
    done.push_back({p, p["dropout"].get<double>()});
  }
  // Lower dropout is better here: the model's proposals lean to the low end (the prior's mean is 0.6; HyperOpt's
  // trials 30-59 on this objective average 0.517 over seeds 1-5).
  double mean = 0;
  for (long i = 30; i < 60; ++i) {
    const json p = tpe->propose(i, done);
    done.push_back({p, p["dropout"].get<double>()});
    mean += p["dropout"].get<double>() / 30;
  }
  EXPECT_LT(mean, 0.55);
}

TEST(ParamSearch, UnknownSearchIsAnError) {
  testing::expect_error([&] { make_param_search("bayes", space_of(kSpace), 0); }, "--search must be tpe, random or grid, got 'bayes'");
}

}  // namespace
}  // namespace bertrain
