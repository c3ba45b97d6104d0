// A small command-line parser for bertrain's subcommands: --flag VALUE / --flag=VALUE options with
// defaults, boolean switches, generated --help, and UsageError (exit code 2) for anything malformed.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace bertrain {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ArgParser {
 public:
  ArgParser(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

  // An option taking a value; `default_value` empty with `required` means it must be given.
  void option(const std::string& name, const std::string& default_value, const std::string& help, bool required = false);
  void flag(const std::string& name, const std::string& help);  // a boolean switch, off by default
  // Arguments that are not options (e.g. RUN_DIR...), at least `min_count` of them; without this call any
  // such argument is a UsageError.
  void positionals(const std::string& name, const std::string& help, std::size_t min_count);

  // Parses args (without the program and command names). Returns false when --help was asked for
  // (the help text has then been printed to stdout). Throws UsageError on unknown or malformed options.
  bool parse(const std::vector<std::string>& args);

  std::string get(const std::string& name) const;
  int get_int(const std::string& name) const;        // UsageError naming the flag when not an integer
  double get_double(const std::string& name) const;  // UsageError naming the flag when not a number
  bool get_flag(const std::string& name) const;
  // Whether the command line gave option or flag `name` (an empty value counts), as opposed to its default.
  bool given(const std::string& name) const;
  // Whether the command has option or flag `name` at all (for messages that suggest a flag).
  bool has_option(const std::string& name) const { return options_.count(name) != 0; }
  const std::vector<std::string>& positional_values() const { return positional_values_; }
  std::string help() const;

 private:
  struct Option {
    std::string default_value, help;
    bool required = false, is_flag = false;
  };
  std::string command_, summary_;
  std::vector<std::string> order_;
  std::map<std::string, Option> options_;
  std::map<std::string, std::string> values_;
  std::string positional_name_, positional_help_;  // empty name: no positional arguments
  std::size_t positional_min_ = 0;
  std::vector<std::string> positional_values_;
};

}  // namespace bertrain
