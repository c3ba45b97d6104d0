// Chunked input (see chunked_input.h).
#include "data/chunked_input.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "core/utf8.h"

namespace bertrain {

ChunkedInput::ChunkedInput(const std::string& path, const std::string& kind, std::size_t chunk_size)
    : path_(path), kind_(kind), chunk_size_(chunk_size) {
  BERTRAIN_CHECK(chunk_size_ > 0, "chunk size must be positive");
  buf_.reserve(3 * chunk_size_);
  require_readable_file(path, kind);  // a directory would read as an empty file
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BERTRAIN_CHECK(fd_ >= 0, "cannot open " << kind << " '" << path << "': " << std::strerror(errno));
}

ChunkedInput::~ChunkedInput() {
  if (fd_ >= 0) ::close(fd_);
}

ChunkedInput::ChunkedInput(const std::string* text, const std::string& source, std::size_t chunk_size)
    : path_(source), kind_("text"), text_(text),
      chunk_size_(chunk_size > 0 ? chunk_size : std::max<std::size_t>(text->size(), 1)) {}

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
  if (ended_) {
    check_text(true);
    return false;
  }
  // Drop what the reader has released, so the window stays one chunk plus the reader's current line; keep what
  // is not checked yet, and the few bytes before it that a message about it quotes.
  const std::uint64_t keep = std::min(keep_, checked_ > kContextBytes ? checked_ - kContextBytes : 0);
  if (keep > base_) {
    const std::uint64_t drop = std::min<std::uint64_t>(keep, end()) - base_;
    buf_.erase(0, static_cast<std::size_t>(drop));
    base_ += drop;
  }
  const std::size_t old_size = buf_.size();
  buf_.resize(old_size + chunk_size_);
  const std::size_t got = read_chunk(&buf_[old_size], chunk_size_);
  buf_.resize(old_size + got);
  if (got == 0) ended_ = true;
  check_text(ended_);
  return got > 0;
}

void ChunkedInput::check_text(bool at_end) {
  // A UTF-16 byte-order mark is told apart from a stray byte by its second byte.
  if (checked_ == 0 && end() < 2 && !at_end) return;
  while (checked_ < end()) {
    const auto byte = static_cast<unsigned char>(at(checked_));
    if (byte < 0x80) {
      if (byte == 0) not_text(checked_, 1);
      ++checked_;
      if (byte == '\n') {
        ++line_;
        line_start_ = checked_;
      }
      continue;
    }
    bool valid = true;
    const std::size_t n = static_cast<std::size_t>(end() - checked_);
    const std::size_t length = utf8_sequence(data(checked_), n, &valid);
    if (!valid) {
      if (length == n && !at_end) return;  // perhaps a character the next chunk completes
      not_text(checked_, length);
    }
    checked_ += length;
  }
}

namespace {

// `path` as one shell word, for a command line in a message.
std::string shell_word(const std::string& path) {
  static const char kPlain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./+-";
  if (path.find_first_not_of(kPlain) == std::string::npos) {
    return path;
  }
  std::string quoted = "'";
  for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// "d.csv" -> "d.utf8.csv": where a converted copy could go, keeping the extension that tells the format.
std::string converted_name(const std::string& path) {
  const std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + ".utf8" + p.extension().string())).string();
}

std::string iconv_command(const char* from, const std::string& path) {
  return std::string("iconv -f ") + from + " -t utf-8 " + shell_word(path) + " > " + shell_word(converted_name(path));
}

}  // namespace

void ChunkedInput::not_text(std::uint64_t pos, std::size_t length) const {
  std::ostringstream os;
  os << path_ << ":" << line_ << ": ";
  const unsigned char first = static_cast<unsigned char>(at(pos));
  if (pos == 0 && end() >= 2 && ((first == 0xFF && static_cast<unsigned char>(at(1)) == 0xFE) ||
                                 (first == 0xFE && static_cast<unsigned char>(at(1)) == 0xFF))) {
    os << "not UTF-8 text: the file starts with a UTF-16 byte-order mark ("
       << escape_for_message(std::string(data(0), 2)) << "); convert it to UTF-8: " << iconv_command("utf-16", path_);
    throw_error(__FILE__, __LINE__, os.str());
  }
  // What precedes the byte on its line, as far as the window keeps it (at least kContextBytes of it).
  std::uint64_t from = std::max({line_start_, pos > kContextBytes ? pos - kContextBytes : 0, base_});
  while (from < pos && (static_cast<unsigned char>(at(from)) & 0xC0) == 0x80) ++from;  // start at a character
  const std::string before = escape_for_message(std::string(data(from), static_cast<std::size_t>(pos - from)));
  const std::string after =
      before.empty() ? "" : std::string(", after \"") + (from > line_start_ ? "..." : "") + before + "\"";
  if (first == 0) {
    os << "not a text file: a NUL byte at byte offset " << pos << " of the file" << after
       << "; a dataset must be UTF-8 text (a UTF-16 file converts with " << iconv_command("utf-16", path_) << ")";
  } else {
    os << "invalid UTF-8 (" << (length == 1 ? "byte " : "bytes ") << escape_for_message(std::string(data(pos), length))
       << " at byte offset " << pos << " of the file" << after << "): the file is not UTF-8 text; convert it, e.g. "
       << "from Latin-1: " << iconv_command("latin1", path_);
  }
  throw_error(__FILE__, __LINE__, os.str());
}

std::size_t ChunkedInput::read_chunk(char* out, std::size_t max) {
  if (text_ != nullptr) {
    const std::size_t n = std::min(max, text_->size() - text_pos_);
    std::memcpy(out, text_->data() + text_pos_, n);
    text_pos_ += n;
    return n;
  }
  ssize_t got;
  while ((got = ::read(fd_, out, max)) < 0 && errno == EINTR) {
  }
  BERTRAIN_CHECK(got >= 0, "cannot read " << kind_ << " '" << path_ << "': " << std::strerror(errno));
  return static_cast<std::size_t>(got);
}

bool ChunkedInput::ready(std::uint64_t pos) const {
  if (ended_ || text_ != nullptr || find_loaded("\n", std::max(pos, base_)) < end()) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;  // readable, at its end, or an error the next read reports
}

}  // namespace bertrain
