// A file's content fingerprint, to notice that a dataset changed between a run and its --resume: FNV-1a (64-bit)
// over the bytes, with the size. Not cryptographic: it detects edits, not tampering.
#pragma once

#include <string>

namespace bertrain {

// "fnv1a64:<16 hex digits>:<bytes>"; throws Error naming the file when it cannot be read.
std::string file_fingerprint(const std::string& path);

}  // namespace bertrain
