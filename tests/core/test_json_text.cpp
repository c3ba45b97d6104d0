// core/json_text.h: JSON from outside the program parsed with a bound on nesting. nlohmann's copy and dump recurse
// once per level, so a value nested 200,000 levels deep, parsed unbounded and copied, overflowed the stack (SIGSEGV);
// bounded, it is refused by name.
#include <gtest/gtest.h>

#include <string>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonText, ValuesUpToTheBoundParseAsJsonParseDoes) {
  const std::string text = R"({"a": [1, {"b": "c"}], "d": null})";
  EXPECT_EQ(parse_json(text, "x.json"), nlohmann::json::parse(text));
  // kMaxJsonDepth levels below the top-level value: kept whole.
  const std::string deepest = "{\"k\": " + nested_arrays(kMaxJsonDepth) + "}";
  bool too_deep = true;
  EXPECT_EQ(parse_json_bounded(deepest, &too_deep), nlohmann::json::parse(deepest));
  EXPECT_FALSE(too_deep);
}

TEST(JsonText, DeeperValuesAreRefusedByName) {
  bool too_deep = false;
  parse_json_bounded(nested_arrays(kMaxJsonDepth + 2), &too_deep);
  EXPECT_TRUE(too_deep);
  // 200,000 levels (400 KB): parsed without building them, refused, no stack overflow.
  const std::string huge = "{\"unused\": " + nested_arrays(200000) + ", \"vocab_size\": 3}";
  try {
    parse_json(huge, "config.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json: JSON nested deeper than 512 levels"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(parse_json_or_discarded(huge).is_discarded());
  too_deep = false;
  EXPECT_TRUE(parse_json_or_discarded(huge, &too_deep).is_discarded());
  EXPECT_TRUE(too_deep);
}

TEST(JsonText, InvalidJsonIsNamedAsBefore) {
  EXPECT_THROW(parse_json("{\"a\": ", "x.json"), Error);
  bool too_deep = true;
  EXPECT_TRUE(parse_json_or_discarded("{\"a\": ", &too_deep).is_discarded());
  EXPECT_FALSE(too_deep);
  testing::TempDir dir("json_text");
  const std::string file = dir.path("deep.json");
  write_file_atomically(file, "[" + nested_arrays(100000) + "]");
  try {
    read_json_file(file);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file + ": JSON nested deeper than"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bertrain
