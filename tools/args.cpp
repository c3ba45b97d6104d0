#include "tools/args.h"

#include <cstdio>
#include <sstream>

namespace bertrain {

void ArgParser::option(const std::string& name, const std::string& default_value, const std::string& help,
                       bool required) {
  options_[name] = Option{default_value, help, required, false};
  order_.push_back(name);
}

void ArgParser::flag(const std::string& name, const std::string& help) {
  options_[name] = Option{"", help, false, true};
  order_.push_back(name);
}

void ArgParser::positionals(const std::string& name, const std::string& help, std::size_t min_count) {
  positional_name_ = name;
  positional_help_ = help;
  positional_min_ = min_count;
}

bool ArgParser::parse(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    if (arg.rfind("--", 0) != 0) {
      if (positional_name_.empty()) throw UsageError(command_ + ": unexpected argument '" + arg + "'");
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
    if (it == options_.end()) throw UsageError(command_ + ": unknown option '--" + name + "' (see --help)");
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
  for (const auto& [name, opt] : options_) {
    if (opt.required && values_.count(name) == 0) throw UsageError(command_ + ": --" + name + " is required");
  }
  if (positional_values_.size() < positional_min_) {
    throw UsageError(command_ + ": " + positional_name_ + " is required (see --help)");
  }
  return true;
}

std::string ArgParser::get(const std::string& name) const {
  const auto v = values_.find(name);
  if (v != values_.end()) return v->second;
  const auto o = options_.find(name);
  if (o == options_.end()) throw std::logic_error("undeclared option --" + name);
  return o->second.default_value;
}

int ArgParser::get_int(const std::string& name) const {
  const std::string text = get(name);
  try {
    std::size_t used = 0;
    const long value = std::stol(text, &used);
    if (used == text.size() && value >= -2147483647L && value <= 2147483647L) return static_cast<int>(value);
  } catch (const std::exception&) {
  }
  throw UsageError(command_ + ": --" + name + " expects an integer, got '" + text + "'");
}

double ArgParser::get_double(const std::string& name) const {
  const std::string text = get(name);
  try {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw UsageError(command_ + ": --" + name + " expects a number, got '" + text + "'");
}

bool ArgParser::get_flag(const std::string& name) const { return values_.count(name) != 0; }

bool ArgParser::given(const std::string& name) const {
  if (options_.count(name) == 0) throw std::logic_error("undeclared option --" + name);
  return values_.count(name) != 0;
}

std::string ArgParser::help() const {
  std::ostringstream os;
  os << "usage: bertrain " << command_ << " [options]" << (positional_name_.empty() ? "" : " " + positional_name_ + "...")
     << "\n\n" << summary_ << "\n\n";
  if (!positional_name_.empty()) {
    const std::string left = "  " + positional_name_ + "...";
    os << "arguments:\n" << left << std::string(left.size() < 28 ? 28 - left.size() : 1, ' ') << positional_help_
       << "\n\n";
  }
  os << "options:\n";
  for (const std::string& name : order_) {
    const Option& o = options_.at(name);
    std::string left = "  --" + name + (o.is_flag ? "" : " VALUE");
    os << left << std::string(left.size() < 28 ? 28 - left.size() : 1, ' ') << o.help;
    if (o.required) os << " (required)";
    else if (!o.is_flag && !o.default_value.empty()) os << " (default " << o.default_value << ")";
    os << "\n";
  }
  os << "  --help                    show this help\n";
  return os.str();
}

}  // namespace bertrain
