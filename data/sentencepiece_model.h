// The parts of a SentencePiece model file (sentencepiece_model.proto's ModelProto, protobuf's wire format) that
// transformers reads to build a tokenizer from it: the pieces with their scores and types, the trainer's model
// type, and the normalizer's precompiled character map. Read by hand: the format is five wire types, and a
// protobuf dependency for three fields would be heavier than the reader. Every other field is skipped.
#pragma once

#include <string>
#include <vector>

namespace bertrain {

struct SentencePieceModel {
  // sentencepiece_model.proto's SentencePiece.Type.
  enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
  // TrainerSpec.ModelType.
  enum ModelType { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };

  struct Piece {
    std::string text;
    float score = 0;
    int type = kNormal;
  };

  std::vector<Piece> pieces;
  int model_type = kUnigram;
  std::string precompiled_charsmap;  // bytes; empty when the model normalizes nothing (or its rule is "identity")
};

// Throws Error naming `path` and the byte offset where the file stops being a SentencePiece model (truncated,
// an invalid wire type, a piece that is not UTF-8, no pieces).
SentencePieceModel read_sentencepiece_model(const std::string& path);

// The same from the file's bytes; `source` names them in errors.
SentencePieceModel parse_sentencepiece_model(const std::string& bytes, const std::string& source);

}  // namespace bertrain
