#include "tools/near_names.h"

#include <algorithm>
#include <utility>

namespace bertrain {

namespace {

std::string dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b` (the optimal string alignment
// distance), stopping at `limit` + 1.
std::size_t edits(const std::string& a, const std::string& b, std::size_t limit) {
  const std::size_t n = a.size(), m = b.size();
  if ((n > m ? n - m : m - n) > limit) return limit + 1;
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t replace = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, replace});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

// Other tools' names for bertrain's options (Made-With-ML's scripts, Hugging Face's Trainer and example scripts),
// dashed; a name with two meanings is read as the first the command has.
const std::vector<std::pair<std::string, std::string>>& aliases() {
  static const std::vector<std::pair<std::string, std::string>> table{
      {"dataset-loc", "train-data"},
      {"dataset-loc", "data"},
      {"experiment-name", "experiment"},
      {"learning-rate", "lr"},
      {"num-train-epochs", "epochs"},
      {"num-epochs", "epochs"},
      {"n-epochs", "epochs"},
      {"per-device-train-batch-size", "batch-size"},
      {"train-batch-size", "batch-size"},
      {"per-device-eval-batch-size", "batch-size"},
      {"bs", "batch-size"},
      {"gradient-accumulation-steps", "grad-accum-steps"},
      {"model-name-or-path", "model"},
      {"model-name", "model"},
      {"model-path", "model"},
      {"model-dir", "model"},
      {"output-dir", "out"},
      {"output", "out"},
      {"run-dir", "out"},
      {"data", "train-data"},
      {"dataset", "train-data"},
      {"train-file", "train-data"},
      {"train-dataset", "train-data"},
      {"dataset", "data"},
      {"file", "data"},
      {"input", "data"},
      {"validation-file", "val-data"},
      {"validation-data", "val-data"},
      {"eval-data", "val-data"},
      {"eval-file", "val-data"},
      {"dev-data", "val-data"},
      {"max-seq-length", "max-length"},
      {"max-seq-len", "max-length"},
      {"seq-len", "max-length"},
      {"label", "label-column"},
      {"labels", "label-column"},
      {"target", "label-column"},
      {"label-col", "label-column"},
      {"text-column", "text-columns"},
      {"text-col", "text-columns"},
      {"resume-from-checkpoint", "resume"},
      {"bf16", "precision bf16"},
      {"fp16", "precision bf16"},
      {"gpu", "device cuda"},
      {"cuda", "device cuda"},
      {"cpu", "device cpu"},
      {"num-threads", "threads"},
      {"output-file", "out"},
  };
  return table;
}

}  // namespace

std::vector<std::string> near_names(const std::string& typed, const std::vector<std::string>& names) {
  const std::string want = dashed(typed);
  const std::size_t limit = want.size() <= 4 ? 1 : 2;
  std::vector<std::pair<std::size_t, std::string>> found;
  for (const std::string& name : names) {
    std::size_t distance = edits(want, name, limit);
    if (distance > limit) {
      // A name's start (--max-len for --max-length), ranked after the near names.
      if (want.size() < 3 || name.rfind(want, 0) != 0) continue;
      distance = limit + 1;
    }
    found.emplace_back(distance, name);
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (const auto& [distance, name] : found) {
    if (out.size() == 3) break;
    out.push_back(name);
  }
  return out;
}

std::string option_alias(const std::string& typed, const std::vector<std::string>& options) {
  const std::string want = dashed(typed);
  for (const auto& [other, meaning] : aliases()) {
    if (other != want) continue;
    const std::string option = meaning.substr(0, meaning.find(' '));
    if (std::find(options.begin(), options.end(), option) != options.end()) return meaning;
  }
  return "";
}

std::string did_you_mean(const std::vector<std::string>& names, const std::string& prefix) {
  if (names.empty()) return "";
  std::string text = " (did you mean ";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " or " : ", ";
    text += prefix + names[i];
  }
  return text + "?)";
}

}  // namespace bertrain
