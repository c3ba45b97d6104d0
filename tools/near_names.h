// What a mistyped command or option most likely meant: the names within a few edits of it, the names it begins
// (an option's start), and the names other tools give bertrain's options (Hugging Face's --learning-rate is --lr).
// For error messages only: nothing is ever run under a guessed name.
#pragma once

#include <string>
#include <vector>

namespace bertrain {

// Of `names`, those `typed` most likely meant, closest first, at most three: '_' read as '-', then a name of the
// same letters but for one or two edits (one for names of four letters or fewer), or that `typed` begins (three
// letters at least). Empty when none is close.
std::vector<std::string> near_names(const std::string& typed, const std::vector<std::string>& names);

// The option of `options` that another tool's name for it means (learning-rate: lr, output-dir: out,
// num-train-epochs: epochs, ...; '_' read as '-'), with the value that says it where one does (fp16: "precision
// bf16"); empty when `typed` is no such name or `options` lacks its meaning.
std::string option_alias(const std::string& typed, const std::vector<std::string>& options);

// " (did you mean --a or --b?)" for options, " (did you mean a?)" for commands (`prefix` ""), empty for none.
std::string did_you_mean(const std::vector<std::string>& names, const std::string& prefix);

}  // namespace bertrain
