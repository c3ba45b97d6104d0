// libFuzzer target: what `bertrain serve` reads from the network, through tools/serve/api_requests.h as the HTTP
// layer calls it. The first byte picks the entry point, the rest is the request body (or the asked path):
//   0  POST /predict, /predict/ (Made-With-ML's or text-embeddings-inference's body)
//   1  POST /v1/predict with the text columns title and description
//   2  POST /evaluate/: the body's "dataset", then that path under the evaluation root
//   3  the bytes as the asked path, straight to dataset_under_root
// The evaluation root is a scratch folder made once: a file, a file in a subfolder, a folder, a link to a file
// inside, and links to a file and a folder outside it.
//
// Expected: a parsed call or an ApiError of status 400, 403 or 404 whose error body (what the client gets)
// is valid JSON. A finding is anything else, or a broken invariant (__builtin_trap):
//   - a parsed call has at least one text, none of them blank;
//   - the answer to it, with made-up probabilities, is valid JSON with one result per text (TEI: a list of scores
//     per text, or one list for a single "inputs" string);
//   - a path dataset_under_root accepts names, as the operating system reads it (up to a NUL byte), a regular file
//     whose real path lies inside the root.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/labels.h"
#include "tests/fuzz/fuzz_common.h"
#include "tools/prediction_rule.h"
#include "tools/serve/api_requests.h"

namespace {

namespace fs = std::filesystem;

// The evaluation root and its canonical path, made once per process (removed at exit).
struct Root {
  fs::path top, root;
};

const Root& scratch_root() {
  static const Root made = [] {
    Root r;
    r.top = bertrain_fuzz::scratch_path("serve_root");
    fs::remove_all(r.top);
    fs::create_directories(r.top / "root" / "sub");
    fs::create_directories(r.top / "root" / "folder");
    std::ofstream(r.top / "outside.csv") << "title,tag\nx,y\n";
    std::ofstream(r.top / "root" / "data.csv") << "title,tag\nx,y\n";
    std::ofstream(r.top / "root" / "sub" / "inner.csv") << "title,tag\nx,y\n";
    fs::create_symlink(r.top / "root" / "data.csv", r.top / "root" / "link_in.csv");
    fs::create_symlink(r.top / "outside.csv", r.top / "root" / "link_out.csv");
    fs::create_directory_symlink(r.top, r.top / "root" / "link_up");
    r.root = fs::canonical(r.top / "root");
    return r;
  }();
  // Registered once `made` exists, so that it runs before `made` is destroyed (exit runs both in reverse order).
  static const bool registered = [] { return std::atexit([] { fs::remove_all(made.top); }) == 0; }();
  (void)registered;
  return made;
}

void check_call(const bertrain::PredictCall& call) {
  if (call.texts.empty()) __builtin_trap();
  for (const std::string& text : call.texts) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) __builtin_trap();
  }
  static const bertrain::LabelSet labels({"computer-vision", "mlops", "natural-language-processing", "other"});
  const std::size_t classes = static_cast<std::size_t>(labels.size());
  std::vector<float> probs(call.texts.size() * classes), logits(probs.size());
  for (std::size_t i = 0; i < probs.size(); ++i) {
    probs[i] = static_cast<float>(i % classes + 1) / 10.0f;
    logits[i] = -probs[i];
  }
  const std::vector<bool> truncated(call.texts.size(), false);
  bertrain::PredictionRule rule;
  rule.threshold = 0.35;
  rule.other = "other";
  const nlohmann::json answer =
      nlohmann::json::parse(bertrain::predict_answer(call, probs, logits, truncated, labels, rule));
  const std::size_t rows = call.shape != bertrain::AnswerShape::kTei ? answer.at("results").size()
                           : call.tei_list                           ? answer.size()
                                                                     : 1;
  if (rows != call.texts.size()) __builtin_trap();
  if (call.shape == bertrain::AnswerShape::kTei && !call.tei_list && answer.size() != classes) __builtin_trap();
}

void check_dataset(const std::string& requested) {
  const Root& r = scratch_root();
  const std::string accepted = bertrain::dataset_under_root(r.root.string(), requested);
  const fs::path as_opened = accepted.substr(0, accepted.find('\0'));  // what open(2) is given
  std::error_code ec;
  const fs::path real = fs::canonical(as_opened, ec);
  if (ec || !fs::is_regular_file(real)) __builtin_trap();
  const auto [root_end, unused] = std::mismatch(r.root.begin(), r.root.end(), real.begin(), real.end());
  if (root_end != r.root.end()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0:
        check_call(bertrain::parse_predict_body(body));
        break;
      case 1:
        check_call(bertrain::parse_v1_predict_body(body, {"title", "description"}));
        break;
      case 2:
        check_dataset(bertrain::parse_evaluate_body(body));
        break;
      default:
        check_dataset(body);
    }
  } catch (const bertrain::ApiError& e) {
    const int s = e.status();
    if (s != 400 && s != 403 && s != 404) __builtin_trap();
    if (!nlohmann::json::accept(bertrain::error_body(e.what(), e.type()))) __builtin_trap();
  }
  return 0;
}
