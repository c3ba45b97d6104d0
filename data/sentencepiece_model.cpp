#include "data/sentencepiece_model.h"

#include <cstdint>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "core/utf8.h"

namespace bertrain {

namespace {

// Field numbers of sentencepiece_model.proto.
constexpr uint32_t kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
constexpr uint32_t kPieceText = 1, kPieceScore = 2, kPieceType = 3;
constexpr uint32_t kTrainerModelType = 3;
constexpr uint32_t kNormalizerPrecompiledCharsmap = 2;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// One message's bytes [begin, end) of the file; offsets in errors are the file's.
class Reader {
 public:
  Reader(const std::string& bytes, std::size_t begin, std::size_t end, const std::string& source)
      : bytes_(bytes), pos_(begin), end_(end), source_(source) {}

  bool done() const { return pos_ >= end_; }

  // The next field's number and wire type; refuses the wire types a SentencePiece model cannot hold (groups,
  // and numbers no protobuf writes).
  void next_key(uint32_t* field, uint32_t* wire) {
    const std::size_t at = pos_;
    const uint64_t key = varint();
    *field = static_cast<uint32_t>(key >> 3);
    *wire = static_cast<uint32_t>(key & 7);
    if (*field == 0 || key >> 32 != 0) fail(at, "an invalid field number");
    if (*wire != kVarint && *wire != kFixed64 && *wire != kLengthDelimited && *wire != kFixed32) {
      fail(at, "field " + std::to_string(*field) + " has wire type " + std::to_string(*wire) +
                   ", which no SentencePiece model holds");
    }
  }

  uint64_t varint() {
    const std::size_t at = pos_;
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= end_) fail(at, "a number cut off by the end of its message");
      const auto byte = static_cast<unsigned char>(bytes_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail(at, "a number longer than 10 bytes");
  }

  // A length-delimited field's [begin, end).
  std::pair<std::size_t, std::size_t> span() {
    const std::size_t at = pos_;
    const uint64_t n = varint();
    if (n > end_ - pos_) fail(at, "a field of " + std::to_string(n) + " bytes where " +
                                      std::to_string(end_ - pos_) + " remain");
    const std::size_t begin = pos_;
    pos_ += static_cast<std::size_t>(n);
    return {begin, pos_};
  }

  float fixed32_float() {
    if (end_ - pos_ < 4) fail(pos_, "a 4-byte number cut off by the end of its message");
    uint32_t bits = 0;
    for (int k = 3; k >= 0; --k) bits = (bits << 8) | static_cast<unsigned char>(bytes_[pos_ + k]);  // little-endian
    pos_ += 4;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }

  void skip(uint32_t wire) {
    if (wire == kVarint) {
      varint();
    } else if (wire == kLengthDelimited) {
      span();
    } else {
      const std::size_t n = wire == kFixed64 ? 8 : 4;
      if (end_ - pos_ < n) fail(pos_, "a " + std::to_string(n) + "-byte number cut off by the end of its message");
      pos_ += n;
    }
  }

  // Checks a field's wire type before it is read as `expected`.
  void expect(uint32_t field, uint32_t wire, uint32_t expected, const char* what) {
    if (wire != expected) fail(pos_, std::string(what) + " (field " + std::to_string(field) + ") has wire type " +
                                         std::to_string(wire) + ", not " + std::to_string(expected));
  }

  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    BERTRAIN_FAIL(source_ << ": not a SentencePiece model: byte " << at << ": " << what);
  }

  std::size_t pos() const { return pos_; }

 private:
  const std::string& bytes_;
  std::size_t pos_, end_;
  const std::string& source_;
};

SentencePieceModel::Piece read_piece(Reader r, const std::string& bytes) {
  SentencePieceModel::Piece piece;
  while (!r.done()) {
    uint32_t field = 0, wire = 0;
    r.next_key(&field, &wire);
    if (field == kPieceText) {
      r.expect(field, wire, kLengthDelimited, "a piece's text");
      const auto [begin, end] = r.span();
      piece.text = bytes.substr(begin, end - begin);
      if (!is_valid_utf8(piece.text)) {
        r.fail(begin, "the piece \"" + escape_for_message(piece.text) + "\" is not UTF-8 text");
      }
    } else if (field == kPieceScore) {
      r.expect(field, wire, kFixed32, "a piece's score");
      piece.score = r.fixed32_float();
    } else if (field == kPieceType) {
      r.expect(field, wire, kVarint, "a piece's type");
      const std::size_t at = r.pos();
      const uint64_t type = r.varint();
      if (type < SentencePieceModel::kNormal || type > SentencePieceModel::kByte) {
        r.fail(at, "a piece's type is " + std::to_string(type) + " (sentencepiece defines 1 to 6)");
      }
      piece.type = static_cast<int>(type);
    } else {
      r.skip(wire);
    }
  }
  return piece;
}

}  // namespace

SentencePieceModel parse_sentencepiece_model(const std::string& bytes, const std::string& source) {
  SentencePieceModel model;
  Reader r(bytes, 0, bytes.size(), source);
  while (!r.done()) {
    uint32_t field = 0, wire = 0;
    r.next_key(&field, &wire);
    if (field == kModelPieces) {
      r.expect(field, wire, kLengthDelimited, "a piece");
      const auto [begin, end] = r.span();
      model.pieces.push_back(read_piece(Reader(bytes, begin, end, source), bytes));
    } else if (field == kModelTrainerSpec || field == kModelNormalizerSpec) {
      r.expect(field, wire, kLengthDelimited, field == kModelTrainerSpec ? "the trainer spec" : "the normalizer spec");
      const auto [begin, end] = r.span();
      Reader spec(bytes, begin, end, source);
      while (!spec.done()) {
        uint32_t f = 0, w = 0;
        spec.next_key(&f, &w);
        if (field == kModelTrainerSpec && f == kTrainerModelType) {
          spec.expect(f, w, kVarint, "the model type");
          model.model_type = static_cast<int>(spec.varint() & 0x7FFFFFFF);
        } else if (field == kModelNormalizerSpec && f == kNormalizerPrecompiledCharsmap) {
          spec.expect(f, w, kLengthDelimited, "the precompiled character map");
          const auto [map_begin, map_end] = spec.span();
          model.precompiled_charsmap = bytes.substr(map_begin, map_end - map_begin);
        } else {
          spec.skip(w);
        }
      }
    } else {
      r.skip(wire);
    }
  }
  if (model.pieces.empty()) r.fail(0, "no pieces");
  return model;
}

SentencePieceModel read_sentencepiece_model(const std::string& path) {
  return parse_sentencepiece_model(read_file(path, "SentencePiece model"), path);
}

}  // namespace bertrain
