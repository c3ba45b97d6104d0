// Checks of a training set's labels that do not stop training but that a user should hear about before spending
// the time: labels that look like lists written with another separator than the one in use, labels with too few
// rows to learn from or to check, and labels that differ only in case or spaces. Plain functions over names and counts, so the trainer only prints
// what they return (`bertrain: warning: ...`, once, by rank 0).
#pragma once

#include <string>
#include <vector>

#include "data/batcher.h"

namespace bertrain {

// Labels that contain one of the likely separators '|', ';' and ',' (other than `separator`, the one in use): one
// warning per separator found, naming the first label with it and how many labels have it, and suggesting
// --label-separator. For multi-label training when --label-separator was not given: "cv|nlp" read with the
// default ',' is one label, not two.
std::vector<std::string> label_separator_warnings(const std::vector<std::string>& labels, const std::string& separator);

// Single-label training: labels that read as lists of labels, one warning per separator ('|', ';', ',') whose parts
// recur across labels ("cv,popular" and "nlp,popular"; or a part is a label of its own), suggesting --multi-label
// (and --label-separator for '|' or ';'). Each such combination is trained as a class of its own.
std::vector<std::string> label_list_warnings(const std::vector<std::string>& labels);

// Rows of each of `classes` labels in `examples` (a multi-label row counts once for each of its labels).
std::vector<int> count_label_rows(const std::vector<Example>& examples, int classes);

// One warning for each label with no training rows (the model cannot learn it; e.g. its one row went to
// validation) or fewer than 2 rows in all, naming it and its counts, from the rows of each label in training
// (`train`) and validation (`val`); past kMaxLabelWarnings labels, one line counts the rest.
std::vector<std::string> label_count_warnings(const std::vector<std::string>& labels, const std::vector<int>& train,
                                              const std::vector<int>& val);
inline constexpr std::size_t kMaxLabelWarnings = 10;

// One warning for each group of labels that differ only in ASCII case or in spaces around them ('alpha', 'Alpha ',
// 'ALPHA'): each is a label of its own (as pandas reads them for Made-With-ML), which is seldom what the data meant.
// Names its first 5 members; past kMaxLabelWarnings groups, one line counts the rest.
std::vector<std::string> label_spelling_warnings(const std::vector<std::string>& labels);

}  // namespace bertrain
