#include "tools/args.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include "core/cpu_threads.h"
#include "core/files.h"
#include "tools/near_names.h"

namespace bertrain {

namespace {

// What --help shows for an option's value when nothing better was said: N for an integer default, X for a real
// one, else the option's name in capitals (as Python's argparse does).
std::string inferred_value_name(const std::string& name, const std::string& default_value) {
  if (!default_value.empty()) {
    std::size_t used = 0;
    try {
      (void)std::stod(default_value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == default_value.size()) {
      return default_value.find_first_of(".eE") == std::string::npos ? "N" : "X";
    }
  }
  std::string upper;
  for (char c : name) upper += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return upper;
}

}  // namespace

bool has_option_in(const std::vector<std::string>& args, const std::string& name) {
  for (const std::string& a : args) {
    if (a == "--" + name || a.rfind("--" + name + "=", 0) == 0) return true;
  }
  return false;
}

std::string option_value_in(const std::vector<std::string>& args, const std::string& name) {
  std::string value;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--" + name && i + 1 < args.size()) {
      value = args[++i];
    } else if (args[i].rfind("--" + name + "=", 0) == 0) {
      value = args[i].substr(name.size() + 3);
    }
  }
  return value;
}

ArgParser& ArgParser::option(const std::string& name, const std::string& default_value, const std::string& help,
                             bool required) {
  options_[name] = Option{default_value, help, inferred_value_name(name, default_value), required, false};
  order_.push_back(name);
  return *this;
}

ArgParser& ArgParser::value_name(const std::string& placeholder) {
  options_.at(order_.back()).value_name = placeholder;
  return *this;
}

void ArgParser::flag(const std::string& name, const std::string& help) {
  options_[name] = Option{"", help, "", false, true};
  order_.push_back(name);
}

void ArgParser::positionals(const std::string& name, const std::string& help, std::size_t min_count,
                            std::size_t max_count) {
  positional_name_ = name;
  positional_help_ = help;
  positional_min_ = min_count;
  positional_max_ = max_count;
}

bool ArgParser::parse(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    if (arg.rfind("--", 0) != 0) {
      // "-m", "-model": an option with one dash (a negative number is a value, after its option).
      if (arg.size() > 1 && arg[0] == '-' && std::isdigit(static_cast<unsigned char>(arg[1])) == 0 && arg[1] != '.') {
        const std::string hint = options_.count(arg.substr(1)) != 0 ? " (did you mean -" + arg + "?)"
                                                                     : " (options have two dashes: see --help)";
        throw UsageError(command_ + ": unknown option '" + arg + "'" + hint);
      }
      if (positional_name_.empty() || positional_values_.size() == positional_max_) {
        throw UsageError(unexpected_argument(arg));
      }
      positional_values_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    const auto eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const auto it = options_.find(name);
    if (it == options_.end()) throw UsageError(unknown_option(name));
    if (it->second.is_flag) {
      if (inline_value) throw UsageError(command_ + ": --" + name + " takes no value");
      values_[name] = "1";
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) throw UsageError(command_ + ": --" + name + " needs a value");
      value = args[++i];
    }
    values_[name] = value;
  }
  // Every required option missing, in one message: "train: --model, --train-data and --out are required".
  std::vector<std::string> missing;
  for (const std::string& name : order_) {
    if (options_.at(name).required && values_.count(name) == 0) missing.push_back("--" + name);
  }
  if (positional_values_.size() < positional_min_) missing.push_back(positional_name_);
  if (!missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < missing.size(); ++i) {
      list += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + missing[i];
    }
    throw UsageError(command_ + ": " + list + (missing.size() == 1 ? " is" : " are") + " required (usage: " +
                     usage_line() + ")");
  }
  return true;
}

std::string ArgParser::unknown_option(const std::string& name) const {
  const std::string alias = option_alias(name, order_);
  const std::vector<std::string> near = alias.empty() ? near_names(name, order_) : std::vector<std::string>{alias};
  // tune --device 0: train's --device, given after --, or tune's own --devices.
  if (std::find(passed_on_.begin(), passed_on_.end(), name) != passed_on_.end()) {
    std::string own;
    for (const std::string& n : near) own += (own.empty() ? "" : " or ") + std::string("--") + n;
    return command_ + ": --" + name + " is not a " + command_ + " option: " + passed_on_advice_ +
           (own.empty() ? "" : " (or " + command_ + "'s own " + own + "?)");
  }
  const std::string hint = did_you_mean(near, "--");
  return command_ + ": unknown option '--" + name + "'" + (hint.empty() ? " (see --help)" : hint);
}

// A word where an option belongs (`predict runs/a`): the option it may have been the value of, else the usage line.
std::string ArgParser::unexpected_argument(const std::string& arg) const {
  const auto has = [&](const char* name) { return options_.count(name) != 0; };
  std::string hint;
  if (has("model") && directory_exists(arg)) {
    hint = " (did you mean --model " + arg + "?)";
  } else if (file_exists(arg) && (has("data") || has("train-data"))) {
    hint = std::string(" (did you mean ") + (has("data") ? "--data " : "--train-data ") + arg + "?)";
  } else if (has("text") && values_.count("text") != 0) {  // --text hello world: the text's next word
    hint = " (a text of several words needs quotes: --text '" + values_.at("text") + " " + arg + "')";
  } else if (has("text")) {
    hint = " (did you mean --text '" + arg + "'?)";
  } else {
    hint = " (usage: " + usage_line() + ")";
  }
  return command_ + ": unexpected argument '" + arg + "'" + hint;
}

std::string ArgParser::get(const std::string& name) const {
  const auto v = values_.find(name);
  if (v != values_.end()) return v->second;
  const auto o = options_.find(name);
  if (o == options_.end()) throw std::logic_error("undeclared option --" + name);
  return o->second.default_value;
}

int ArgParser::get_threads() const {
  const int threads = get_int("threads");
  if (threads < 0 || threads > kMaxCpuThreads) {
    throw UsageError(command_ + ": --threads must be between 0 (all cores) and " + std::to_string(kMaxCpuThreads) +
                     ", got " + get("threads"));
  }
  return threads;
}

constexpr int kIntLowest = -2147483647, kIntHighest = 2147483647;

int ArgParser::get_int(const std::string& name) const { return get_int_in(name, kIntLowest, kIntHighest); }

int ArgParser::get_int_in(const std::string& name, int lo, int hi) const {
  const std::string text = get(name);
  // Without a range of its own an int flag's command checks its bounds after: past an int it is said as a double
  // past its range is ("--batch-size must be between -2147483647 and ..." read as if -5 were allowed).
  const bool own_range = lo != kIntLowest || hi != kIntHighest;
  const std::string range =
      command_ + ": --" + name +
      (own_range ? " must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + text
                 : " is out of an integer's range (" + std::to_string(lo) + " to " + std::to_string(hi) + "), got '" +
                       text + "'");
  long long value = 0;
  std::size_t used = 0;
  // std::stoll skips leading white space (and would take " 3" where "3 " is refused): a number is its text alone.
  const bool starts_well = !text.empty() && text.find_first_of(" \t\n\r\f\v") != 0;
  try {
    if (starts_well) value = std::stoll(text, &used);
  } catch (const std::out_of_range&) {
    throw UsageError(range);
  } catch (const std::exception&) {
  }
  if (used != text.size() || text.empty()) {
    throw UsageError(command_ + ": --" + name + " expects an integer, got '" + text + "'");
  }
  if (value < lo || value > hi) throw UsageError(range);
  return static_cast<int>(value);
}

uint64_t ArgParser::get_uint64(const std::string& name) const {
  const std::string text = get(name);
  // std::stoull would take "-1" as 2^64 - 1: only digits are a seed.
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  if (digits) {
    try {
      return std::stoull(text);
    } catch (const std::out_of_range&) {
      throw UsageError(command_ + ": --" + name + " must be at most 18446744073709551615 (2^64 - 1), got " + text);
    }
  }
  const bool negative = text.size() > 1 && text[0] == '-' && text.find_first_not_of("0123456789", 1) == std::string::npos;
  throw UsageError(command_ + ": --" + name + (negative ? " must be 0 or more, got " : " expects an integer, got '") +
                   text + (negative ? "" : "'"));
}

double ArgParser::get_double(const std::string& name) const {
  const std::string text = get(name);
  // A decimal number alone: std::stod also skips leading white space and reads hexadecimal ("0x10" is 16).
  const bool decimal = !text.empty() && text.find_first_of(" \t\n\r\f\v") != 0 &&
                       text.find_first_of("xX") == std::string::npos;
  try {
    std::size_t used = 0;
    const double value = decimal ? std::stod(text, &used) : 0;
    if (decimal && used == text.size()) return value;
  } catch (const std::out_of_range&) {
    throw UsageError(command_ + ": --" + name + " is out of a double's range, got '" + text + "'");
  } catch (const std::exception&) {
  }
  throw UsageError(command_ + ": --" + name + " expects a number, got '" + text + "'");
}

bool ArgParser::get_flag(const std::string& name) const { return values_.count(name) != 0; }

bool ArgParser::given(const std::string& name) const {
  if (options_.count(name) == 0) throw std::logic_error("undeclared option --" + name);
  return values_.count(name) != 0;
}

void ArgParser::refuse_empty(const std::string& name, const std::string& advice) const {
  if (given(name) && get(name).empty()) throw UsageError(command_ + ": --" + name + " is empty: " + advice);
}

namespace {

// One entry of --help: the option in a column of kHelpIndent characters (a longer one gets its own line), then its
// text wrapped at word boundaries to kHelpWidth columns, continuation lines under the text's start.
constexpr std::size_t kHelpIndent = 28, kHelpWidth = 110;

std::string help_line(const std::string& left, const std::string& text) {
  std::string out = left;
  if (left.size() + 1 > kHelpIndent) {
    out += "\n" + std::string(kHelpIndent, ' ');
  } else {
    out += std::string(kHelpIndent - left.size(), ' ');
  }
  std::size_t column = kHelpIndent, pos = 0;
  bool first = true;
  while (pos < text.size()) {
    std::size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(pos, end - pos);
    if (!first && column + 1 + word.size() > kHelpWidth) {
      out += "\n" + std::string(kHelpIndent, ' ');
      column = kHelpIndent;
      first = true;
    }
    if (!first) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    first = false;
    pos = end + 1;
  }
  return out + "\n";
}

}  // namespace

std::string ArgParser::usage_line() const {
  if (!usage_.empty()) return usage_;
  std::string line = "bertrain " + command_;
  for (const std::string& name : order_) {
    if (options_.at(name).required) line += " --" + name + " " + options_.at(name).value_name;
  }
  return line + " [options]" + (positional_name_.empty() ? "" : " " + positional_usage());
}

std::string ArgParser::help() const {
  std::ostringstream os;
  os << "usage: " << usage_line() << "\n\n" << summary_ << "\n\n";
  if (!positional_name_.empty()) {
    os << "arguments:\n" << help_line("  " + positional_usage(), positional_help_) << "\n";
  }
  os << "options:\n";
  for (const std::string& name : order_) {
    const Option& o = options_.at(name);
    std::string text = o.help;
    if (o.required) {
      text += " (required)";
    } else if (!o.is_flag && !o.default_value.empty() && o.help.find("(default") == std::string::npos) {
      text += " (default " + o.default_value + ")";  // once: a help text that states its default keeps its own words
    }
    os << help_line("  --" + name + (o.is_flag ? "" : " " + o.value_name), text);
  }
  os << help_line("  --help", "show this help");
  if (!epilog_.empty()) os << "\n" << epilog_;
  return os.str();
}

}  // namespace bertrain
