// A small command-line parser for bertrain's subcommands: --flag VALUE / --flag=VALUE options with
// defaults, boolean switches, generated --help, and UsageError (exit code 2) for anything malformed.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace bertrain {

// A command line as given, not parsed (a command another runs, one read before its parser): whether it holds option
// `name` (--name, --name=V), and its value (--name V, --name=V; the last one given; "" when absent or given no value).
bool has_option_in(const std::vector<std::string>& args, const std::string& name);
std::string option_value_in(const std::vector<std::string>& args, const std::string& name);

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ArgParser {
 public:
  ArgParser(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

  // An option taking a value; `default_value` empty with `required` means it must be given. Its value is shown in
  // --help as N (an integer default), X (a real one) or the name in capitals, unless value_name() says better.
  ArgParser& option(const std::string& name, const std::string& default_value, const std::string& help,
                    bool required = false);
  // The placeholder of the option declared last, in --help: FILE, DIR, RATE, ...
  ArgParser& value_name(const std::string& placeholder);
  void flag(const std::string& name, const std::string& help);  // a boolean switch, off by default
  // Arguments that are not options (e.g. RUN_DIR...), from `min_count` to `max_count` of them; without this call
  // any such argument is a UsageError.
  void positionals(const std::string& name, const std::string& help, std::size_t min_count,
                   std::size_t max_count = static_cast<std::size_t>(-1));

  // Parses args (without the program and command names). Returns false when --help was asked for
  // (the help text has then been printed to stdout). Throws UsageError on unknown or malformed options.
  bool parse(const std::vector<std::string>& args);

  // The usage line of --help, when "bertrain COMMAND --REQUIRED VALUE... [options] [NAME...]" does not say it (e.g. a
  // command after --).
  void usage(const std::string& line) { usage_ = line; }
  // Options of another command that this one passes on (tune's TRAIN FLAGS): one given before the command's own
  // end is refused with `advice` (where they go) instead of as unknown.
  void passes_on(std::vector<std::string> names, const std::string& advice) {
    passed_on_ = std::move(names);
    passed_on_advice_ = advice;
  }
  // Text printed after the options in --help (e.g. the exit statuses).
  void epilog(const std::string& text) { epilog_ = text; }

  const std::string& command() const { return command_; }  // "train", "evaluate", ... (for messages)
  std::string get(const std::string& name) const;
  int get_int(const std::string& name) const;        // UsageError naming the flag when not an integer
  // An integer in [lo, hi]; any other number, one beyond int's range too, is a UsageError naming that range.
  int get_int_in(const std::string& name, int lo, int hi) const;
  // A seed: 0 to 2^64 - 1, as results.json records it (so a recorded seed can be given back); UsageError otherwise.
  uint64_t get_uint64(const std::string& name) const;
  double get_double(const std::string& name) const;  // UsageError naming the flag when not a number
  // --threads: 0 (OpenMP's default) to kMaxCpuThreads (core/cpu_threads.h); UsageError otherwise.
  int get_threads() const;
  bool get_flag(const std::string& name) const;
  // Whether the command line gave option or flag `name` (an empty value counts), as opposed to its default.
  bool given(const std::string& name) const;
  // Throws UsageError "<command>: --<name> is empty: <advice>" when option `name` was given an empty value (a
  // script's unset variable), which would otherwise mean its default without a word.
  void refuse_empty(const std::string& name, const std::string& advice) const;
  // Whether the command has option or flag `name` at all (for messages that suggest a flag).
  bool has_option(const std::string& name) const { return options_.count(name) != 0; }
  // Of an option or flag the command has: whether it is a switch (flag(), no value), and its default value.
  bool is_switch(const std::string& name) const { return options_.at(name).is_flag; }
  const std::string& default_of(const std::string& name) const { return options_.at(name).default_value; }
  // Whether option `name` takes an integer: its --help placeholder is N or K (a real one is X, RATE, P, ...).
  bool takes_integer(const std::string& name) const {
    const std::string& v = options_.at(name).value_name;
    return v == "N" || v == "K";
  }
  const std::vector<std::string>& positional_values() const { return positional_values_; }
  const std::vector<std::string>& option_names() const { return order_; }  // as declared
  std::string help() const;

 private:
  std::string positional_usage() const {  // "DIR" for one, "RUN_DIR..." for several
    return positional_name_ + (positional_max_ == 1 ? "" : "...");
  }
  std::string usage_line() const;  // "bertrain train --model DIR ... [options]", without "usage: "
  std::string unknown_option(const std::string& name) const;  // the UsageError's text
  std::string unexpected_argument(const std::string& arg) const;
  struct Option {
    std::string default_value, help, value_name;
    bool required = false, is_flag = false;
  };
  std::string command_, summary_, usage_, epilog_, passed_on_advice_;
  std::vector<std::string> passed_on_;
  std::vector<std::string> order_;
  std::map<std::string, Option> options_;
  std::map<std::string, std::string> values_;
  std::string positional_name_, positional_help_;  // empty name: no positional arguments
  std::size_t positional_min_ = 0, positional_max_ = 0;
  std::vector<std::string> positional_values_;
};

}  // namespace bertrain
