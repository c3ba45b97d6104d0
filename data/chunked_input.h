// Internal to data/: the bytes of a file (or of a string) read in fixed-size chunks into a window, so that
// a reader can stream a file of any size while holding only the chunk being read plus the part its reader
// still needs (in practice the current line). Positions are absolute byte offsets in the input, so a reader
// keeps them across refills, which move the window.
//
// Every byte read is checked to be UTF-8 text: a NUL byte or an invalid UTF-8 sequence throws Error naming the
// input, the line, the byte offset and the bytes (escaped), and saying how to convert the file. The check runs
// as each chunk arrives, before a reader sees its bytes, except for the last up to 3 bytes of a chunk that may
// be the start of a character the next chunk completes: those are checked by the next fill(), which every
// reader calls before it is done with them (they are not ASCII, so no delimiter or line end lies among them).
// A wrongly encoded file is an input error, never repaired: replacing its bytes would silently change the
// text (café in Latin-1 became "caf" after cleaning), and skipping its rows would silently drop exactly the
// rows with accented characters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace bertrain {

class ChunkedInput {
 public:
  // 32 KiB per read already makes the per-read cost vanish. The window (three chunks reserved: one being
  // read, room for the current line) stays below glibc's 128 KiB mmap threshold: freeing an mmapped block
  // raises that threshold for the rest of the process, which would move the engine's later large buffers
  // from mmap onto the heap, at other alignments, just because a dataset was read.
  static constexpr std::size_t kChunkSize = std::size_t{32} << 10;

  // Opens the file; `kind` names it in errors ("cannot open <kind> '<path>': ...").
  ChunkedInput(const std::string& path, const std::string& kind, std::size_t chunk_size = kChunkSize);
  // Reads `text`, which must outlive this object, through the same window (parse_csv's path): all of it in
  // one chunk by default (chunk_size 0), the copy parse_csv always made; smaller chunks are for tests.
  // `source` names it in errors.
  ChunkedInput(const std::string* text, const std::string& source, std::size_t chunk_size = 0);

  ~ChunkedInput();
  ChunkedInput(const ChunkedInput&) = delete;
  ChunkedInput& operator=(const ChunkedInput&) = delete;

  // Offset of the first byte after a leading UTF-8 byte-order mark (0 without one): the BOM is a marker,
  // not text, in every format.
  std::uint64_t skip_bom();

  // Whether the input has a byte at `pos`, reading chunks until it is loaded or the input ends.
  bool has(std::uint64_t pos);
  // The byte at `pos`, which must be loaded (has(pos) true, and not released since).
  char at(std::uint64_t pos) const { return buf_[static_cast<std::size_t>(pos - base_)]; }
  // Pointer to the loaded byte at `pos`; valid until the next has() or fill().
  const char* data(std::uint64_t pos) const { return buf_.data() + (pos - base_); }
  // One past the last loaded byte.
  std::uint64_t end() const { return base_ + buf_.size(); }
  // The first loaded byte in [from, end()) that is one of `set`, or end() when none is.
  std::uint64_t find_loaded(const char* set, std::uint64_t from) const;
  // Appends the loaded bytes [from, to) to *out.
  void append(std::string* out, std::uint64_t from, std::uint64_t to) const;

  // Bytes before `pos` are no longer needed; the next fill() may drop them.
  void release(std::uint64_t pos) { keep_ = pos; }
  // Reads the next chunk after the loaded bytes; false (nothing changed) at the end of the input. Throws Error
  // when the input is not UTF-8 text (see above). From a pipe it returns with what has arrived (at least a byte),
  // not with a whole chunk, so that rows are read as they come.
  bool fill();

  // Whether a reader at `pos` (where the next row starts) can read a line without waiting for input: a line end is
  // loaded after it, the input ended, or more has arrived (always, for a regular file or a string). What a command
  // asks before it waits for more rows of a pipe (predict --data -): the rows it holds are answered first.
  bool ready(std::uint64_t pos) const;

 private:
  // Bytes the window keeps before the first unchecked one, so that a message can quote what precedes a bad byte
  // whatever the chunk size.
  static constexpr std::uint64_t kContextBytes = 32;

  std::size_t read_chunk(char* out, std::size_t max);
  // Checks the loaded bytes from checked_ on; at the end of the input an incomplete last character is an error too.
  void check_text(bool at_end);
  [[noreturn]] void not_text(std::uint64_t at, std::size_t length) const;

  std::string path_, kind_;  // for messages: the file (or the text's source) and what it is
  int fd_ = -1;              // the open file; -1 for a string
  const std::string* text_ = nullptr;
  std::size_t text_pos_ = 0;
  std::size_t chunk_size_;
  std::string buf_;  // bytes [base_, base_ + buf_.size()) of the input
  std::uint64_t base_ = 0;
  std::uint64_t keep_ = 0;  // bytes before this may be dropped
  bool ended_ = false;
  std::uint64_t checked_ = 0;     // bytes before this are UTF-8 text
  std::uint64_t line_start_ = 0;  // offset of the line checked_ is on
  long long line_ = 1;            // that line, 1-based (a file may have more than 2^31)
};

}  // namespace bertrain
