// The WordPiece tokenizer against Hugging Face's slow BertTokenizer: a small hand-made vocabulary for
// the algorithm, Vocab::load's file rules and errors, and with the SciBERT vocabulary from $BERTRAIN_DATA_DIR
// every row of dataset / holdout plus the Unicode cases of tests/fixtures/tokens (ids from Python).
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "data/csv.h"
#include "data/text_clean.h"
#include "data/tokenizer.h"
#include "tests/data_dir.h"
#include "tests/jsonl.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

const std::string kFixtures = std::string(BERTRAIN_FIXTURES_DIR) + "/tokens";

using Ids = std::vector<int32_t>;

using testing::read_jsonl;

// Files land in one directory that is removed when the test binary exits.
std::string write_temp(const std::string& name, const std::string& content) {
  static const testing::TempDir dir("bertrain_tok");
  const std::string path = dir.path(name);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// Expects `f` to throw an Error whose message contains every fragment.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& s : fragments) EXPECT_NE(message.find(s), std::string::npos) << "'" << s << "' not in: " << message;
  }
}

// A hand-made vocabulary: ids are positions.
const std::vector<std::string> kTinyTokens = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",             // 0-4
    "un", "##aff", "##able", "a", "##a",                      // 5-9
    "aa", "hello", "##o", "hell", "world",                    // 10-14
    ",", "!", "(", ")", "caf",                                // 15-19
    "##e", "naive", "", "x", "##x",                           // 20-24
    "\xcf\x83", "##\xcf\x83", "\xcf\x82", "##\xcf\x82", "b",  // 25-29: σ ##σ ς ##ς b
    "\xe4\xb8\xad", "dup", "dup",                             // 30-32: 中, dup twice
};

BertTokenizer tiny() { return BertTokenizer(Vocab::from_tokens(kTinyTokens)); }

Ids pieces(const BertTokenizer& t, const std::string& word) {
  Ids out;
  t.wordpiece(word, &out);
  return out;
}

TEST(Tokenizer, WordPieceGreedyLongestMatch) {
  const BertTokenizer t = tiny();
  EXPECT_EQ(t.cls_id(), 2);
  EXPECT_EQ(t.sep_id(), 3);
  EXPECT_EQ(t.pad_id(), 0);
  EXPECT_EQ(t.unk_id(), 1);
  EXPECT_EQ(pieces(t, "unaffable"), (Ids{5, 6, 7}));
  EXPECT_EQ(pieces(t, "hello"), (Ids{11}));
  EXPECT_EQ(pieces(t, "helloo"), (Ids{11, 12}));
  EXPECT_EQ(pieces(t, "hellx"), (Ids{13, 24}));
  EXPECT_EQ(pieces(t, "unz"), (Ids{1})) << "a position nothing matches makes the whole word [UNK]";
  EXPECT_EQ(pieces(t, "aaa"), (Ids{10, 9}));
  EXPECT_EQ(pieces(t, "dup"), (Ids{32})) << "a repeated token has the id of its last line";
  EXPECT_EQ(pieces(t, "\xcf\x83\xcf\x83"), (Ids{25, 26}));
  EXPECT_EQ(pieces(t, ""), (Ids{}));
}

TEST(Tokenizer, WordsOver100CodePointsAreUnknown) {
  const BertTokenizer t = tiny();
  Ids expected{10};
  expected.insert(expected.end(), 98, 9);
  EXPECT_EQ(pieces(t, std::string(100, 'a')), expected);
  EXPECT_EQ(pieces(t, std::string(101, 'a')), (Ids{1}));
  // Code points, not bytes: 100 two-byte σ still fit.
  std::string sigmas;
  for (int i = 0; i < 100; ++i) sigmas += "\xcf\x83";
  EXPECT_EQ(pieces(t, sigmas).size(), 100u);
  EXPECT_EQ(pieces(t, sigmas + "\xcf\x83"), (Ids{1}));
}

TEST(Tokenizer, BasicTokenizer) {
  const BertTokenizer t = tiny();
  using Words = std::vector<std::string>;
  EXPECT_EQ(t.basic_tokenize("Hello, World!(x)"), (Words{"hello", ",", "world", "!", "(", "x", ")"}));
  EXPECT_EQ(t.basic_tokenize("Caf\xc3\xa9 Na\xc3\xafve"), (Words{"cafe", "naive"}));
  EXPECT_EQ(t.basic_tokenize(std::string("a\0b\x07" "c\xe2\x80\x8b" "d", 9)), (Words{"abcd"}))
      << "NUL, controls and format characters vanish without splitting";
  EXPECT_EQ(t.basic_tokenize("a\xc2\xa0" "b\te\nf\r\ng"), (Words{"a", "b", "e", "f", "g"}));
  EXPECT_EQ(t.basic_tokenize("x\xe4\xb8\xad" "y"), (Words{"x", "\xe4\xb8\xad", "y"})) << "CJK stands alone";
  EXPECT_EQ(t.basic_tokenize("\xce\x91\xce\xa3 \xce\xa3\xce\x91"), (Words{"\xce\xb1\xcf\x82", "\xcf\x83\xce\xb1"}))
      << "final sigma";
  EXPECT_EQ(t.basic_tokenize("[CLS]"), (Words{"[", "cls", "]"})) << "BasicTokenizer knows no special tokens";
  EXPECT_EQ(t.basic_tokenize(" \t\n"), (Words{}));
}

TEST(Tokenizer, EncodeFramesAndSplitsSpecialTokens) {
  const BertTokenizer t = tiny();
  EXPECT_EQ(t.encode("", 8).ids, (Ids{2, 3}));
  EXPECT_EQ(t.encode("Hello, world!", 16).ids, (Ids{2, 11, 15, 14, 16, 3}));
  EXPECT_EQ(t.encode("hello[SEP]world [MASK]x[cls]", 16).ids, (Ids{2, 11, 3, 14, 4, 23, 1, 1, 1, 3}))
      << "[SEP] and [MASK] are special, \"[cls]\" (lowercase) is not";
  EXPECT_EQ(t.encode("x [UNK] y", 16).ids, (Ids{2, 23, 1, 1, 3}));
  EXPECT_FALSE(t.encode("hello world", 4).truncated);
}

TEST(Tokenizer, TruncationKeepsSep) {
  const BertTokenizer t = tiny();
  const Encoding full = t.encode("unaffable hello world", 64);
  ASSERT_EQ(full.ids, (Ids{2, 5, 6, 7, 11, 14, 3}));
  EXPECT_FALSE(full.truncated);
  EXPECT_FALSE(t.encode("unaffable hello world", 7).truncated);
  const Encoding cut = t.encode("unaffable hello world", 6);
  EXPECT_EQ(cut.ids, (Ids{2, 5, 6, 7, 11, 3}));
  EXPECT_TRUE(cut.truncated);
  const Encoding mid = t.encode("unaffable hello world", 3);  // cuts inside a word's pieces, as HF does
  EXPECT_EQ(mid.ids, (Ids{2, 5, 3}));
  EXPECT_TRUE(mid.truncated);
  const Encoding none = t.encode("hello", 2);
  EXPECT_EQ(none.ids, (Ids{2, 3}));
  EXPECT_TRUE(none.truncated);
  EXPECT_FALSE(t.encode("", 2).truncated);
  expect_error([&] { t.encode("hello", 1); }, {"max_length"});
  // The reusing overload gives the same result and resets the flag.
  Encoding reused;
  t.encode("unaffable hello world", 6, &reused);
  t.encode("hello", 6, &reused);
  EXPECT_EQ(reused.ids, (Ids{2, 11, 3}));
  EXPECT_FALSE(reused.truncated);
}

TEST(Tokenizer, EncodeIsThreadSafe) {
  const BertTokenizer t = tiny();
  const std::string text = "Unaffable, hello W\xc3\xb6rld! \xce\x91\xce\xa3 aaa";
  const Ids expected = t.encode(text, 64).ids;
  std::vector<Ids> got(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) got[static_cast<std::size_t>(i)] = t.encode(text, 64).ids;
    });
  }
  for (std::thread& th : threads) th.join();
  for (const Ids& g : got) EXPECT_EQ(g, expected);
}

TEST(Vocab, FileRules) {
  // Split on '\n' only (U+0085 and '\x1c', line breaks to Python's str.splitlines, stay inside tokens),
  // CRLF's '\r' dropped, empty lines kept, no token after the final newline, the last duplicate wins.
  const Vocab v = Vocab::load(write_temp("rules.txt", "a\nb\r\n\nc\xc2\x85\x1c" "d\na\n"));
  ASSERT_EQ(v.size(), 5);
  EXPECT_EQ(v.token(0), "a");
  EXPECT_EQ(v.token(1), "b");
  EXPECT_EQ(v.token(2), "");
  EXPECT_EQ(v.token(3), "c\xc2\x85\x1c" "d");
  EXPECT_EQ(v.find("a"), 4);
  EXPECT_EQ(v.find(""), 2);
  EXPECT_EQ(v.find("zzz"), -1);
  EXPECT_EQ(Vocab::load(write_temp("nonl.txt", "a\nb")).size(), 2);
  EXPECT_EQ(Vocab::load(write_temp("blank_end.txt", "a\nb\n\n")).size(), 3);
}

TEST(Vocab, ErrorsNameTheFile) {
  const std::string missing = write_temp("exists.txt", "") + ".no_such_vocab.txt";
  expect_error([&] { Vocab::load(missing); }, {missing});
  const std::string empty = write_temp("empty.txt", "");
  expect_error([&] { Vocab::load(empty); }, {empty, "empty"});
  const std::string bad = write_temp("bad_utf8.txt", "[PAD]\nab\xff\n");
  expect_error([&] { Vocab::load(bad); }, {bad + ":2", "UTF-8"});
  // A byte-order mark would be part of [PAD] (as transformers reads it): named, not "no '[PAD]' token".
  const std::string bom = write_temp("bom.txt", "\xEF\xBB\xBF[PAD]\n[UNK]\n[CLS]\n[SEP]\n");
  expect_error([&] { Vocab::load(bom); }, {bom + ":1", "byte-order mark"});
  const std::string no_cls = write_temp("no_cls.txt", "[PAD]\n[UNK]\n[SEP]\nhello\n");
  expect_error([&] { BertTokenizer t(Vocab::load(no_cls)); }, {no_cls, "[CLS]"});
  expect_error([&] { Vocab::from_tokens({"a"}).require("[SEP]"); }, {"in-memory vocabulary", "[SEP]"});
}

// ---- With the SciBERT vocabulary ----------------------------------------------------------------

// $BERTRAIN_DATA_DIR/scibert_scivocab_uncased/vocab.txt; a test that needs it starts with REQUIRE_SCIVOCAB().
const testing::DataFile& scivocab() {
  static const testing::DataFile f = testing::find_data_file("scibert_scivocab_uncased/vocab.txt");
  return f;
}

#define REQUIRE_SCIVOCAB() \
  if (!scivocab().found) GTEST_SKIP() << scivocab().skip_message

const BertTokenizer& scibert() {
  static const BertTokenizer t(Vocab::load(scivocab().path));
  return t;
}

TEST(SciBert, VocabularyFacts) {
  REQUIRE_SCIVOCAB();
  const BertTokenizer& t = scibert();
  EXPECT_EQ(t.vocab().size(), 31090);
  EXPECT_EQ(t.vocab().token(30106), "") << "id 30106 is an empty line";
  EXPECT_EQ(t.vocab().find(""), 30106);
  EXPECT_EQ(t.pad_id(), 0);
  EXPECT_EQ(t.unk_id(), 101);
  EXPECT_EQ(t.cls_id(), 102);
  EXPECT_EQ(t.sep_id(), 103);
  EXPECT_EQ(t.vocab().find("[MASK]"), 104);
  EXPECT_EQ(t.vocab().token(30632), "##\xc2\x86") << "a C1 control character inside a token";
}

TEST(SciBert, HoldoutRowZeroFromTheDataReadme) {
  REQUIRE_SCIVOCAB();
  const std::string clean = "diffusion vector reference implementation diffusion2vec complenet 2018 built gensim networkx";
  EXPECT_EQ(scibert().encode(clean, 512).ids,
            (Ids{102, 4905, 2069, 2470, 2848, 4905, 30132, 22081, 691, 4324, 7491, 5896, 341, 6136, 934, 30137, 103}));
}

TEST(SciBert, TruncationOnRealText) {
  REQUIRE_SCIVOCAB();
  const std::string clean = "diffusion vector reference implementation diffusion2vec complenet 2018 built gensim networkx";
  const Encoding e = scibert().encode(clean, 8);
  EXPECT_EQ(e.ids, (Ids{102, 4905, 2069, 2470, 2848, 4905, 30132, 103}));
  EXPECT_TRUE(e.truncated);
  EXPECT_FALSE(scibert().encode(clean, 17).truncated);
  EXPECT_TRUE(scibert().encode(clean, 16).truncated);
}

TEST(SciBert, UnicodeCasesFromPython) {
  REQUIRE_SCIVOCAB();
  int checked = 0;
  for (const nlohmann::json& c : read_jsonl(kFixtures + "/unicode_cases.jsonl")) {
    if (!c.contains("ids")) continue;
    EXPECT_EQ(scibert().encode(c["text"].get<std::string>(), 512).ids, c["ids"].get<Ids>()) << "case " << c["name"];
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

// Every row: the fixture's cleaned text tokenizes to the fixture's ids; and the whole pipeline from the
// CSV (clean_text, then encode) gives the same ids.
void check_split(const std::string& split) {
  REQUIRE_SCIVOCAB();
  const std::vector<nlohmann::json> rows = read_jsonl(kFixtures + "/" + split + ".jsonl");
  ASSERT_FALSE(rows.empty());
  std::map<std::string, Ids> by_id;
  int mismatches = 0;
  std::size_t longest = 0;
  for (const nlohmann::json& row : rows) {
    const Ids expected = row["ids"].get<Ids>();
    const Ids got = scibert().encode(row["clean"].get<std::string>(), 512).ids;
    longest = std::max(longest, got.size());
    if (got != expected && ++mismatches <= 5) ADD_FAILURE() << split << " id " << row["id"] << ": ids differ";
    by_id[std::to_string(row["id"].get<long long>())] = expected;
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_LE(longest, 40u) << "the data README: the longest sequence is 40 tokens";

  const testing::DataFile csv = testing::find_data_file("madewithml/" + split + ".csv");
  if (!csv.found) GTEST_SKIP() << csv.skip_message;
  const CsvTable table = read_csv(csv.path);
  const auto id = static_cast<std::size_t>(table.require_column("id"));
  const auto title = static_cast<std::size_t>(table.require_column("title"));
  const auto description = static_cast<std::size_t>(table.require_column("description"));
  ASSERT_EQ(table.rows.size(), rows.size());
  for (const std::vector<std::string>& row : table.rows) {
    const auto it = by_id.find(row[id]);
    ASSERT_NE(it, by_id.end()) << "id " << row[id] << " not in the fixture";
    const Encoding e = scibert().encode(clean_text(row[title] + " " + row[description]), 512);
    EXPECT_EQ(e.ids, it->second) << split << " id " << row[id];
    EXPECT_FALSE(e.truncated);
  }
}

TEST(SciBert, EveryDatasetRow) { check_split("dataset"); }
TEST(SciBert, EveryHoldoutRow) { check_split("holdout"); }

// Per-code-point comparison with Python, from make_token_fixtures.py --sweep FILE (not committed).
// Code points unassigned in the reference Python's Unicode but assigned in utf8proc's are counted and
// skipped: they are the expected Unicode-version difference.
TEST(SciBert, UnicodeSweep) {
  REQUIRE_SCIVOCAB();
  const char* path = std::getenv("BERTRAIN_UNICODE_SWEEP");
  if (path == nullptr) GTEST_SKIP() << "SKIPPED: set BERTRAIN_UNICODE_SWEEP to a make_token_fixtures.py --sweep file";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot open " << path;
  std::string line;
  int checked = 0, mismatches = 0, newer = 0, fast_differs = 0;
  while (std::getline(in, line)) {
    const nlohmann::json c = nlohmann::json::parse(line);
    const Ids expected = c["ids"].get<Ids>();
    fast_differs += c["fast_ids"].get<Ids>() != expected;
    const Ids got = scibert().encode(c["text"].get<std::string>(), 100000).ids;
    ++checked;
    if (got == expected) continue;
    if (c["cat"] == "Cn" && utf8proc_category(c["cp"].get<int>()) != UTF8PROC_CATEGORY_CN) {
      ++newer;
      continue;
    }
    if (++mismatches <= 20) {
      ADD_FAILURE() << "U+" << std::hex << c["cp"].get<int>() << std::dec << " (" << c["cat"].get<std::string>()
                    << ") text " << c["text"].dump() << ": got " << ::testing::PrintToString(got) << " expected "
                    << ::testing::PrintToString(expected);
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << checked << " code points";
  std::printf("tokenizer sweep: %d code points, %d mismatches, %d differ only because utf8proc's Unicode is newer; "
              "the fast tokenizer differs from the slow one on %d\n",
              checked, mismatches, newer, fast_differs);
}

}  // namespace
}  // namespace bertrain
