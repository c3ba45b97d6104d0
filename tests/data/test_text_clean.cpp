// Made-With-ML's clean_text: hand-written cases for every regex step and its Unicode traps, the
// Python-generated cases of tests/fixtures/tokens/unicode_cases.jsonl, and every row of the real
// dataset.csv / holdout.csv against tests/fixtures/tokens/*.jsonl when $BERTRAIN_DATA_DIR holds them.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/csv.h"
#include "data/text_clean.h"
#include "tests/data_dir.h"
#include "tests/jsonl.h"

namespace bertrain {
namespace {

const std::string kFixtures = std::string(BERTRAIN_FIXTURES_DIR) + "/tokens";

using testing::read_jsonl;

TEST(TextClean, StopwordListIsNltkEnglish) {
  const std::vector<std::string>& words = nltk_english_stopwords();
  ASSERT_EQ(words.size(), 179u);
  EXPECT_EQ(words.front(), "i");
  EXPECT_EQ(words.back(), "wouldn't");
  const testing::DataFile list = testing::find_data_file("madewithml/STOPWORDS.txt");
  if (!list.found) GTEST_SKIP() << list.skip_message << "; the list was only checked by size";
  std::ifstream in(list.path);
  ASSERT_TRUE(in) << "cannot open " << list.path;
  std::vector<std::string> file_words;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) file_words.push_back(line);
  }
  EXPECT_EQ(words, file_words) << "order matters: the regex alternation is tried in list order";
}

TEST(TextClean, HoldoutRowZeroFromTheDataReadme) {
  EXPECT_EQ(clean_text("Diffusion to Vector Reference implementation of Diffusion2Vec (Complenet 2018) built on "
                       "Gensim and NetworkX. "),
            "diffusion vector reference implementation diffusion2vec complenet 2018 built gensim networkx");
}

TEST(TextClean, StopwordsAreWholeWordsWithUnicodeWordBoundaries) {
  // Dataset id 2430: 于 is a word character, so "t" is not a standalone stopword and survives (an ASCII-only
  // \b would delete it).
  EXPECT_EQ(clean_text("Translation \u57fa\u4e8et"), "translation t");
  EXPECT_EQ(clean_text("\u4e2dthe the\u4e2d the"), "the the");
  EXPECT_EQ(clean_text("\u00e9the the\u00e9 x"), "the the x");
  EXPECT_EQ(clean_text("the\u00b2 a\u00b2"), "the a");  // ² is a digit (No): a word character
  EXPECT_EQ(clean_text("the\u0301 x"), "x");            // a combining mark (Mn) is not
  EXPECT_EQ(clean_text("snake_case the_end _the the_"), "snake case the end the the");
  EXPECT_EQ(clean_text("1the the1 the 2nd"), "1the the1 2nd");
}

TEST(TextClean, AlternationIsTriedInListOrder) {
  // "it" comes before "it's" in the list and matches first ("'" is a boundary); "s" is a stopword too.
  EXPECT_EQ(clean_text("it's"), "");
  EXPECT_EQ(clean_text("itself its it isn't x"), "x");
  EXPECT_EQ(clean_text("don't stop"), "stop");
  EXPECT_EQ(clean_text("The model is all you need to"), "model need");
  EXPECT_EQ(clean_text("ThE AND Or NOT nOt"), "");
}

TEST(TextClean, LowercasingBeyondTheSimpleMapping) {
  // İ lowercases to "i" + U+0307 (Python uses SpecialCasing): "i" becomes a standalone stopword and
  // U+0307, not a word character, leaves "the" standalone too.
  EXPECT_EQ(clean_text("\u0130the"), "");
  EXPECT_EQ(clean_text("\u0130x"), "x");
  // KELVIN SIGN lowercases to ASCII 'k'.
  EXPECT_EQ(clean_text("\u212athe \u212a8s"), "kthe k8s");
}

TEST(TextClean, PunctuationWhitespaceAndLinks) {
  EXPECT_EQ(clean_text("hello,world!!(test) [a]{b}"), "hello world test b");
  EXPECT_EQ(clean_text("  a\tb\n\nc\u00a0d\u3000e  "), "b c e");
  // http\S+ runs after the punctuation became spaces: only the "http..." token of a link goes, and the
  // spaces around it stay.
  EXPECT_EQ(clean_text("see https://github.com/a/b for more"), "see  github com b");
  EXPECT_EQ(clean_text("https://madewithml.com"), " madewithml com");
  EXPECT_EQ(clean_text("xhttpy http http2"), "x http ");
  EXPECT_EQ(clean_text(""), "");
  EXPECT_EQ(clean_text("the a an"), "");
}

// Random texts of the cases above (stopwords with apostrophes and \b traps, links, punctuation, underscores,
// Unicode letters, spaces and separators, invalid bytes): cleaned in pieces of any size, the whole text's result.
std::string random_messy_text(std::mt19937* rng, int fragments) {
  static const std::vector<std::string> kPieces = {
      "the", "The", "don't", "you're", "shouldn't", "a", "an", "xthe", "the_x", "theory", "it's", "isn't", "'s",
      "https://github.com/a/b", "httpfoo", "xhttpy", "http", "http2", "hello", "World", "42", "3.14", "_", "'", ",",
      ".", "!", "(", ")", "-", "\u00e9t\u00e9", "\u0130stanbul", "stra\u00dfe", "\u03a3\u039f\u03a3", "\u4e2d\u6587",
      "\u00a0", "\u3000", "\u2028", "\xff", "\xc3", "\xe2\x82", " ", " ", " ", "  ", "\t", "\n"};
  std::uniform_int_distribution<std::size_t> pick(0, kPieces.size() - 1);
  std::string text;
  for (int i = 0; i < fragments; ++i) text += kPieces[pick(*rng)];
  return text;
}

TEST(TextClean, PiecesOfAnySizeGiveTheWholeTextsResult) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    const std::string text = random_messy_text(&rng, 1 + round % 97);
    const std::string whole = clean_text_in_pieces(text, SIZE_MAX, SIZE_MAX);
    for (std::size_t piece : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7}, std::size_t{64}}) {
      ASSERT_EQ(clean_text_in_pieces(text, SIZE_MAX, piece), whole) << "pieces of " << piece << " bytes: " << text;
    }
    ASSERT_EQ(clean_text(text), whole) << text;
  }
}

// With enough_words, the result is the start of the whole one, cut where a token ends, holding more than that many
// words (or all of them).
TEST(TextClean, EnoughWordsGiveTheStartOfTheResult) {
  std::mt19937 rng(11);
  const auto words = [](const std::string& s) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < s.size(); ++i) n += s[i] != ' ' && (i == 0 || s[i - 1] == ' ') ? 1 : 0;
    return n;
  };
  for (int round = 0; round < 200; ++round) {
    const std::string text = random_messy_text(&rng, 50 + round);
    const std::string whole = clean_text(text);
    for (std::size_t enough : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{40}}) {
      for (std::size_t piece : {std::size_t{1}, std::size_t{16}, kCleanPieceBytes}) {
        const std::string start = clean_text_in_pieces(text, enough, piece);
        ASSERT_EQ(whole.compare(0, start.size(), start), 0) << "not the start, " << enough << " words: " << text;
        ASSERT_TRUE(start.size() == whole.size() || whole[start.size()] == ' ') << "a token cut: " << text;
        ASSERT_TRUE(start.size() == whole.size() || words(start) > enough) << enough << " words: " << start;
      }
    }
  }
  // A 24 MB text of words: 50 words asked, one 64 KiB piece cleaned.
  std::string big;
  for (int i = 0; i < 2'000'000; ++i) big += "word" + std::to_string(i % 10) + " x ";
  const std::string start = clean_text(big, 50);
  EXPECT_GT(words(start), 50u);
  EXPECT_LT(start.size(), 2 * kCleanPieceBytes);
  EXPECT_EQ(clean_text(big).compare(0, start.size(), start), 0);
}

TEST(TextClean, InvalidUtf8IsASeparator) {
  EXPECT_EQ(clean_text(std::string("ab\xff" "cd \xc3 the\xe2\x82")), "ab cd");
}

TEST(TextClean, UnicodeCasesFromPython) {
  int checked = 0;
  for (const nlohmann::json& c : read_jsonl(kFixtures + "/unicode_cases.jsonl")) {
    if (!c.contains("clean")) continue;
    EXPECT_EQ(clean_text(c["text"].get<std::string>()), c["clean"].get<std::string>()) << "case " << c["name"];
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

// Every row of the real data: clean_text(title + " " + description) against the Python output.
void check_split(const std::string& split) {
  const testing::DataFile csv = testing::find_data_file("madewithml/" + split + ".csv");
  if (!csv.found) GTEST_SKIP() << csv.skip_message;
  const CsvTable table = read_csv(csv.path);
  const int id = table.require_column("id"), title = table.require_column("title"),
            description = table.require_column("description");
  std::map<std::string, std::string> expected;
  for (const nlohmann::json& row : read_jsonl(kFixtures + "/" + split + ".jsonl")) {
    expected[std::to_string(row["id"].get<long long>())] = row["clean"].get<std::string>();
  }
  ASSERT_EQ(expected.size(), table.rows.size()) << split << ".jsonl and " << csv.path << " differ in rows";
  int mismatches = 0;
  for (const std::vector<std::string>& row : table.rows) {
    const auto it = expected.find(row[static_cast<std::size_t>(id)]);
    ASSERT_NE(it, expected.end()) << "id " << row[static_cast<std::size_t>(id)] << " not in the fixture";
    const std::string got = clean_text(row[static_cast<std::size_t>(title)] + " " + row[static_cast<std::size_t>(description)]);
    if (got != it->second && ++mismatches <= 5) {
      ADD_FAILURE() << split << " id " << it->first << ":\n  got      '" << got << "'\n  expected '" << it->second << "'";
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(TextClean, EveryDatasetRow) { check_split("dataset"); }
TEST(TextClean, EveryHoldoutRow) { check_split("holdout"); }

// Per-code-point comparison with Python, from make_token_fixtures.py --sweep FILE (not committed).
// Code points unassigned in the reference Python's Unicode but assigned in utf8proc's are counted and
// skipped: they are the expected Unicode-version difference.
TEST(TextClean, UnicodeSweep) {
  const char* path = std::getenv("BERTRAIN_UNICODE_SWEEP");
  if (path == nullptr) GTEST_SKIP() << "SKIPPED: set BERTRAIN_UNICODE_SWEEP to a make_token_fixtures.py --sweep file";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot open " << path;
  std::string line;
  int checked = 0, mismatches = 0, newer = 0;
  while (std::getline(in, line)) {
    const nlohmann::json c = nlohmann::json::parse(line);
    const std::string got = clean_text(c["clean_text"].get<std::string>());
    ++checked;
    if (got == c["clean"].get<std::string>()) continue;
    // Unassigned in the reference Python's Unicode, assigned in utf8proc's.
    if (c["cat"] == "Cn" && utf8proc_category(c["cp"].get<int>()) != UTF8PROC_CATEGORY_CN) {
      ++newer;
      continue;
    }
    if (++mismatches <= 20) {
      ADD_FAILURE() << "U+" << std::hex << c["cp"].get<int>() << std::dec << " (" << c["cat"].get<std::string>()
                    << "): got '" << got << "' expected '" << c["clean"].get<std::string>() << "'";
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << checked << " code points";
  std::printf("clean_text sweep: %d code points, %d mismatches, %d differ only because utf8proc's Unicode is newer\n",
              checked, mismatches, newer);
}

}  // namespace
}  // namespace bertrain
