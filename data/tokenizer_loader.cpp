#include "data/tokenizer_loader.h"

#include "core/error.h"
#include "core/files.h"
#include "data/hf_tokenizer.h"

namespace bertrain {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir) {
  const std::string json = model_dir + "/tokenizer.json";
  const std::string vocab = model_dir + "/vocab.txt";
  // Whatever is at the path decides (a directory named tokenizer.json is reported by the loader).
  if (path_exists(json)) return std::make_unique<HfTokenizer>(HfTokenizer::load(json));
  if (path_exists(vocab)) return std::make_unique<BertTokenizer>(Vocab::load(vocab));
  BERTRAIN_FAIL(model_dir << ": no tokenizer (the model directory needs tokenizer.json or vocab.txt)");
}

std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    return std::make_unique<HfTokenizer>(HfTokenizer::load(path));
  }
  return std::make_unique<BertTokenizer>(Vocab::load(path));
}

}  // namespace bertrain
