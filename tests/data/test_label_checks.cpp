// The label warnings of train (data/label_checks.h): labels that look like lists written with another
// separator, labels with no training rows or a single row, and labels that differ only in case or spaces.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "data/label_checks.h"

namespace bertrain {
namespace {

using Strings = std::vector<std::string>;

TEST(LabelSeparatorWarnings, NameTheLabelAndTheSeparatorItContains) {
  const Strings labels = {"cv|nlp", "mlops", "graphs;time-series", "nlp|speech", "other"};
  EXPECT_EQ(label_separator_warnings(labels, ","),
            (Strings{"label 'cv|nlp' contains '|' (as do 1 more of the 5 labels): labels are split at ','; if '|' "
                     "separates labels, pass --label-separator '|'",
                     "label 'graphs;time-series' contains ';': labels are split at ','; if ';' separates labels, pass "
                     "--label-separator ';'"}));
  // The separator in use is no warning; a label with ',' (from a JSON array) is one when ',' is not in use.
  EXPECT_EQ(label_separator_warnings(labels, "|").size(), 1u);
  EXPECT_EQ(label_separator_warnings({"a, b", "c"}, ",").size(), 0u);
  EXPECT_EQ(label_separator_warnings({"a, b", "c"}, "|"),
            (Strings{"label 'a, b' contains ',': labels are split at '|'; if ',' separates labels, pass "
                     "--label-separator ','"}));
  EXPECT_TRUE(label_separator_warnings({"computer-vision", "mlops"}, ",").empty());
  // A control character in a label is escaped, the warning stays one line.
  EXPECT_EQ(label_separator_warnings({"a|b\n"}, ",").at(0).find('\n'), std::string::npos);
}

// Single-label training on labels that are lists (a multi-label file trained without --multi-label): said when a
// part recurs across labels, not for a label that merely holds a separator.
TEST(LabelListWarnings, ListsWhosePartsRecurAreNamed) {
  EXPECT_EQ(label_list_warnings({"computer-vision,popular", "mlops", "mlops,popular", "nlp"}),
            (Strings{"label 'computer-vision,popular' (and 1 more of the 4 labels) reads as a list of labels: "
                     "'popular' stands in 2 labels, parts between ','; each is trained as one class. If a row has "
                     "several labels, pass --multi-label"}));
  // A part that is a label of its own recurs too; '|' also names the separator.
  EXPECT_EQ(label_list_warnings({"cv|nlp", "nlp", "other"}),
            (Strings{"label 'cv|nlp' reads as a list of labels: 'nlp' stands in 2 labels, parts between '|'; each is "
                     "trained as one class. If a row has several labels, pass --multi-label --label-separator '|'"}));
  EXPECT_TRUE(label_list_warnings({"Hello, world", "other", "a;b"}).empty());
  EXPECT_TRUE(label_list_warnings({"1,000-5,000", "5,000-10,000", "10,000+"}).empty());  // ranges, not lists
  EXPECT_TRUE(label_list_warnings({"computer-vision", "mlops"}).empty());
}

TEST(CountLabelRows, CountsEveryLabelOfEveryRow) {
  std::vector<Example> examples(4);
  examples[0].labels = {0};
  examples[1].labels = {0, 2};
  examples[2].labels = {};  // a multi-label row with no label
  examples[3].labels = {2};
  EXPECT_EQ(count_label_rows(examples, 3), (std::vector<int>{2, 0, 2}));
  examples[3].labels = {3};
  EXPECT_THROW(count_label_rows(examples, 3), Error);
}

TEST(LabelCountWarnings, NoTrainingRowsOrASingleRow) {
  const Strings labels = {"computer-vision", "rare", "once", "unseen", "mlops"};
  EXPECT_EQ(label_count_warnings(labels, {12, 0, 1, 0, 2}, {3, 1, 0, 0, 0}),
            (Strings{"label 'rare' has no training rows (1 row for validation): the model cannot learn it",
                     "label 'once' has only 1 row (for training, none for validation): too few to learn it or to "
                     "check it",
                     "label 'unseen' has no training rows (and none for validation): the model cannot learn it"}));
  EXPECT_EQ(label_count_warnings({"a"}, {0}, {2}), (Strings{"label 'a' has no training rows (2 rows for validation): "
                                                            "the model cannot learn it"}));
  EXPECT_TRUE(label_count_warnings({"a", "b"}, {2, 1}, {0, 1}).empty());
  EXPECT_THROW(label_count_warnings({"a", "b"}, {2}, {0, 1}), Error);
}

TEST(LabelCountWarnings, ManyRareLabelsEndInOneLine) {
  Strings labels;
  for (int i = 0; i < 15; ++i) labels.push_back("tag" + std::to_string(i));
  const Strings warnings = label_count_warnings(labels, std::vector<int>(15, 0), std::vector<int>(15, 1));
  ASSERT_EQ(warnings.size(), kMaxLabelWarnings + 1);
  EXPECT_EQ(warnings[0], "label 'tag0' has no training rows (1 row for validation): the model cannot learn it");
  EXPECT_EQ(warnings.back(), "and 5 more labels with no training rows or only 1 row");
}

// 'alpha ', 'ALPHA' and 'alpha' are three labels (pandas reads them so for Made-With-ML): said, once per group.
TEST(LabelSpellingWarnings, LabelsThatDifferOnlyInCaseOrSpacesAreNamed) {
  EXPECT_EQ(label_spelling_warnings({"alpha", "beta", "alpha ", "ALPHA", "gamma", " Beta"}),
            (Strings{"labels 'alpha', 'alpha ' and 'ALPHA' differ only in case or in spaces around them: each is a label "
                     "of its own (write them alike in the data if they are one)",
                     "labels 'beta' and ' Beta' differ only in case or in spaces around them: each is a label of its own "
                     "(write them alike in the data if they are one)"}));
  EXPECT_TRUE(label_spelling_warnings({"computer-vision", "mlops", "natural-language-processing", "other"}).empty());
  EXPECT_TRUE(label_spelling_warnings({"a-b", "a b", "ab"}).empty());  // inner characters differ
  Strings many;
  for (int i = 0; i < 7; ++i) many.push_back(std::string(static_cast<std::size_t>(i), ' ') + "x");
  EXPECT_NE(label_spelling_warnings(many).at(0).find("'    x' and 2 more differ"), std::string::npos)
      << label_spelling_warnings(many).at(0);
  Strings groups;
  for (int g = 0; g < 12; ++g) {
    groups.push_back("l" + std::to_string(g));
    groups.push_back("L" + std::to_string(g));
  }
  const Strings w = label_spelling_warnings(groups);
  ASSERT_EQ(w.size(), kMaxLabelWarnings + 1);
  EXPECT_EQ(w.back(), "and 2 more groups of labels that differ only so");
}

}  // namespace
}  // namespace bertrain
