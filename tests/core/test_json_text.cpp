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

// A value's depth is the number of containers around it: 512 is taken, 513 refused, a scalar or an empty container.
TEST(JsonText, TheBoundIsOnEveryValuesDepth) {
  bool too_deep = true;
  EXPECT_EQ(parse_json_bounded(nested_arrays(kMaxJsonDepth + 1), &too_deep), nlohmann::json::parse(nested_arrays(513)));
  EXPECT_FALSE(too_deep);
  const auto wrapped = [](const std::string& value, int containers) {
    return std::string(containers, '[') + value + std::string(containers, ']');
  };
  for (const char* value : {"1", "\"s\"", "null", "{}", "[]"}) {
    parse_json_bounded(wrapped(value, kMaxJsonDepth), &too_deep);
    EXPECT_FALSE(too_deep) << value;
    parse_json_bounded(wrapped(value, kMaxJsonDepth + 1), &too_deep);
    EXPECT_TRUE(too_deep) << value;
  }
  parse_json_bounded(wrapped("{\"key\": 1}", kMaxJsonDepth), &too_deep);
  EXPECT_TRUE(too_deep);  // the key and its value are one deeper than their object
}

// Wide is not deep, and costs time in proportion: an array of 100,000 objects (a serve request's size) took time n²
// through nlohmann's callback parser (minutes at 200,000).
TEST(JsonText, AWideArrayOfObjectsParsesInOnePass) {
  std::string text = "{\"texts\": [\"a\"], \"pad\": [{}";
  for (int i = 1; i < 100000; ++i) text += ", {\"k\": [1]}";
  text += "]}";
  bool too_deep = true;
  const nlohmann::json value = parse_json_bounded(text, &too_deep);
  EXPECT_FALSE(too_deep);
  EXPECT_EQ(value.at("pad").size(), 100000u);
  EXPECT_EQ(value, nlohmann::json::parse(text));
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
