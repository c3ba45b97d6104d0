// safetensors reader and writer (see safetensors.h). Validation follows the reference Rust crate
// (huggingface/safetensors, tensor.rs), with the differences listed at SafetensorsFile's constructor.
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_text.h"
#include "core/param_store.h"

// The format is little-endian and we read elements with memcpy into native types.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");
// F64 -> float narrowing relies on IEEE rounding (out-of-range values become inf, not UB).
static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<double>::is_iec559,
              "safetensors conversions assume IEEE-754 float and double");

namespace bertrain {

namespace {

// Same limit as the reference implementation: a larger header is treated as hostile or corrupt.
constexpr uint64_t kMaxHeaderSize = 100'000'000;
constexpr std::size_t kPrefixSize = 8;  // u64 header length
constexpr const char* kMetadataKey = "__metadata__";

constexpr DType kAllDTypes[] = {DType::BOOL, DType::U8,  DType::I8,   DType::I16, DType::U16,
                                DType::I32,  DType::U32, DType::I64,  DType::U64, DType::F16,
                                DType::BF16, DType::F32, DType::F64};

bool parse_dtype(const std::string& name, DType* out) {
  for (DType d : kAllDTypes) {
    if (name == dtype_name(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

// Short description of a JSON value's kind for "expected X, found Y" messages.
std::string json_kind(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_unsigned()) return "the integer " + v.dump();
  if (v.is_number_integer()) return "the negative integer " + v.dump();
  if (v.is_number_float()) return "the non-integer number " + v.dump();
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "an unsupported value";
}

// Strict UTF-8 check with the same rules as Rust's str::from_utf8: no overlong forms, no
// surrogates, nothing above U+10FFFF. Returns the offset of the first bad byte, or size when valid.
std::size_t first_invalid_utf8(const uint8_t* s, std::size_t size) {
  std::size_t i = 0;
  while (i < size) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + len > size) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return size;
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float (10 significant bits).
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  uint32_t bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | (mantissa << 13);  // inf, or NaN keeping its payload
  } else {
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Offsets need not be aligned to the element size, so every element is loaded with memcpy.
template <typename T>
T load(const uint8_t* p, std::size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

// Non-negative JSON integer, or an Error saying what was found instead.
uint64_t json_u64(const nlohmann::json& v, const std::string& where) {
  BERTRAIN_CHECK(v.is_number_unsigned(), where << ": expected a non-negative integer, found " << json_kind(v));
  return v.get<uint64_t>();
}

// Bytes of a `dtype` tensor of `shape`; an Error prefixed by `where` when a dimension is negative or
// a count overflows, since a corrupt header must not wrap around into a small, plausible size.
uint64_t checked_nbytes(const std::string& where, DType dtype, const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    BERTRAIN_CHECK(d >= 0, where << ": negative dimension in shape " << shape_string(shape));
    BERTRAIN_CHECK(!__builtin_mul_overflow(numel, d, &numel),
                   where << ": shape " << shape_string(shape) << " overflows: more than 2^63-1 elements");
  }
  uint64_t nbytes = 0;
  BERTRAIN_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(numel), static_cast<uint64_t>(dtype_size(dtype)), &nbytes),
                 where << ": shape " << shape_string(shape) << " of " << dtype_name(dtype)
                       << " overflows: more than 2^64-1 bytes");
  return nbytes;
}

// Parses the header and records duplicate object keys, which nlohmann would silently collapse.
nlohmann::json parse_header(const std::string& path, const char* begin, const char* end) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  bool too_deep = false;  // core/json_text.h: a value nested this deep would overflow the stack when copied
  const nlohmann::json::parser_callback_t on_event = [&](int depth, nlohmann::json::parse_event_t event,
                                                         nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (depth > kMaxJsonDepth) {
      too_deep = true;
      return false;
    }
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Event::key && !open_objects.empty() && duplicate.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!open_objects.back().insert(key).second) duplicate = key;
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(begin, end, on_event, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    BERTRAIN_FAIL(path << ": header is not valid JSON: " << e.what());
  }
  BERTRAIN_CHECK(!too_deep, path << ": header nested deeper than " << kMaxJsonDepth << " levels");
  BERTRAIN_CHECK(duplicate.empty(), path << ": header has the key '" << duplicate
                                         << "' twice in one object; expected unique keys");
  return header;
}

}  // namespace

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::BOOL:
    case DType::U8:
    case DType::I8:
      return 1;
    case DType::I16:
    case DType::U16:
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I32:
    case DType::U32:
    case DType::F32:
      return 4;
    case DType::I64:
    case DType::U64:
    case DType::F64:
      return 8;
  }
  BERTRAIN_FAIL("dtype_size: invalid DType value " << static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::BOOL: return "BOOL";
    case DType::U8: return "U8";
    case DType::I8: return "I8";
    case DType::I16: return "I16";
    case DType::U16: return "U16";
    case DType::I32: return "I32";
    case DType::U32: return "U32";
    case DType::I64: return "I64";
    case DType::U64: return "U64";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
  }
  BERTRAIN_FAIL("dtype_name: invalid DType value " << static_cast<int>(dtype));
}

bool dtype_is_float(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32 || dtype == DType::F64;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    BERTRAIN_CHECK(d >= 0, "tensor '" << name << "': negative dimension in shape " << shape_string(shape));
    BERTRAIN_CHECK(!__builtin_mul_overflow(n, d, &n),
                   "tensor '" << name << "': shape " << shape_string(shape) << " has more than 2^63-1 elements");
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Reader

// Rules, as in the reference: file >= 8 bytes; header length N <= 100,000,000 and 8 + N <= file
// size; header valid UTF-8 starting with '{' and parsing to a JSON object (trailing whitespace
// allowed); every tensor has a known dtype, a shape of non-negative integers and data_offsets
// [begin, end] with begin <= end and end - begin == numel * dtype size (overflow-checked); sorted by
// offset the tensors tile the data buffer exactly, from 0 to its last byte; "__metadata__" maps
// strings to strings.
// Deliberate differences: duplicate keys in any header object are rejected (the reference keeps the
// last tensor of a duplicated name); a header starting with whitespace is rejected (InvalidHeaderStart,
// which reference 0.8 does not enforce yet); dimensions must fit in int64 (the reference allows u64
// when another dimension is 0).
SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BERTRAIN_CHECK(fd >= 0, path << ": cannot open: " << std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    BERTRAIN_FAIL(path << ": cannot stat: " << std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    BERTRAIN_FAIL(path << ": not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < kPrefixSize) {
    ::close(fd);
    BERTRAIN_FAIL(path << ": file is " << file_size << " bytes; expected at least 8 (the header length)");
  }
  void* map = ::mmap(nullptr, static_cast<std::size_t>(file_size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  BERTRAIN_CHECK(map != MAP_FAILED, path << ": cannot mmap " << file_size << " bytes: " << std::strerror(map_errno));
  map_ = static_cast<const uint8_t*>(map);
  map_size_ = static_cast<std::size_t>(file_size);

  try {
    uint64_t header_size = 0;
    for (std::size_t i = 0; i < kPrefixSize; ++i) header_size |= static_cast<uint64_t>(map_[i]) << (8 * i);
    BERTRAIN_CHECK(header_size <= kMaxHeaderSize, path << ": header length " << header_size
                                                       << " exceeds the limit of " << kMaxHeaderSize << " bytes");
    BERTRAIN_CHECK(kPrefixSize + header_size <= file_size,
                   path << ": header length " << header_size << " needs a file of at least " << kPrefixSize + header_size
                        << " bytes but the file has " << file_size);
    const uint8_t* header_begin = map_ + kPrefixSize;
    const std::size_t header_len = static_cast<std::size_t>(header_size);
    const std::size_t bad = first_invalid_utf8(header_begin, header_len);
    BERTRAIN_CHECK(bad == header_len, path << ": header is not valid UTF-8 (bad byte 0x" << std::hex
                                           << static_cast<int>(header_begin[bad]) << std::dec << " at header offset "
                                           << bad << ")");
    BERTRAIN_CHECK(header_len > 0 && header_begin[0] == '{',
                   path << ": header must be a JSON object starting with '{' but "
                        << (header_len == 0 ? std::string("it is empty")
                                            : "starts with '" + std::string(1, static_cast<char>(header_begin[0])) + "'"));
    const char* text = reinterpret_cast<const char*>(header_begin);
    // JSON never holds a raw NUL, but nlohmann stops at one as if the input ended, which would accept
    // "{}\0<anything>"; the reference rejects such headers, so reject them before parsing.
    const void* nul = header_len ? std::memchr(text, '\0', header_len) : nullptr;
    BERTRAIN_CHECK(nul == nullptr, path << ": header is not valid JSON: NUL byte at header offset "
                                        << static_cast<const char*>(nul) - text);
    const nlohmann::json header = parse_header(path, text, text + header_len);
    BERTRAIN_CHECK(header.is_object(), path << ": header must be a JSON object, found " << json_kind(header));

    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      const nlohmann::json& entry = it.value();
      if (name == kMetadataKey) {
        if (entry.is_null()) continue;  // the reference reads null as "no metadata"
        BERTRAIN_CHECK(entry.is_object(),
                       path << ": \"__metadata__\" must be an object of strings, found " << json_kind(entry));
        for (auto m = entry.begin(); m != entry.end(); ++m) {
          BERTRAIN_CHECK(m.value().is_string(), path << ": \"__metadata__\" value of key '" << m.key()
                                                     << "' must be a string, found " << json_kind(m.value()));
          metadata_[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      const std::string where = path + ": tensor '" + name + "'";
      BERTRAIN_CHECK(entry.is_object(), where << ": expected an object with dtype, shape and data_offsets, found "
                                              << json_kind(entry));
      for (const char* field : {"dtype", "shape", "data_offsets"}) {
        BERTRAIN_CHECK(entry.contains(field), where << ": missing field \"" << field << "\"");
      }
      TensorInfo info;
      info.name = name;

      const nlohmann::json& dtype = entry["dtype"];
      BERTRAIN_CHECK(dtype.is_string(), where << ": \"dtype\" must be a string, found " << json_kind(dtype));
      const std::string dtype_str = dtype.get<std::string>();
      BERTRAIN_CHECK(parse_dtype(dtype_str, &info.dtype),
                     where << ": unknown dtype '" << dtype_str
                           << "'; expected one of BOOL U8 I8 I16 U16 I32 U32 I64 U64 F16 BF16 F32 F64");

      const nlohmann::json& shape = entry["shape"];
      BERTRAIN_CHECK(shape.is_array(), where << ": \"shape\" must be an array, found " << json_kind(shape));
      for (std::size_t d = 0; d < shape.size(); ++d) {
        const uint64_t dim = json_u64(shape[d], where + ": shape dimension " + std::to_string(d));
        BERTRAIN_CHECK(dim <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                       where << ": shape dimension " << d << " is " << dim << "; expected at most 2^63-1");
        info.shape.push_back(static_cast<int64_t>(dim));
      }

      const nlohmann::json& offsets = entry["data_offsets"];
      BERTRAIN_CHECK(offsets.is_array() && offsets.size() == 2,
                     where << ": \"data_offsets\" must be an array [begin, end], found "
                           << (offsets.is_array() ? "an array of " + std::to_string(offsets.size()) + " elements"
                                                  : json_kind(offsets)));
      info.begin = json_u64(offsets[0], where + ": data_offsets begin");
      info.end = json_u64(offsets[1], where + ": data_offsets end");
      BERTRAIN_CHECK(info.begin <= info.end,
                     where << ": data_offsets [" << info.begin << ", " << info.end << "] has begin > end");

      const uint64_t nbytes = checked_nbytes(where, info.dtype, info.shape);
      BERTRAIN_CHECK(info.end - info.begin == nbytes,
                     where << ": data_offsets span " << info.end - info.begin << " bytes but shape "
                           << shape_string(info.shape) << " of " << dtype_str << " needs " << nbytes);
      tensors_.push_back(std::move(info));
    }

    // Sorted by offset, the tensors must tile the data buffer: no gap, no overlap, nothing left over.
    const uint64_t data_size = file_size - kPrefixSize - header_size;
    std::vector<const TensorInfo*> by_offset;
    for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
      return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
    });
    uint64_t covered = 0;
    const TensorInfo* previous = nullptr;
    for (const TensorInfo* t : by_offset) {
      const std::string prev_desc =
          previous ? "tensor '" + previous->name + "' [" + std::to_string(previous->begin) + ", " +
                         std::to_string(previous->end) + ")"
                   : std::string("the data buffer");
      BERTRAIN_CHECK(t->begin <= covered, path << ": tensor '" << t->name << "' starts at byte " << t->begin << " but "
                                               << prev_desc << (previous ? " ends" : " starts") << " at " << covered
                                               << ": a " << t->begin - covered
                                               << "-byte gap; expected contiguous tensors");
      BERTRAIN_CHECK(t->begin >= covered, path << ": tensor '" << t->name << "' [" << t->begin << ", " << t->end
                                               << ") overlaps " << prev_desc << "; expected it to start at byte "
                                               << covered);
      covered = t->end;
      previous = t;
    }
    BERTRAIN_CHECK(covered <= data_size, path << ": tensor '" << (previous ? previous->name : "") << "' ends at byte "
                                              << covered << " but the data buffer has only " << data_size
                                              << " bytes (truncated file?)");
    BERTRAIN_CHECK(covered == data_size, path << ": data buffer has " << data_size << " bytes but the tensors cover "
                                              << covered << "; expected the last tensor to end at the end of the file");

    data_ = map_ + kPrefixSize + header_len;
    std::sort(tensors_.begin(), tensors_.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
    for (std::size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
  } catch (...) {
    release();  // the destructor does not run when the constructor throws
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() { release(); }

void SafetensorsFile::release() noexcept {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_size_);
  map_ = nullptr;
  map_size_ = 0;
  data_ = nullptr;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      map_size_(std::exchange(other.map_size_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      tensors_(std::move(other.tensors_)),
      index_(std::move(other.index_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_size_ = std::exchange(other.map_size_, 0);
    data_ = std::exchange(other.data_, nullptr);
    tensors_ = std::move(other.tensors_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

bool SafetensorsFile::contains(const std::string& name) const { return index_.count(name) != 0; }

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = index_.find(name);
  BERTRAIN_CHECK(it != index_.end(),
                 path_ << ": no tensor named '" << name << "' (the file has " << tensors_.size() << " tensors)");
  return tensors_[it->second];
}

const uint8_t* SafetensorsFile::raw(const std::string& name) const {
  const TensorInfo& t = info(name);
  BERTRAIN_CHECK(data_ != nullptr, path_ << ": tensor '" << name << "': file was moved from");
  return data_ + t.begin;
}

void decode_floats(DType dtype, const uint8_t* p, std::size_t n, float* out) {
  switch (dtype) {
    case DType::F16:
      for (std::size_t i = 0; i < n; ++i) out[i] = f16_to_float(load<uint16_t>(p, i));
      break;
    case DType::BF16:
      for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_float(load<uint16_t>(p, i));
      break;
    case DType::F32:
      if (n > 0) std::memcpy(out, p, n * sizeof(float));
      break;
    case DType::F64:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<double>(p, i));
      break;
    default:
      BERTRAIN_FAIL("decode_floats: " << dtype_name(dtype) << " is not a float dtype");
  }
}

std::vector<float> SafetensorsFile::read_float(const std::string& name) const {
  const TensorInfo& t = info(name);
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  read_float_into(name, out.data(), out.size());
  return out;
}

void SafetensorsFile::read_float_into(const std::string& name, float* out, std::size_t count) const {
  const TensorInfo& t = info(name);
  BERTRAIN_CHECK(dtype_is_float(t.dtype), path_ << ": tensor '" << name << "' has dtype " << dtype_name(t.dtype)
                                                << "; read_float expects F16, BF16, F32 or F64 (use read_int)");
  const std::size_t n = static_cast<std::size_t>(t.numel());
  BERTRAIN_CHECK(count == n, path_ << ": tensor '" << name << "' has " << n << " elements but the destination holds "
                                   << count);
  BERTRAIN_CHECK(out != nullptr || n == 0, path_ << ": tensor '" << name << "': null destination");
  decode_floats(t.dtype, raw(name), n, out);
}

std::vector<int64_t> SafetensorsFile::read_int(const std::string& name) const {
  const TensorInfo& t = info(name);
  BERTRAIN_CHECK(!dtype_is_float(t.dtype), path_ << ": tensor '" << name << "' has dtype " << dtype_name(t.dtype)
                                                 << "; read_int expects BOOL or an integer dtype (use read_float)");
  const std::size_t n = static_cast<std::size_t>(t.numel());
  const uint8_t* p = raw(name);
  std::vector<int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::BOOL: out[i] = p[i] != 0 ? 1 : 0; break;  // any non-zero byte reads as true, as in numpy
      case DType::U8: out[i] = p[i]; break;
      case DType::I8: out[i] = load<int8_t>(p, i); break;
      case DType::I16: out[i] = load<int16_t>(p, i); break;
      case DType::U16: out[i] = load<uint16_t>(p, i); break;
      case DType::I32: out[i] = load<int32_t>(p, i); break;
      case DType::U32: out[i] = load<uint32_t>(p, i); break;
      case DType::I64: out[i] = load<int64_t>(p, i); break;
      case DType::U64: {
        const uint64_t v = load<uint64_t>(p, i);
        BERTRAIN_CHECK(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                       path_ << ": tensor '" << name << "' element " << i << " is " << v
                             << "; expected at most 2^63-1 to fit int64");
        out[i] = static_cast<int64_t>(v);
        break;
      }
      default:
        BERTRAIN_FAIL(path_ << ": tensor '" << name << "': unhandled integer dtype " << dtype_name(t.dtype));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writer

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data) {
  BERTRAIN_CHECK(name != kMetadataKey,
                 "SafetensorsWriter: '__metadata__' is reserved for file metadata and cannot name a tensor");
  for (const Entry& e : entries_) {
    BERTRAIN_CHECK(e.name != name, "SafetensorsWriter: tensor '" << name << "' added twice; expected unique names");
  }
  const uint64_t nbytes = checked_nbytes("SafetensorsWriter: tensor '" + name + "'", dtype, shape);
  BERTRAIN_CHECK(data != nullptr || nbytes == 0,
                 "SafetensorsWriter: tensor '" << name << "': null data for " << nbytes << " bytes");
  entries_.push_back(Entry{name, dtype, std::move(shape), data});
}

void SafetensorsWriter::write(const std::string& path) const {
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries_) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) { return a->name < b->name; });

  // ordered_json keeps "__metadata__" first and the tensors in data order, as readers expect to see them.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header[kMetadataKey] = metadata_;
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const Entry* e : sorted) {
    const uint64_t nbytes = checked_nbytes(path + ": tensor '" + e->name + "'", e->dtype, e->shape);
    uint64_t next = 0;
    BERTRAIN_CHECK(!__builtin_add_overflow(offset, nbytes, &next), path << ": tensors total more than 2^64-1 bytes");
    sizes.push_back(nbytes);
    header[e->name] = {{"dtype", dtype_name(e->dtype)}, {"shape", e->shape}, {"data_offsets", {offset, next}}};
    offset = next;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    // Names and metadata must be valid UTF-8 to be written as JSON strings.
    BERTRAIN_FAIL(path << ": cannot encode the safetensors header: " << e.what());
  }
  // Pad with spaces so the data buffer starts 8-byte aligned, like the reference writer.
  text.append((kPrefixSize - text.size() % kPrefixSize) % kPrefixSize, ' ');

  uint8_t prefix[kPrefixSize];
  const uint64_t n = text.size();
  for (std::size_t i = 0; i < kPrefixSize; ++i) prefix[i] = static_cast<uint8_t>(n >> (8 * i));

  AtomicFile file(path);
  file.write(prefix, sizeof prefix);
  file.write(text.data(), text.size());
  for (std::size_t i = 0; i < sorted.size(); ++i) file.write(sorted[i]->data, static_cast<std::size_t>(sizes[i]));
  file.commit();
}

}  // namespace bertrain
