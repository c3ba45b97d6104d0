// Chunked input (see chunked_input.h).
#include "data/chunked_input.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace bertrain {

ChunkedInput::ChunkedInput(const std::string& path, const std::string& kind, std::size_t chunk_size)
    : path_(path), kind_(kind), chunk_size_(chunk_size) {
  BERTRAIN_CHECK(chunk_size_ > 0, "chunk size must be positive");
  buf_.reserve(3 * chunk_size_);
  // A folder opens as a stream on Linux and reads as nothing, which would pass for an empty file.
  std::error_code ignored;
  BERTRAIN_CHECK(!std::filesystem::is_directory(path, ignored),
                 "cannot read " << kind << " '" << path << "': it is a folder");
  file_.open(path, std::ios::binary);
  BERTRAIN_CHECK(file_, "cannot open " << kind << " '" << path << "': " << std::strerror(errno));
}

ChunkedInput::ChunkedInput(const std::string* text, std::size_t chunk_size)
    : text_(text), chunk_size_(chunk_size > 0 ? chunk_size : std::max<std::size_t>(text->size(), 1)) {}

std::uint64_t ChunkedInput::skip_bom() {
  static constexpr char kBom[] = "\xEF\xBB\xBF";
  for (std::uint64_t i = 0; i < 3; ++i) {
    if (!has(i) || at(i) != kBom[i]) return 0;
  }
  return 3;
}

bool ChunkedInput::has(std::uint64_t pos) {
  while (pos >= end()) {
    if (!fill()) return false;
  }
  return true;
}

std::uint64_t ChunkedInput::find_loaded(const char* set, std::uint64_t from) const {
  const std::size_t found = buf_.find_first_of(set, static_cast<std::size_t>(from - base_));
  return found == std::string::npos ? end() : base_ + found;
}

void ChunkedInput::append(std::string* out, std::uint64_t from, std::uint64_t to) const {
  out->append(buf_, static_cast<std::size_t>(from - base_), static_cast<std::size_t>(to - from));
}

bool ChunkedInput::fill() {
  if (text_ != nullptr && text_pos_ == text_->size()) ended_ = true;  // without growing the window to find out
  if (ended_) return false;
  // Drop what the reader has released, so the window stays one chunk plus the reader's current line.
  if (keep_ > base_) {
    const std::uint64_t drop = std::min<std::uint64_t>(keep_, end()) - base_;
    buf_.erase(0, static_cast<std::size_t>(drop));
    base_ += drop;
  }
  const std::size_t old_size = buf_.size();
  buf_.resize(old_size + chunk_size_);
  const std::size_t got = read_chunk(&buf_[old_size], chunk_size_);
  buf_.resize(old_size + got);
  if (got == 0) ended_ = true;
  return got > 0;
}

std::size_t ChunkedInput::read_chunk(char* out, std::size_t max) {
  if (text_ != nullptr) {
    const std::size_t n = std::min(max, text_->size() - text_pos_);
    std::memcpy(out, text_->data() + text_pos_, n);
    text_pos_ += n;
    return n;
  }
  file_.read(out, static_cast<std::streamsize>(max));
  BERTRAIN_CHECK(!file_.bad(), "cannot read " << kind_ << " '" << path_ << "': " << std::strerror(errno));
  return static_cast<std::size_t>(file_.gcount());
}

}  // namespace bertrain
