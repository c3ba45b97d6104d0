// Tests for the safetensors reader and writer: round trips, hand-encoded F16/BF16/F64 values,
// unaligned data, and one hand-built malformed file per validation rule (each error must name the
// file, the tensor and what was expected).
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

namespace fs = std::filesystem;

// Appends the little-endian bytes of `value` (the format's byte order).
template <typename T>
void put(std::string* out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out->append(bytes, sizeof(T));
}

std::string u64_le(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}

// A safetensors file as bytes: header length (the real one unless overridden), header, data.
std::string file_bytes(const std::string& header, const std::string& data, uint64_t header_len = UINT64_MAX) {
  return u64_le(header_len == UINT64_MAX ? header.size() : header_len) + header + data;
}

// One header entry: "name": {"dtype": .., "shape": .., "data_offsets": ..}, with JSON fragments as given.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

class SafetensorsTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string write_raw(const std::string& name, const std::string& bytes) const {
    const std::string p = path(name);
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }

  static std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // Writes `bytes` as `name`, opens it, and checks that the Error names the file and has every
  // expected fragment. Returns the message for further checks.
  std::string expect_rejected(const std::string& name, const std::string& bytes,
                              std::initializer_list<std::string> fragments) const {
    const std::string p = write_raw(name, bytes);
    try {
      SafetensorsFile file(p);
      ADD_FAILURE() << name << ": expected bertrain::Error, but the file was accepted";
      return "";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(name), std::string::npos) << "message does not name the file: " << msg;
      for (const std::string& f : fragments) {
        EXPECT_NE(msg.find(f), std::string::npos) << "message lacks \"" << f << "\": " << msg;
      }
      return msg;
    }
  }

  testing::TempDir temp_{"bertrain_safetensors"};
  const fs::path dir_ = temp_.path();
};

// Expects `fn` to throw bertrain::Error whose message has every fragment.
template <typename Fn>
void expect_error(Fn fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected bertrain::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& f : fragments) {
      EXPECT_NE(msg.find(f), std::string::npos) << "message lacks \"" << f << "\": " << msg;
    }
  }
}

// Bitwise float comparison, so -0.0 vs 0.0 and NaN payloads are checked too.
uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// ---------------------------------------------------------------------------------------------
// Round trips and value decoding

TEST_F(SafetensorsTest, RoundTripF32I64F16BF16AndMetadata) {
  const std::vector<float> w = {1.5f, -2.25f, 3.0e-8f, 1.0e30f, -0.0f, 42.0f};
  const std::vector<int64_t> ids = {0, -1, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  const std::vector<uint16_t> half = {0x3C00, 0xC000, 0x0001};  // 1, -2, 2^-24
  const std::vector<uint16_t> bf = {0x3F80, 0x4049, 0xC040, 0x0000};  // 1, 3.140625, -3, 0
  const int64_t scalar = 7;

  SafetensorsWriter writer;
  writer.add_f32("encoder.weight", {2, 3}, w.data());
  writer.add_i64("input_ids", {4}, ids.data());
  writer.add("half", DType::F16, {3}, half.data());
  writer.add("brain", DType::BF16, {2, 2}, bf.data());
  writer.add_i64("step", {}, &scalar);
  writer.add_f32("empty", {0, 5}, nullptr);  // zero elements: begin == end
  writer.set_metadata("format", "pt");
  writer.set_metadata("note", "naïve ✓");
  const std::string p = path("roundtrip.safetensors");
  writer.write(p);

  SafetensorsFile file(p);
  EXPECT_EQ(file.path(), p);
  std::vector<std::string> names;
  for (const TensorInfo& t : file.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"brain", "empty", "encoder.weight", "half", "input_ids", "step"}));
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "naïve ✓"}}));

  const TensorInfo& wi = file.info("encoder.weight");
  EXPECT_EQ(wi.dtype, DType::F32);
  EXPECT_EQ(wi.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(wi.numel(), 6);
  EXPECT_EQ(wi.end - wi.begin, 24u);
  const std::vector<float> w_back = file.read_float("encoder.weight");
  ASSERT_EQ(w_back.size(), w.size());
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_EQ(bits(w_back[i]), bits(w[i])) << "element " << i;
  EXPECT_EQ(std::memcmp(file.raw("encoder.weight"), w.data(), 24), 0);

  EXPECT_EQ(file.read_int("input_ids"), ids);
  EXPECT_EQ(file.info("input_ids").dtype, DType::I64);
  EXPECT_EQ(file.read_float("half"), (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24)}));
  EXPECT_EQ(file.read_float("brain"), (std::vector<float>{1.0f, 3.140625f, -3.0f, 0.0f}));
  EXPECT_EQ(file.info("brain").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(file.info("step").shape, std::vector<int64_t>{});
  EXPECT_EQ(file.info("step").numel(), 1);
  EXPECT_EQ(file.read_int("step"), std::vector<int64_t>{7});
  EXPECT_EQ(file.info("empty").numel(), 0);
  EXPECT_EQ(file.info("empty").begin, file.info("empty").end);
  EXPECT_TRUE(file.read_float("empty").empty());
  EXPECT_TRUE(file.contains("half"));
  EXPECT_FALSE(file.contains("missing"));

  // Data follows the header contiguously in name order.
  uint64_t expected_begin = 0;
  for (const TensorInfo& t : file.tensors()) {
    EXPECT_EQ(t.begin, expected_begin) << t.name;
    expected_begin = t.end;
  }
}

TEST_F(SafetensorsTest, WrittenHeaderIsSpacePaddedToMultipleOf8) {
  const float v = 1.0f;
  int padded_files = 0;
  // Names of every length mod 8, so at least some headers need padding.
  for (int len = 1; len <= 8; ++len) {
    SafetensorsWriter writer;
    writer.add_f32(std::string(static_cast<std::size_t>(len), 'x'), {1}, &v);
    if (len % 2 == 0) writer.set_metadata("k", "v");
    const std::string p = path("pad" + std::to_string(len) + ".safetensors");
    writer.write(p);
    const std::string bytes = slurp(p);
    ASSERT_GE(bytes.size(), 8u);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
    EXPECT_EQ((8 + n) % 8, 0u) << "header length " << n;
    ASSERT_EQ(bytes.size(), 8 + n + sizeof(float));
    const std::string header = bytes.substr(8, n);
    EXPECT_EQ(header.front(), '{');
    const std::size_t close = header.rfind('}');
    ASSERT_NE(close, std::string::npos);
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos) << "padding is not spaces: " << header;
    if (close + 1 < header.size()) ++padded_files;
    // "__metadata__" is written only when there is metadata, and then first.
    EXPECT_EQ(header.find("\"__metadata__\"") == 1, len % 2 == 0) << header;
    EXPECT_EQ(header.find("__metadata__") == std::string::npos, len % 2 == 1) << header;
  }
  EXPECT_GT(padded_files, 0);
}

TEST_F(SafetensorsTest, ReadsHandEncodedF16) {
  const std::vector<uint16_t> h = {
      0x3C00,  // 1
      0xC000,  // -2
      0x7BFF,  // 65504, largest finite
      0x0400,  // 2^-14, smallest normal
      0x0001,  // 2^-24, smallest subnormal
      0x03FF,  // 1023 * 2^-24, largest subnormal
      0x8000,  // -0
      0x7C00,  // inf
      0xFC00,  // -inf
      0x7E00,  // NaN
      0x3555,  // 0.333251953125
  };
  std::string data;
  for (uint16_t x : h) put(&data, x);
  const std::string header = "{" + entry("h", "F16", "[11]", "[0,22]") + "}";
  SafetensorsFile file(write_raw("f16.safetensors", file_bytes(header, data)));
  const std::vector<float> f = file.read_float("h");
  ASSERT_EQ(f.size(), 11u);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -2.0f);
  EXPECT_EQ(f[2], 65504.0f);
  EXPECT_EQ(f[3], std::ldexp(1.0f, -14));
  EXPECT_EQ(f[4], std::ldexp(1.0f, -24));
  EXPECT_EQ(f[5], std::ldexp(1023.0f, -24));
  EXPECT_EQ(bits(f[6]), 0x80000000u);
  EXPECT_TRUE(std::isinf(f[7]) && f[7] > 0);
  EXPECT_TRUE(std::isinf(f[8]) && f[8] < 0);
  EXPECT_TRUE(std::isnan(f[9]));
  EXPECT_EQ(f[10], 0.333251953125f);
}

TEST_F(SafetensorsTest, ReadsHandEncodedBF16) {
  const std::vector<uint16_t> b = {0x3F80, 0xC040, 0x4049, 0x7F80, 0xFF80, 0x7FC0, 0x8000, 0x0001, 0x7F7F};
  std::string data;
  for (uint16_t x : b) put(&data, x);
  const std::string header = "{" + entry("b", "BF16", "[9]", "[0,18]") + "}";
  SafetensorsFile file(write_raw("bf16.safetensors", file_bytes(header, data)));
  const std::vector<float> f = file.read_float("b");
  ASSERT_EQ(f.size(), 9u);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -3.0f);
  EXPECT_EQ(f[2], 3.140625f);
  EXPECT_TRUE(std::isinf(f[3]) && f[3] > 0);
  EXPECT_TRUE(std::isinf(f[4]) && f[4] < 0);
  EXPECT_TRUE(std::isnan(f[5]));
  EXPECT_EQ(bits(f[6]), 0x80000000u);
  EXPECT_EQ(f[7], std::ldexp(1.0f, -133));  // smallest bf16 subnormal
  EXPECT_EQ(f[8], 0x1.FEp127f);             // largest finite bf16
}

TEST_F(SafetensorsTest, ReadsHandEncodedF64) {
  std::string data;
  for (double d : {1.5, -0.1, 1e300, -1e-50, 3.0}) put(&data, d);
  const std::string header = "{" + entry("d", "F64", "[5]", "[0,40]") + "}";
  SafetensorsFile file(write_raw("f64.safetensors", file_bytes(header, data)));
  std::vector<float> f(5);
  file.read_float_into("d", f.data(), f.size());
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], static_cast<float>(-0.1));
  EXPECT_TRUE(std::isinf(f[2]) && f[2] > 0);  // out of float range
  EXPECT_EQ(bits(f[3]), 0x80000000u);         // underflows to -0
  EXPECT_EQ(f[4], 3.0f);
}

TEST_F(SafetensorsTest, ReadsUnalignedData) {
  // A 1-byte tensor first puts every following tensor at an odd offset; reads must not assume alignment.
  std::string data;
  put<uint8_t>(&data, 9);
  put(&data, 2.5f);
  put<int64_t>(&data, -123456789012345);
  put(&data, -7.25);
  put<uint16_t>(&data, 0x3C00);
  const std::string header = "{" + entry("a_byte", "U8", "[1]", "[0,1]") + "," + entry("b_f32", "F32", "[1]", "[1,5]") +
                             "," + entry("c_i64", "I64", "[1]", "[5,13]") + "," + entry("d_f64", "F64", "[1]", "[13,21]") +
                             "," + entry("e_f16", "F16", "[1]", "[21,23]") + "}";
  SafetensorsFile file(write_raw("unaligned.safetensors", file_bytes(header + " ", data)));
  EXPECT_EQ(file.read_int("a_byte"), std::vector<int64_t>{9});
  EXPECT_EQ(file.read_float("b_f32"), std::vector<float>{2.5f});
  EXPECT_EQ(file.read_int("c_i64"), std::vector<int64_t>{-123456789012345});
  EXPECT_EQ(file.read_float("d_f64"), std::vector<float>{-7.25f});
  EXPECT_EQ(file.read_float("e_f16"), std::vector<float>{1.0f});
}

TEST_F(SafetensorsTest, ReadIntAllIntegerDTypes) {
  const uint8_t b[] = {0, 1, 2};
  const uint8_t u8[] = {255};
  const int8_t i8[] = {-128};
  const int16_t i16[] = {-300};
  const uint16_t u16[] = {65535};
  const int32_t i32[] = {-70000};
  const uint32_t u32[] = {4000000000u};
  const uint64_t u64[] = {static_cast<uint64_t>(std::numeric_limits<int64_t>::max())};
  SafetensorsWriter writer;
  writer.add("bool", DType::BOOL, {3}, b);
  writer.add("u8", DType::U8, {1}, u8);
  writer.add("i8", DType::I8, {1}, i8);
  writer.add("i16", DType::I16, {1}, i16);
  writer.add("u16", DType::U16, {1}, u16);
  writer.add("i32", DType::I32, {1}, i32);
  writer.add("u32", DType::U32, {1}, u32);
  writer.add("u64", DType::U64, {1}, u64);
  const std::string p = path("ints.safetensors");
  writer.write(p);
  SafetensorsFile file(p);
  EXPECT_EQ(file.read_int("bool"), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(file.read_int("u8"), std::vector<int64_t>{255});
  EXPECT_EQ(file.read_int("i8"), std::vector<int64_t>{-128});
  EXPECT_EQ(file.read_int("i16"), std::vector<int64_t>{-300});
  EXPECT_EQ(file.read_int("u16"), std::vector<int64_t>{65535});
  EXPECT_EQ(file.read_int("i32"), std::vector<int64_t>{-70000});
  EXPECT_EQ(file.read_int("u32"), std::vector<int64_t>{4000000000});
  EXPECT_EQ(file.read_int("u64"), std::vector<int64_t>{std::numeric_limits<int64_t>::max()});
  for (DType d : {DType::BOOL, DType::U8, DType::I8, DType::I16, DType::U16, DType::I32, DType::U32, DType::I64,
                  DType::U64}) {
    EXPECT_FALSE(dtype_is_float(d)) << dtype_name(d);
  }
}

TEST_F(SafetensorsTest, EmptyFileAndNullMetadataAreAccepted) {
  SafetensorsFile empty(write_raw("empty.safetensors", file_bytes("{}      ", "")));
  EXPECT_TRUE(empty.tensors().empty());
  EXPECT_TRUE(empty.metadata().empty());
  // The reference reads "__metadata__": null as no metadata.
  SafetensorsFile null_meta(write_raw("nullmeta.safetensors", file_bytes("{\"__metadata__\":null}", "")));
  EXPECT_TRUE(null_meta.metadata().empty());
  // Unknown fields in an entry are ignored, as in the reference.
  SafetensorsFile extra(write_raw(
      "extra.safetensors", file_bytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", "z")));
  EXPECT_EQ(extra.read_int("a"), std::vector<int64_t>{'z'});
}

TEST_F(SafetensorsTest, MoveKeepsMappingAlive) {
  const float v[] = {4.0f, 5.0f};
  SafetensorsWriter writer;
  writer.add_f32("v", {2}, v);
  writer.write(path("a.safetensors"));
  writer.write(path("b.safetensors"));
  SafetensorsFile a(path("a.safetensors"));
  SafetensorsFile moved(std::move(a));
  EXPECT_EQ(moved.read_float("v"), (std::vector<float>{4.0f, 5.0f}));
  SafetensorsFile b(path("b.safetensors"));
  b = std::move(moved);  // releases b's own mapping
  EXPECT_EQ(b.read_float("v"), (std::vector<float>{4.0f, 5.0f}));
  EXPECT_EQ(b.path(), path("a.safetensors"));
}

// ---------------------------------------------------------------------------------------------
// Reader errors on valid files

TEST_F(SafetensorsTest, ReadFloatOnIntegerTensorIsError) {
  const int64_t ids[] = {1, 2};
  SafetensorsWriter writer;
  writer.add_i64("input_ids", {2}, ids);
  writer.write(path("int_as_float.safetensors"));
  SafetensorsFile file(path("int_as_float.safetensors"));
  expect_error([&] { file.read_float("input_ids"); }, {"int_as_float.safetensors", "'input_ids'", "I64", "read_float"});
  std::vector<float> out(2);
  expect_error([&] { file.read_float_into("input_ids", out.data(), 2); }, {"'input_ids'", "I64"});
}

TEST_F(SafetensorsTest, ReadIntOnFloatTensorIsError) {
  const float v[] = {1.0f};
  SafetensorsWriter writer;
  writer.add_f32("bias", {1}, v);
  writer.write(path("float_as_int.safetensors"));
  SafetensorsFile file(path("float_as_int.safetensors"));
  expect_error([&] { file.read_int("bias"); }, {"float_as_int.safetensors", "'bias'", "F32", "read_int"});
}

TEST_F(SafetensorsTest, ReadIntU64AboveInt64MaxIsError) {
  const uint64_t v[] = {1, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1};
  SafetensorsWriter writer;
  writer.add("big", DType::U64, {2}, v);
  writer.write(path("u64.safetensors"));
  SafetensorsFile file(path("u64.safetensors"));
  expect_error([&] { file.read_int("big"); }, {"u64.safetensors", "'big'", "element 1", "9223372036854775808"});
}

TEST_F(SafetensorsTest, ReadFloatIntoWrongCountIsError) {
  const float v[] = {1.0f, 2.0f, 3.0f};
  SafetensorsWriter writer;
  writer.add_f32("w", {3}, v);
  writer.write(path("count.safetensors"));
  SafetensorsFile file(path("count.safetensors"));
  std::vector<float> out(2);
  expect_error([&] { file.read_float_into("w", out.data(), out.size()); },
               {"count.safetensors", "'w'", "3 elements", "holds 2"});
}

TEST_F(SafetensorsTest, MissingTensorIsError) {
  SafetensorsFile file(write_raw("none.safetensors", file_bytes("{}", "")));
  expect_error([&] { file.info("bert.embeddings.word_embeddings.weight"); },
               {"none.safetensors", "'bert.embeddings.word_embeddings.weight'"});
  expect_error([&] { file.read_float("nope"); }, {"'nope'"});
  expect_error([&] { file.raw("nope"); }, {"'nope'"});
}

TEST_F(SafetensorsTest, NonexistentFileIsError) {
  const std::string p = path("does_not_exist.safetensors");
  expect_error([&] { SafetensorsFile file(p); }, {p, "No such file or directory"});
  expect_error([&] { SafetensorsFile file(dir_.string()); }, {dir_.string(), "not a regular file"});
}

// ---------------------------------------------------------------------------------------------
// Writer errors

TEST_F(SafetensorsTest, WriterRejectsDuplicateName) {
  const float v[] = {1.0f};
  SafetensorsWriter writer;
  writer.add_f32("classifier.weight", {1}, v);
  expect_error([&] { writer.add_f32("classifier.weight", {1}, v); }, {"'classifier.weight'", "twice"});
}

TEST_F(SafetensorsTest, WriterRejectsMetadataName) {
  const float v[] = {1.0f};
  SafetensorsWriter writer;
  expect_error([&] { writer.add_f32("__metadata__", {1}, v); }, {"__metadata__", "reserved"});
}

TEST_F(SafetensorsTest, WriterRejectsNegativeDimensionAndNullData) {
  const float v[] = {1.0f};
  SafetensorsWriter writer;
  expect_error([&] { writer.add_f32("w", {2, -1}, v); }, {"'w'", "negative", "[2, -1]"});
  expect_error([&] { writer.add_f32("w", {2}, nullptr); }, {"'w'", "null data"});
}

TEST_F(SafetensorsTest, WriterIntoMissingDirectoryIsErrorNamingPath) {
  const float v[] = {1.0f};
  SafetensorsWriter writer;
  writer.add_f32("w", {1}, v);
  const std::string p = path("no_such_dir/model.safetensors");
  expect_error([&] { writer.write(p); }, {p});
}

// ---------------------------------------------------------------------------------------------
// One hand-built malformed file per validation rule

TEST_F(SafetensorsTest, RejectsFileShorterThan8Bytes) {
  expect_rejected("short.safetensors", std::string("\x02\x00\x00\x00\x00", 5), {"5 bytes", "at least 8"});
  expect_rejected("zero.safetensors", "", {"0 bytes", "at least 8"});
}

TEST_F(SafetensorsTest, RejectsHeaderTooLarge) {
  expect_rejected("huge_header.safetensors", file_bytes("{}", "", 100000001), {"100000001", "limit of 100000000"});
  expect_rejected("max_header.safetensors", file_bytes("{}", "", UINT64_MAX - 1), {"18446744073709551614", "limit"});
}

TEST_F(SafetensorsTest, RejectsHeaderPastEndOfFile) {
  // 1000 bytes claimed, 20 present: 8 + 1000 needed, 28 in the file.
  expect_rejected("past_eof.safetensors", file_bytes("{}                  ", "", 1000),
                  {"header length 1000", "1008", "file has 28"});
}

TEST_F(SafetensorsTest, RejectsNonUtf8Header) {
  const std::string bad_byte = "{" + entry("w\xff", "U8", "[1]", "[0,1]") + "}";
  expect_rejected("latin1.safetensors", file_bytes(bad_byte, "x"), {"not valid UTF-8", "0xff", "header offset 3"});
  const std::string overlong = "{" + entry("w\xc0\x80", "U8", "[1]", "[0,1]") + "}";
  expect_rejected("overlong.safetensors", file_bytes(overlong, "x"), {"not valid UTF-8", "0xc0"});
  const std::string surrogate = "{" + entry("w\xed\xa0\x80", "U8", "[1]", "[0,1]") + "}";
  expect_rejected("surrogate.safetensors", file_bytes(surrogate, "x"), {"not valid UTF-8", "0xed"});
  const std::string truncated = "{\"a\":\"\xe2\x9c";
  expect_rejected("cut.safetensors", file_bytes(truncated, ""), {"not valid UTF-8", "0xe2"});
}

TEST_F(SafetensorsTest, RejectsHeaderNotAJsonObject) {
  expect_rejected("array.safetensors", file_bytes("[1, 2]  ", ""), {"starting with '{'", "starts with '['"});
  expect_rejected("leading_space.safetensors", file_bytes(" {}", ""), {"starting with '{'", "starts with ' '"});
  expect_rejected("empty_header.safetensors", file_bytes("", ""), {"starting with '{'", "empty"});
}

TEST_F(SafetensorsTest, RejectsBadJson) {
  expect_rejected("truncated_json.safetensors", file_bytes("{\"a\": ", ""), {"not valid JSON"});
  expect_rejected("trailing_junk.safetensors", file_bytes("{} x", ""), {"not valid JSON"});
  // nlohmann alone would stop at the NUL and accept the header.
  expect_rejected("trailing_nul.safetensors", file_bytes(std::string("{}\0{\"x\"", 7), ""),
                  {"not valid JSON", "NUL byte at header offset 2"});
}

TEST_F(SafetensorsTest, RejectsDuplicateKeys) {
  // Deliberately stricter than the reference, which keeps the last of two same-named tensors.
  const std::string header = "{" + entry("w", "U8", "[1]", "[0,1]") + "," + entry("w", "U8", "[1]", "[0,1]") + "}";
  expect_rejected("dup_tensor.safetensors", file_bytes(header, "x"), {"'w' twice"});
  expect_rejected("dup_field.safetensors",
                  file_bytes("{\"w\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "x"),
                  {"'dtype' twice"});
}

TEST_F(SafetensorsTest, RejectsUnknownDtype) {
  const std::string header = "{" + entry("bert.encoder.layer.0.output.dense.weight", "F8_E4M3", "[1]", "[0,1]") + "}";
  expect_rejected("fp8.safetensors", file_bytes(header, "x"),
                  {"tensor 'bert.encoder.layer.0.output.dense.weight'", "unknown dtype 'F8_E4M3'", "BF16"});
  expect_rejected("dtype_number.safetensors",
                  file_bytes("{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,1]}}", "x"),
                  {"tensor 'w'", "\"dtype\" must be a string"});
}

TEST_F(SafetensorsTest, RejectsNegativeShape) {
  const std::string header = "{" + entry("w", "F32", "[2,-1]", "[0,0]") + "}";
  expect_rejected("neg_shape.safetensors", file_bytes(header, ""),
                  {"tensor 'w'", "shape dimension 1", "non-negative integer", "negative integer -1"});
}

TEST_F(SafetensorsTest, RejectsNonIntegerShape) {
  expect_rejected("float_shape.safetensors", file_bytes("{" + entry("w", "U8", "[1.5]", "[0,1]") + "}", "x"),
                  {"tensor 'w'", "shape dimension 0", "non-integer number 1.5"});
  expect_rejected("string_shape.safetensors", file_bytes("{" + entry("w", "U8", "[\"1\"]", "[0,1]") + "}", "x"),
                  {"tensor 'w'", "shape dimension 0", "found a string"});
  expect_rejected("shape_not_array.safetensors", file_bytes("{" + entry("w", "U8", "1", "[0,1]") + "}", "x"),
                  {"tensor 'w'", "\"shape\" must be an array"});
}

TEST_F(SafetensorsTest, RejectsDataOffsetsOfWrongLength) {
  expect_rejected("offsets_one.safetensors", file_bytes("{" + entry("w", "U8", "[1]", "[1]") + "}", "x"),
                  {"tensor 'w'", "[begin, end]", "array of 1 elements"});
  expect_rejected("offsets_three.safetensors", file_bytes("{" + entry("w", "U8", "[1]", "[0,1,1]") + "}", "x"),
                  {"tensor 'w'", "array of 3 elements"});
  expect_rejected("offsets_negative.safetensors", file_bytes("{" + entry("w", "U8", "[0]", "[-1,0]") + "}", ""),
                  {"tensor 'w'", "data_offsets begin", "negative integer -1"});
}

TEST_F(SafetensorsTest, RejectsDataOffsetsBeginAfterEnd) {
  expect_rejected("begin_after_end.safetensors", file_bytes("{" + entry("w", "U8", "[4]", "[8,4]") + "}", "12345678"),
                  {"tensor 'w'", "[8, 4]", "begin > end"});
}

TEST_F(SafetensorsTest, RejectsGapBetweenTensors) {
  const std::string header = "{" + entry("a", "U8", "[4]", "[0,4]") + "," + entry("b", "U8", "[4]", "[8,12]") + "}";
  expect_rejected("gap.safetensors", file_bytes(header, std::string(12, 'x')),
                  {"tensor 'b' starts at byte 8", "tensor 'a' [0, 4) ends at 4", "4-byte gap"});
  const std::string late_start = "{" + entry("a", "U8", "[4]", "[2,6]") + "}";
  expect_rejected("late_start.safetensors", file_bytes(late_start, std::string(6, 'x')),
                  {"tensor 'a' starts at byte 2 but the data buffer starts at 0", "2-byte gap"});
}

TEST_F(SafetensorsTest, RejectsOverlappingTensors) {
  const std::string header = "{" + entry("a", "U8", "[8]", "[0,8]") + "," + entry("b", "U8", "[8]", "[4,12]") + "}";
  expect_rejected("overlap.safetensors", file_bytes(header, std::string(12, 'x')),
                  {"tensor 'b' [4, 12) overlaps tensor 'a' [0, 8)", "start at byte 8"});
}

TEST_F(SafetensorsTest, RejectsDataLongerThanTensors) {
  const std::string header = "{" + entry("w", "F32", "[3]", "[0,12]") + "}";
  expect_rejected("trailing_data.safetensors", file_bytes(header, std::string(16, '\0')),
                  {"data buffer has 16 bytes", "cover 12", "end of the file"});
}

TEST_F(SafetensorsTest, RejectsDataShorterThanTensors) {
  const std::string header = "{" + entry("w", "F32", "[3]", "[0,12]") + "}";
  expect_rejected("truncated_data.safetensors", file_bytes(header, std::string(8, '\0')),
                  {"tensor 'w' ends at byte 12", "only 8 bytes"});
}

TEST_F(SafetensorsTest, RejectsByteSizeMismatch) {
  const std::string header = "{" + entry("bert.pooler.dense.weight", "F32", "[3,4]", "[0,100]") + "}";
  expect_rejected("model.safetensors", file_bytes(header, std::string(100, '\0')),
                  {"model.safetensors: tensor 'bert.pooler.dense.weight': data_offsets span 100 bytes but shape "
                   "[3, 4] of F32 needs 48"});
}

TEST_F(SafetensorsTest, RejectsOverflowingShape) {
  // 2^32 * 2^32 elements overflow 64 bits; the offsets are small so only the product can be wrong.
  expect_rejected("elements_overflow.safetensors",
                  file_bytes("{" + entry("w", "U8", "[4294967296,4294967296]", "[0,0]") + "}", ""),
                  {"tensor 'w'", "[4294967296, 4294967296]", "overflows"});
  // 2^62 elements fit, but 2^62 * 4 bytes do not.
  expect_rejected("bytes_overflow.safetensors",
                  file_bytes("{" + entry("w", "F32", "[4611686018427387904]", "[0,0]") + "}", ""),
                  {"tensor 'w'", "of F32 overflows"});
  // A dimension beyond int64 cannot be represented at all.
  expect_rejected("dim_too_large.safetensors",
                  file_bytes("{" + entry("w", "U8", "[0,9223372036854775808]", "[0,0]") + "}", ""),
                  {"tensor 'w'", "shape dimension 1 is 9223372036854775808"});
}

TEST_F(SafetensorsTest, RejectsMetadataValueNotString) {
  const std::string header = "{\"__metadata__\":{\"format\":\"pt\",\"epochs\":3}}";
  expect_rejected("meta_number.safetensors", file_bytes(header, ""),
                  {"\"__metadata__\" value of key 'epochs'", "must be a string", "integer 3"});
  expect_rejected("meta_array.safetensors", file_bytes("{\"__metadata__\":[\"pt\"]}", ""),
                  {"\"__metadata__\" must be an object", "found an array"});
}

TEST_F(SafetensorsTest, RejectsMissingField) {
  expect_rejected("no_dtype.safetensors", file_bytes("{\"w\":{\"shape\":[1],\"data_offsets\":[0,1]}}", "x"),
                  {"tensor 'w'", "missing field \"dtype\""});
  expect_rejected("no_shape.safetensors", file_bytes("{\"w\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", "x"),
                  {"tensor 'w'", "missing field \"shape\""});
  expect_rejected("no_offsets.safetensors", file_bytes("{\"w\":{\"dtype\":\"U8\",\"shape\":[1]}}", "x"),
                  {"tensor 'w'", "missing field \"data_offsets\""});
}

TEST_F(SafetensorsTest, RejectsEntryThatIsNotAnObject) {
  expect_rejected("entry_number.safetensors", file_bytes("{\"w\":1}", ""),
                  {"tensor 'w'", "expected an object with dtype, shape and data_offsets", "found the integer 1"});
}

}  // namespace
}  // namespace bertrain
