// The classifier's label set: class index = position in the sorted unique tags of the training data
// (computer-vision 0, mlops 1, natural-language-processing 2, other 3 on Made-With-ML's data). It is
// stored with the model as config.json id2label / label2id and reused by evaluation and prediction.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

namespace bertrain {

class LabelSet {
 public:
  // Sorted unique values of `tags` (byte order, as Python's sorted on str for ASCII tags; as numbers when every tag
  // is an integer: "2" before "10").
  static LabelSet from_tags(const std::vector<std::string>& tags);
  // The labels in index order, e.g. from config.json.
  explicit LabelSet(std::vector<std::string> names);
  LabelSet() = default;

  int size() const { return static_cast<int>(names_.size()); }
  const std::vector<std::string>& names() const { return names_; }
  const std::string& name(int index) const { return names_.at(static_cast<std::size_t>(index)); }
  // Index of `tag`, or -1.
  int find(const std::string& tag) const;
  // Index of `tag`; throws Error "unknown tag 'x' in <where> (the model knows: a, b, c)" (the first 20 of many).
  int require(const std::string& tag, const std::string& where) const;
  // The sorted indices of `tags` (a row's labels), each as require() finds it.
  std::vector<int> require_all(const std::vector<std::string>& tags, const std::string& where) const;

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, int> index_;  // name -> position: models may have tens of thousands of labels
};

}  // namespace bertrain
