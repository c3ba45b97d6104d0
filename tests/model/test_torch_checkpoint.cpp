// torch.save'd checkpoints (pytorch_model.bin): the fixtures torch 2.15 wrote (tests/reference/
// make_torch_fixtures.py: zip and legacy formats, fp32 and fp16, gamma/beta names, shared storages) load to
// exactly the parameters of tests/fixtures/tiny_gelu_bce_adam; every corrupted or hostile variant (built
// here from the good files or from hand-written pickle bytes, so nothing is ever executed) is a one-line
// Error naming the file, never a crash (the suite also runs under ASan + UBSan).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/model_dir.h"
#include "model/torch_checkpoint.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

namespace fs = std::filesystem;

const fs::path kReferenceDir = fs::path(BERTRAIN_FIXTURES_DIR) / "tiny_gelu_bce_adam";
const fs::path kTorchDir = fs::path(BERTRAIN_FIXTURES_DIR) / "torch_bin";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << p;
}

// fp16 round-to-nearest-even of x, back in float: 11 significant bits, subnormals below 2^-14.
float round_to_f16(float x) {
  if (x == 0.0f || !std::isfinite(x)) return x;
  int e = 0;
  std::frexp(x, &e);  // |x| = m · 2^e, m in [0.5, 1)
  const double quantum = std::ldexp(1.0, std::max(e - 11, -24));
  return static_cast<float>(std::nearbyint(static_cast<double>(x) / quantum) * quantum);
}

// ---- hand-written pickles and containers -------------------------------------------------------------

// A string literal with its embedded NUL bytes.
template <std::size_t N>
std::string bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string u16(uint16_t v) { return std::string(reinterpret_cast<const char*>(&v), 2); }
std::string i64(int64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string str(const std::string& s) { return "X" + u32(static_cast<uint32_t>(s.size())) + s; }
std::string int1(int v) { return "K" + std::string(1, static_cast<char>(v)); }
std::string ints(const std::vector<int>& v) {  // a tuple of small ints
  std::string s = "(";
  for (int x : v) s += int1(x);
  return s + "t";
}

const std::string kProto = "\x80\x02";
const std::string kOrderedDict = "ccollections\nOrderedDict\n)R";

// The legacy format's three leading pickles, then `body`, the storage keys pickle and the storages.
std::string legacy_file(const std::string& body, const std::vector<std::string>& keys = {},
                        const std::string& storages = "", bool little_endian = true) {
  std::string f = kProto + "\x8a\x0a" + std::string("\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10) + ".";
  f += kProto + "M" + u16(1001) + ".";
  f += kProto + "}(" + str("protocol_version") + "M" + u16(1001) + str("little_endian") +
       (little_endian ? "\x88" : "\x89") + "u.";
  f += body;
  f += kProto + "](";
  for (const std::string& k : keys) f += str(k);
  f += "e.";
  return f + storages;
}

// A state dict {'w': tensor} whose storage '0' holds `numel` floats.
std::string tensor_dict(int numel, int offset, const std::vector<int>& size, const std::vector<int>& stride,
                        const std::string& storage_type = "FloatStorage") {
  return kProto + kOrderedDict + "(" + str("w") + "ctorch._utils\n_rebuild_tensor_v2\n((" + str("storage") +
         "ctorch\n" + storage_type + "\n" + str("0") + str("cpu") + int1(numel) + "tQ" + int1(offset) + ints(size) +
         ints(stride) + "\x89" + kOrderedDict + "tRu.";
}

std::string floats(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = 0.5f * static_cast<float>(i);
  return i64(n) + std::string(reinterpret_cast<const char*>(v.data()), n * sizeof(float));
}

// A zip with stored entries (CRC left 0: torch's reader checks it, ours reads only what it needs).
std::string zip_file(const std::vector<std::pair<std::string, std::string>>& entries, uint16_t method = 0) {
  std::string out, central;
  for (const auto& [name, data] : entries) {
    const uint32_t offset = static_cast<uint32_t>(out.size());
    const uint32_t size = static_cast<uint32_t>(data.size());
    out += u32(0x04034b50) + u16(20) + u16(0) + u16(method) + u16(0) + u16(0) + u32(0) + u32(size) + u32(size) +
           u16(static_cast<uint16_t>(name.size())) + u16(0) + name + data;
    central += u32(0x02014b50) + u16(20) + u16(20) + u16(0) + u16(method) + u16(0) + u16(0) + u32(0) + u32(size) +
               u32(size) + u16(static_cast<uint16_t>(name.size())) + u16(0) + u16(0) + u16(0) + u16(0) + u32(0) +
               u32(offset) + name;
  }
  const uint32_t cd_offset = static_cast<uint32_t>(out.size());
  out += central;
  const uint16_t n = static_cast<uint16_t>(entries.size());
  return out + u32(0x06054b50) + u16(0) + u16(0) + u16(n) + u16(n) + u32(static_cast<uint32_t>(central.size())) +
         u32(cd_offset) + u16(0);
}

std::string raw_floats(int n) { return floats(n).substr(8); }

class TorchCheckpointTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference_ = new LoadedModel(load_model_dir(kReferenceDir.string(), {}, 0)); }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }

  // A model directory: the reference config and vocabulary, `bin` as pytorch_model.bin, no safetensors.
  std::string model_dir_with(const fs::path& bin) {
    const fs::path dir = dir_ / bin.stem();
    fs::create_directories(dir);
    fs::copy_file(kReferenceDir / "config.json", dir / "config.json");
    fs::copy_file(kReferenceDir / "vocab.txt", dir / "vocab.txt");
    fs::copy_file(bin, dir / "pytorch_model.bin");
    return dir.string();
  }

  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    spit(p, bytes);
    return p.string();
  }

  // Reading `path` throws one line naming the file and containing `fragment`.
  static void expect_error(const std::string& path, const std::string& fragment) {
    try {
      const TorchCheckpoint checkpoint(path);
      FAIL() << "no error reading " << path;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << "the message does not name the file: " << message;
      EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    }
  }

  static LoadedModel* reference_;
  testing::TempDir temp_{"bertrain_torch"};
  const fs::path dir_ = temp_.path();
};

LoadedModel* TorchCheckpointTest::reference_ = nullptr;

TEST_F(TorchCheckpointTest, Fp32FixturesLoadExactlyTheReferenceParameters) {
  for (const char* name : {"zip_f32.bin", "legacy_f32.bin", "legacy_gamma_beta.bin", "zip_shared.bin",
                           "legacy_shared.bin"}) {
    SCOPED_TRACE(name);
    const LoadedModel model = load_model_dir(model_dir_with(kTorchDir / name), {}, 0);
    EXPECT_TRUE(model.classifier_loaded);
    ASSERT_EQ(model.params.size(), reference_->params.size());
    for (const ParamEntry& e : reference_->layout.entries()) {
      for (std::size_t i = 0; i < e.numel; ++i) {
        const float want = reference_->params[e.offset + i], got = model.params[e.offset + i];
        ASSERT_EQ(std::memcmp(&want, &got, sizeof want), 0) << e.name << "[" << i << "]: " << got << " vs " << want;
      }
    }
  }
}

TEST_F(TorchCheckpointTest, Fp16FixturesLoadTheFp16RoundedParameters) {
  for (const char* name : {"zip_f16.bin", "legacy_f16.bin"}) {
    SCOPED_TRACE(name);
    const LoadedModel model = load_model_dir(model_dir_with(kTorchDir / name), {}, 0);
    int rounded = 0;
    for (const ParamEntry& e : reference_->layout.entries()) {
      for (std::size_t i = 0; i < e.numel; ++i) {
        const float exact = reference_->params[e.offset + i];
        const float want = round_to_f16(exact), got = model.params[e.offset + i];
        ASSERT_EQ(got, want) << e.name << "[" << i << "]: fp32 " << exact;
        rounded += want != exact;
      }
    }
    EXPECT_GT(rounded, 1000) << "the fp16 fixture should differ from fp32 (else this test cannot fail)";
  }
}

TEST_F(TorchCheckpointTest, ReadsEveryTensorAsSavedWithItsDtypeAndFormat) {
  const TorchCheckpoint zip((kTorchDir / "zip_f32.bin").string());
  const TorchCheckpoint legacy((kTorchDir / "legacy_f32.bin").string());
  EXPECT_TRUE(zip.is_zip());
  EXPECT_FALSE(legacy.is_zip());
  ASSERT_EQ(zip.tensors().size(), legacy.tensors().size());
  EXPECT_EQ(zip.tensors().size(), reference_->layout.entries().size() + 6);  // + position_ids and 5 cls.* tensors
  for (std::size_t i = 0; i < zip.tensors().size(); ++i) {
    const TorchTensorInfo& a = zip.tensors()[i];
    const TorchTensorInfo& b = legacy.tensors()[i];
    EXPECT_EQ(a.name, b.name);  // state-dict order
    EXPECT_EQ(a.shape, b.shape) << a.name;
    EXPECT_EQ(a.dtype, b.dtype) << a.name;
    if (a.dtype == DType::F32) {
      EXPECT_EQ(zip.read_float(a.name), legacy.read_float(b.name)) << a.name;
    }
  }
  EXPECT_EQ(zip.info("bert.embeddings.position_ids").dtype, DType::I64);
  EXPECT_EQ(zip.info("cls.seq_relationship.weight").shape, (std::vector<int64_t>{2, 32}));
  EXPECT_THROW(zip.read_float("bert.embeddings.position_ids"), Error);  // int64: rejected, never reinterpreted
  EXPECT_THROW(zip.info("nope"), Error);

  // Shared storage: consecutive views of one storage, each starting where the previous one ends.
  for (const char* name : {"zip_shared.bin", "legacy_shared.bin"}) {
    const TorchCheckpoint shared((kTorchDir / name).string());
    const TorchTensorInfo& first = shared.info("bert.embeddings.LayerNorm.bias");
    const TorchTensorInfo& second = shared.info("bert.embeddings.LayerNorm.weight");
    EXPECT_EQ(second.file_offset, first.file_offset + 4 * first.numel()) << name;
  }
}

TEST_F(TorchCheckpointTest, FormatIsDetectedByContentNotName) {
  const std::string renamed = write("weights.safetensors", slurp(kTorchDir / "legacy_f16.bin"));
  EXPECT_TRUE(looks_like_torch_checkpoint(renamed));
  EXPECT_FALSE(TorchCheckpoint(renamed).is_zip());
  const std::string zip = write("weights.pkl", slurp(kTorchDir / "zip_f16.bin"));
  EXPECT_TRUE(TorchCheckpoint(zip).is_zip());
  EXPECT_FALSE(looks_like_torch_checkpoint((kReferenceDir / "model.safetensors").string()));
  EXPECT_TRUE(looks_like_torch_checkpoint(zip));
  // torch.save(..., pickle_protocol=4) of the legacy format: PROTO 4, FRAME and its length, then the magic number.
  const std::string legacy4 = std::string("\x80\x04\x95\x0d\0\0\0\0\0\0\0\x8a\x0a", 13) + std::string(20, '\0');
  EXPECT_TRUE(looks_like_torch_checkpoint(write("legacy4.safetensors", legacy4)));
  // A safetensors header of 0x280 bytes begins with the bytes of pickle's PROTO 2: not a torch file by that alone.
  EXPECT_FALSE(looks_like_torch_checkpoint(write("640.safetensors", std::string("\x80\x02\0\0\0\0\0\0", 8) +
                                                                        "{" + std::string(638, ' ') + "}")));
}

TEST_F(TorchCheckpointTest, EveryTruncationIsAnError) {
  for (const char* name : {"zip_f32.bin", "legacy_f32.bin"}) {
    const std::string whole = slurp(kTorchDir / name);
    const std::string path = (dir_ / (std::string("cut_") + name)).string();
    // Every byte of the legacy pickles (the first 7 KB) and of the zip's data.pkl header and central
    // directory (the first and last 6 KB), every 97th byte of the storages.
    const bool zip = whole[0] == 'P';
    for (std::size_t n = 0; n < whole.size();
         n += (zip ? (n < 600 || n + 6000 > whole.size()) : n < 7200) ? 1 : 97) {
      spit(path, whole.substr(0, n));
      try {
        const TorchCheckpoint checkpoint(path);
        ADD_FAILURE() << name << " cut to " << n << " bytes loaded";
      } catch (const Error& e) {
        ASSERT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      }
    }
  }
  expect_error(write("cut_legacy.bin", slurp(kTorchDir / "legacy_f32.bin").substr(0, 90000)), "truncated");
  expect_error(write("cut_zip.bin", slurp(kTorchDir / "zip_f32.bin").substr(0, 90000)), "zip");
}

TEST_F(TorchCheckpointTest, WrongMagicIsRejected) {
  std::string legacy = slurp(kTorchDir / "legacy_f32.bin");
  legacy[6] ^= 0x01;  // inside the LONG1 magic number
  expect_error(write("magic.bin", legacy), "magic number");
  std::string zip = slurp(kTorchDir / "zip_f32.bin");
  zip[2] = 0x05;
  expect_error(write("zipmagic.bin", zip), "not a torch checkpoint");
  expect_error(write("text.bin", "hello, world"), "not a torch checkpoint");
  expect_error(write("empty.bin", ""), "not a torch checkpoint");
}

TEST_F(TorchCheckpointTest, ForeignGlobalsAreRefusedWithoutRunningThem) {
  // os.system('touch PWNED') as a pickle would run it: GLOBAL os.system, args tuple, REDUCE.
  const fs::path marker = dir_ / "PWNED";
  const std::string call = kProto + "cos\nsystem\n" + str("touch " + marker.string()) + "\x85R.";
  expect_error(write("os_system.bin", legacy_file(call)), "'os.system'");
  expect_error(write("os_system_zip.bin", zip_file({{"archive/data.pkl", call}, {"archive/byteorder", "little"}})),
               "'os.system'");
  // The same through STACK_GLOBAL (protocol 4) and inside a state dict value.
  const std::string stack_global = "\x80\x04" + str("builtins") + str("eval") + "\x93" + str("1") + "\x85R.";
  expect_error(write("eval.bin", legacy_file(stack_global)), "'builtins.eval'");
  const std::string in_dict = kProto + kOrderedDict + "(" + str("w") + "csubprocess\nPopen\n" + "u.";
  expect_error(write("popen.bin", legacy_file(in_dict)), "'subprocess.Popen'");
  EXPECT_FALSE(fs::exists(marker));
  // A whitelisted storage type is not callable either.
  expect_error(write("call_storage.bin", legacy_file(kProto + "ctorch\nFloatStorage\n)R.")), "cannot be called");
}

TEST_F(TorchCheckpointTest, StorageShorterThanItsViewIsRejected) {
  // Legacy: the record says 4 elements, the view needs offset 2 + 8.
  expect_error(write("short_view.bin", legacy_file(tensor_dict(4, 2, {8}, {1}), {"0"}, floats(4))),
               "needs 10 elements but its storage '0' has 4");
  // Legacy: the record says 8, the file's storage count says 4.
  expect_error(write("short_storage.bin", legacy_file(tensor_dict(8, 0, {8}, {1}), {"0"}, floats(4))),
               "holds 16 bytes but its record says 8 elements");
  // Zip: data/0 shorter than its record.
  expect_error(write("short_zip.bin", zip_file({{"archive/data.pkl", tensor_dict(8, 0, {8}, {1})},
                                                {"archive/data/0", raw_floats(5)}})),
               "holds 20 bytes but its record says 8 elements");
  // A consistent hand-written file loads: the helpers themselves are right.
  const std::string good = write("good.bin", legacy_file(tensor_dict(8, 2, {2, 3}, {3, 1}), {"0"}, floats(8)));
  const TorchCheckpoint checkpoint(good);
  EXPECT_EQ(checkpoint.read_float("w"), (std::vector<float>{1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f}));
  const std::string good_zip = write("good_zip.bin", zip_file({{"archive/data.pkl", tensor_dict(8, 2, {6}, {1})},
                                                               {"archive/data/0", raw_floats(8)},
                                                               {"archive/byteorder", "little"}}));
  EXPECT_EQ(TorchCheckpoint(good_zip).read_float("w"), (std::vector<float>{1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f}));
}

TEST_F(TorchCheckpointTest, Bf16AndF64StoragesAreUpcast) {
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x3f00, 0x4040};  // 1, -2, 0.5, 3
  const std::string bf16_bytes = i64(4) + std::string(reinterpret_cast<const char*>(bf16.data()), 8);
  const std::string b = write("bf16.bin", legacy_file(tensor_dict(4, 0, {4}, {1}, "BFloat16Storage"), {"0"}, bf16_bytes));
  EXPECT_EQ(TorchCheckpoint(b).info("w").dtype, DType::BF16);
  EXPECT_EQ(TorchCheckpoint(b).read_float("w"), (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f}));
  const std::vector<double> f64 = {1.0, -2.0, 0.1, 1e300};
  const std::string f64_bytes = i64(4) + std::string(reinterpret_cast<const char*>(f64.data()), 32);
  const std::string d = write("f64.bin", legacy_file(tensor_dict(4, 0, {4}, {1}, "DoubleStorage"), {"0"}, f64_bytes));
  const std::vector<float> got = TorchCheckpoint(d).read_float("w");
  EXPECT_EQ(got, (std::vector<float>{1.0f, -2.0f, 0.1f, std::numeric_limits<float>::infinity()}));
}

TEST_F(TorchCheckpointTest, NonContiguousStridesAreRejected) {
  expect_error(write("transposed.bin", legacy_file(tensor_dict(6, 0, {2, 3}, {1, 2}), {"0"}, floats(6))),
               "only contiguous tensors");
  // Size-1 dimensions may carry any stride, as torch allows.
  const std::string ok = write("unit_dim.bin", legacy_file(tensor_dict(6, 0, {1, 6}, {7, 1}), {"0"}, floats(6)));
  EXPECT_EQ(TorchCheckpoint(ok).info("w").shape, (std::vector<int64_t>{1, 6}));
}

TEST_F(TorchCheckpointTest, DeepAndCyclicPicklesAreRejected) {
  expect_error(write("marks.bin", legacy_file(kProto + std::string(100000, '(') + ".")), "MARKs");
  std::string lists = kProto + std::string(1000, ']') + std::string(999, 'a') + ".";
  expect_error(write("lists.bin", legacy_file(lists)), "nested deeper than 64");
  expect_error(write("self_list.bin", legacy_file(kProto + bytes("]q\x00h\x00" "a."))), "cyclic");
  expect_error(write("self_dict.bin", legacy_file(kProto + bytes("}q\x00h\x00K\x01s."))), "cyclic");
  // Two lists holding each other: no crash, no leak (the arena owns every node), and not a state dict.
  expect_error(write("cycle2.bin", legacy_file(kProto + bytes("]q\x00]q\x01h\x00" "a" "a."))), "expected a state dict");
  expect_error(write("cycle3.bin", legacy_file(kProto + bytes("]q\x00]q\x01h\x00" "ah\x00h\x01" "a."))),
               "left on the stack");
}

TEST_F(TorchCheckpointTest, MalformedPicklesAreRejected) {
  expect_error(write("memo.bin", legacy_file(kProto + "h\x05.")), "memo index 5 was never stored");
  expect_error(write("inst.bin", legacy_file(kProto + "(i__builtin__\nobject\n.")), "opcode 0x69");
  expect_error(write("underflow.bin", legacy_file(kProto + "R.")), "stack underflow");
  expect_error(write("leftover.bin", legacy_file(kProto + "NN.")), "left on the stack");
  expect_error(write("proto9.bin", legacy_file("\x80\x09N.")), "pickle protocol 9");
  expect_error(write("longstr.bin", legacy_file(kProto + "X\xff\xff\xff\x7f" "abc.")), "truncated");
  expect_error(write("not_tensor.bin", legacy_file(kProto + kOrderedDict + "(" + str("w") + int1(3) + "u.")),
               "entry 'w' is an int, expected a tensor");
  expect_error(write("list_root.bin", legacy_file(kProto + "].")), "expected a state dict");
  expect_error(write("dup_key.bin", legacy_file(kProto + kOrderedDict + "(" + str("w") + "N" + str("w") + "Nu.")),
               "set twice");
  expect_error(write("missing_storage.bin", legacy_file(tensor_dict(4, 0, {4}, {1}))), "missing from the file");
  expect_error(write("unlisted.bin", legacy_file(kProto + "N.", {"7"})), "no tensor uses it");
  expect_error(write("int_storage.bin", legacy_file(tensor_dict(4, 0, {4}, {1}, "IntStorage"), {"0"}, floats(4))),
               "'torch.IntStorage'");
}

TEST_F(TorchCheckpointTest, BigEndianCheckpointsAreRejected) {
  expect_error(write("be_legacy.bin", legacy_file(tensor_dict(4, 0, {4}, {1}), {"0"}, floats(4), false)),
               "big-endian");
  expect_error(write("be_zip.bin", zip_file({{"archive/data.pkl", tensor_dict(4, 0, {4}, {1})},
                                             {"archive/data/0", raw_floats(4)},
                                             {"archive/byteorder", "big"}})),
               "byteorder is 'big'");
}

TEST_F(TorchCheckpointTest, ZipStructureIsValidated) {
  const std::vector<std::pair<std::string, std::string>> entries = {
      {"archive/data.pkl", tensor_dict(4, 0, {4}, {1})}, {"archive/data/0", raw_floats(4)}};
  EXPECT_NO_THROW(TorchCheckpoint(write("ok.zip", zip_file(entries))));
  expect_error(write("deflate.zip", zip_file(entries, 8)), "is compressed (method 8)");
  expect_error(write("nopkl.zip", zip_file({{"archive/data/0", raw_floats(4)}})), "expected one");
  std::string bad_cd = zip_file(entries);
  bad_cd[bad_cd.size() - 6] ^= 0x40;  // central directory offset
  expect_error(write("bad_cd.zip", bad_cd), "zip");
}

TEST_F(TorchCheckpointTest, ModelDirPrefersSafetensorsAndNamesTheMissingFiles) {
  const std::string dir = model_dir_with(kTorchDir / "zip_f16.bin");
  fs::copy_file(kReferenceDir / "model.safetensors", fs::path(dir) / "model.safetensors");
  const LoadedModel model = load_model_dir(dir, {}, 0);
  EXPECT_EQ(model.params, reference_->params);  // fp32 safetensors, not the fp16 .bin
  EXPECT_EQ(open_checkpoint(dir)->path(), dir + "/model.safetensors");
  fs::remove(fs::path(dir) / "model.safetensors");
  EXPECT_EQ(open_checkpoint(dir)->path(), dir + "/pytorch_model.bin");
  fs::remove(fs::path(dir) / "pytorch_model.bin");
  try {
    open_checkpoint(dir);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pytorch_model.bin"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bertrain
