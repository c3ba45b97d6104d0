// Label warnings (see label_checks.h).
#include "data/label_checks.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "core/ascii.h"
#include "core/count_text.h"
#include "core/error.h"
#include "core/utf8.h"

namespace bertrain {

namespace {

std::string rows(int n) { return std::to_string(n) + (n == 1 ? " row" : " rows"); }

}  // namespace

std::vector<std::string> label_separator_warnings(const std::vector<std::string>& labels, const std::string& separator) {
  std::vector<std::string> warnings;
  for (const char candidate : {'|', ';', ','}) {
    if (separator == std::string(1, candidate)) continue;
    const std::string* first = nullptr;
    std::size_t count = 0;
    for (const std::string& label : labels) {
      if (label.find(candidate) == std::string::npos) continue;
      if (first == nullptr) first = &label;
      ++count;
    }
    if (first == nullptr) continue;
    const std::string quoted = std::string("'") + candidate + "'";
    warnings.push_back("label '" + escape_for_message(*first) + "' contains " + quoted +
                       (count > 1 ? " (as do " + std::to_string(count - 1) + " more of the " +
                                        std::to_string(labels.size()) + " labels)"
                                  : "") +
                       ": labels are split at '" + escape_for_message(separator) + "'; if " + quoted +
                       " separates labels, pass --label-separator " + quoted);
  }
  return warnings;
}

std::vector<std::string> label_list_warnings(const std::vector<std::string>& labels) {
  std::vector<std::string> warnings;
  for (const char candidate : {'|', ';', ','}) {
    // Each label's parts between the separator (one, itself, in a label without it), and in how many labels each
    // part stands.
    std::vector<std::vector<std::string>> parts(labels.size());
    std::unordered_map<std::string, int> labels_with_part;
    std::vector<std::size_t> lists;
    for (std::size_t c = 0; c < labels.size(); ++c) {
      if (labels[c].find(candidate) != std::string::npos) lists.push_back(c);
      for (std::size_t start = 0;;) {
        const std::size_t end = labels[c].find(candidate, start);
        const std::string part =
            ascii_trim(labels[c].substr(start, end == std::string::npos ? std::string::npos : end - start), " \t");
        // A part with a letter: "5,000-10,000" and "1,000-5,000" are ranges that share a "000", not lists.
        const bool word = std::any_of(part.begin(), part.end(),
                                      [](char ch) { return std::isalpha(static_cast<unsigned char>(ch)) != 0; });
        if (word && std::find(parts[c].begin(), parts[c].end(), part) == parts[c].end()) {
          parts[c].push_back(part);
          ++labels_with_part[part];
        }
        if (end == std::string::npos) break;
        start = end + 1;
      }
    }
    // The part of a list that stands in the most labels, when that is two or more.
    const std::string* recurring = nullptr;
    int most = 1;
    for (const std::size_t c : lists) {
      for (const std::string& part : parts[c]) {
        if (labels_with_part.at(part) > most) {
          recurring = &part;
          most = labels_with_part.at(part);
        }
      }
    }
    if (recurring == nullptr) continue;
    const std::string quoted = std::string("'") + candidate + "'";
    warnings.push_back("label '" + escape_for_message(labels[lists.front()]) + "'" +
                       (lists.size() > 1 ? " (and " + std::to_string(lists.size() - 1) + " more of the " +
                                               std::to_string(labels.size()) + " labels)"
                                         : "") +
                       " reads as a list of labels: '" + escape_for_message(*recurring) + "' stands in " +
                       std::to_string(most) + " labels, parts between " + quoted + "; each is trained as one class. "
                       "If a row has several labels, pass --multi-label" +
                       (candidate == ',' ? "" : " --label-separator " + quoted));
  }
  return warnings;
}

std::vector<std::string> label_spelling_warnings(const std::vector<std::string>& labels) {
  std::unordered_map<std::string, std::vector<std::size_t>> groups;
  std::vector<std::string> order;  // the keys in the order their first label comes
  for (std::size_t c = 0; c < labels.size(); ++c) {
    std::string key = ascii_lower(ascii_trim(labels[c], " \t"));
    std::vector<std::size_t>& members = groups[key];
    if (members.empty()) order.push_back(std::move(key));
    members.push_back(c);
  }
  std::vector<std::string> warnings;
  std::size_t more = 0;
  for (const std::string& k : order) {
    const std::vector<std::size_t>& members = groups.at(k);
    if (members.size() < 2) continue;
    if (warnings.size() >= kMaxLabelWarnings) {
      ++more;
      continue;
    }
    std::string names;
    for (std::size_t i = 0; i < members.size() && i < 5; ++i) {
      names += (i == 0 ? "" : i + 1 == members.size() ? " and " : ", ") + std::string("'") +
               escape_for_message(labels[members[i]]) + "'";
    }
    if (members.size() > 5) names += " and " + std::to_string(members.size() - 5) + " more";
    warnings.push_back("labels " + names + " differ only in case or in spaces around them: each is a label of its "
                       "own (write them alike in the data if they are one)");
  }
  if (more > 0) warnings.push_back("and " + count_of(more, "more group") + " of labels that differ only so");
  return warnings;
}

std::vector<int> count_label_rows(const std::vector<Example>& examples, int classes) {
  std::vector<int> counts(static_cast<std::size_t>(classes), 0);
  for (const Example& e : examples) {
    for (int label : e.labels) {
      BERTRAIN_CHECK(label >= 0 && label < classes, "label index " << label << " outside [0, " << classes << ")");
      ++counts[static_cast<std::size_t>(label)];
    }
  }
  return counts;
}

std::vector<std::string> label_count_warnings(const std::vector<std::string>& labels, const std::vector<int>& train,
                                              const std::vector<int>& val) {
  BERTRAIN_CHECK(train.size() == labels.size() && val.size() == labels.size(),
                 "label counts for " << train.size() << " and " << val.size() << " labels, expected " << labels.size());
  std::vector<std::string> warnings;
  std::size_t more = 0;
  for (std::size_t c = 0; c < labels.size(); ++c) {
    const int t = train[c], v = val[c];
    std::string warning;
    const std::string name = "label '" + escape_for_message(labels[c]) + "'";
    if (t == 0) {
      warning = name + " has no training rows (" + (v == 0 ? "and none for validation" : rows(v) + " for validation") +
                "): the model cannot learn it";
    } else if (t + v < 2) {
      warning = name + " has only 1 row (for training, none for validation): too few to learn it or to check it";
    } else {
      continue;
    }
    if (warnings.size() < kMaxLabelWarnings) {
      warnings.push_back(warning);
    } else {
      ++more;
    }
  }
  if (more > 0) {
    warnings.push_back("and " + count_of(more, "more label") +
                       " with no training rows or only 1 row");
  }
  return warnings;
}

}  // namespace bertrain
