#include "engine/param_search.h"

#include <cmath>

#include "core/error.h"
#include "engine/tpe_search.h"

namespace bertrain {

using nlohmann::json;

namespace {

class RandomSearch : public ParamSearch {
 public:
  RandomSearch(SearchSpace space, uint64_t seed) : space_(std::move(space)), seed_(seed) {}
  json propose(long index, const std::vector<Observation>&) override {
    SearchRng rng(seed_, static_cast<uint64_t>(index));
    json point = json::object();
    for (const SearchParam& p : space_.params) point[p.name] = sample_prior(p, rng);
    return point;
  }

 private:
  SearchSpace space_;
  uint64_t seed_;
};

// The values a grid takes for one parameter.
std::vector<json> grid_values(const SearchParam& p) {
  std::vector<json> values;
  switch (p.distribution) {
    case Distribution::kFixed:
      return p.values;
    case Distribution::kChoice:
    case Distribution::kInt:
      for (long i = 0; i < p.categories(); ++i) values.push_back(p.category(i));
      return values;
    case Distribution::kQUniform: {
      // The multiples of q in [low, high], as quantize() can return them: k·q for k from low/q to high/q, those
      // quotients taken to within rounding (3 · 0.1 is 0.30000000000000004, which quantize() gives for 0.3 too).
      const double tolerance = 1e-9;
      const double first = std::ceil(p.low / p.q - tolerance), last = std::floor(p.high / p.q + tolerance);
      for (double k = first; k <= last; k += 1) values.push_back(k * p.q);
      BERTRAIN_CHECK(!values.empty(), "grid search: \"" << p.name << "\" has no multiple of q = " << p.q << " in ["
                                                        << p.low << ", " << p.high << "]");
      return values;
    }
    default:
      BERTRAIN_FAIL("grid search: \"" << p.name << "\" is continuous (" << (p.distribution == Distribution::kUniform ? "uniform" : "loguniform")
                                      << "); a grid takes choice, int and quniform parameters");
  }
}

class GridSearch : public ParamSearch {
 public:
  explicit GridSearch(const SearchSpace& space) {
    for (const SearchParam& p : space.params) axes_.push_back({p.name, grid_values(p)});
  }
  json propose(long index, const std::vector<Observation>&) override {
    json point = json::object();
    // Mixed radix, the last parameter fastest; past the end the grid starts again.
    for (auto axis = axes_.rbegin(); axis != axes_.rend(); ++axis) {
      const long n = static_cast<long>(axis->second.size());
      point[axis->first] = axis->second[static_cast<std::size_t>(index % n)];
      index /= n;
    }
    return point;
  }

 private:
  std::vector<std::pair<std::string, std::vector<json>>> axes_;
};

}  // namespace

long grid_size(const SearchSpace& space) {
  long n = 1;
  for (const SearchParam& p : space.params) {
    const long k = static_cast<long>(grid_values(p).size());
    BERTRAIN_CHECK(n <= 1000000000L / k, "grid search: more than 10^9 points");
    n *= k;
  }
  return n;
}

std::unique_ptr<ParamSearch> make_param_search(const std::string& kind, const SearchSpace& space, uint64_t seed,
                                               const TpeOptions& tpe) {
  if (kind == "random") return std::make_unique<RandomSearch>(space, seed);
  if (kind == "grid") return std::make_unique<GridSearch>(space);
  if (kind == "tpe") return make_tpe_search(space, seed, tpe);
  BERTRAIN_FAIL("--search must be tpe, random or grid, got '" << kind << "'");
}

}  // namespace bertrain
