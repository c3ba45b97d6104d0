#include "data/tokenizer_loader.h"

#include "core/error.h"
#include "core/files.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer_files.h"

namespace bertrain {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir) {
  const std::string json = model_dir + "/tokenizer.json";
  const std::string vocab = model_dir + "/vocab.txt";
  // Whatever is at the path decides (a directory named tokenizer.json is reported by the loader).
  if (path_exists(json)) return std::make_unique<HfTokenizer>(HfTokenizer::load(json));
  if (path_exists(model_dir + "/vocab.json") && path_exists(model_dir + "/merges.txt")) {
    const std::string source = model_dir + "/vocab.json and merges.txt";
    return std::make_unique<HfTokenizer>(HfTokenizer::from_json(byte_level_bpe_tokenizer_json(model_dir), source));
  }
  if (path_exists(vocab)) {
    if (auto wordpiece = wordpiece_tokenizer_json(model_dir)) {
      return std::make_unique<HfTokenizer>(
          HfTokenizer::from_json(*wordpiece, vocab + " with tokenizer_config.json's settings"));
    }
    return std::make_unique<BertTokenizer>(Vocab::load(vocab));
  }
  if (path_exists(model_dir + "/sentencepiece.bpe.model")) {
    return std::make_unique<HfTokenizer>(HfTokenizer::from_json(sentencepiece_tokenizer_json(model_dir),
                                                                model_dir + "/sentencepiece.bpe.model"));
  }
  for (const char* sentencepiece : {"spiece.model", "sentencepiece.model"}) {
    BERTRAIN_CHECK(!path_exists(model_dir + "/" + sentencepiece),
                   model_dir << "/" << sentencepiece << ": a SentencePiece model, which bertrain does not read: "
                             << tokenizer_json_advice(model_dir));
  }
  BERTRAIN_FAIL(model_dir << ": no tokenizer (the model directory needs tokenizer.json, vocab.json with merges.txt, "
                          << "vocab.txt, or sentencepiece.bpe.model)");
}

std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    return std::make_unique<HfTokenizer>(HfTokenizer::load(path));
  }
  return std::make_unique<BertTokenizer>(Vocab::load(path));
}

}  // namespace bertrain
