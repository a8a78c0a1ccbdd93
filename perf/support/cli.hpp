// SPDX-License-Identifier: Apache-2.0
// The command line of the perf and example programs (not part of the installed library): each
// option declared once with the variable it sets and a line of help, from which --help is
// written. "--opt value" and "--opt=value" both work, and a later option of the same name wins
// (perf/compare.py appends its own after the user's). Errors name the option and what it takes.
// One small header rather than CLI11 or cxxopts (Debian packages both): no new build dependency
// for CI or users.
#pragma once

#include <cmath>
#include <cstddef>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace FusedLinearCli {

/// A bad command line: what() names the option and what it takes.
struct Error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// A finite number: all of `text` must be read.
inline double parse_number(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v))
    throw Error("'" + text + "' is not a finite number");
  return v;
}

/// An integer in [min, max]. Only plain digits pass: std::stoull would take "-1" and wrap it.
template <class Int>
Int parse_integer(const std::string& text, Int min, Int max = std::numeric_limits<Int>::max()) {
  static_assert(std::is_integral<Int>::value, "parse_integer: an integer type");
  bool ok = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  unsigned long long v = 0;
  if (ok) {
    try {
      v = std::stoull(text);
    } catch (const std::out_of_range&) {
      ok = false;
    }
  }
  if (!ok || v < static_cast<unsigned long long>(min) || v > static_cast<unsigned long long>(max))
    throw Error("takes an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                "], got '" + text + "'");
  return static_cast<Int>(v);
}

/// The items of a comma-separated list, in order (empty items kept, for the caller to refuse).
inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream is(text);
  for (std::string item; std::getline(is, item, ',');) items.push_back(item);
  return items;
}

class Cli {
 public:
  /// `program` starts every error message; `synopsis` follows "usage: " in --help.
  Cli(std::string program, std::string synopsis)
      : m_program(std::move(program)), m_synopsis(std::move(synopsis)) {}

  /// An option with a value: `set` receives it, and may throw std::invalid_argument saying why
  /// it is refused (the option's name is put in front).
  Cli& option(const std::string& name, const std::string& value_name,
              std::function<void(const std::string&)> set, const std::string& help) {
    m_options.push_back({name, value_name, std::move(set), nullptr, help});
    return *this;
  }
  /// An option without a value: it sets `target` to true.
  Cli& flag(const std::string& name, bool& target, const std::string& help) {
    m_options.push_back({name, "", nullptr, &target, help});
    return *this;
  }
  template <class Int>
  Cli& integer(const std::string& name, const std::string& value_name, Int& target, Int min,
               Int max, const std::string& help) {
    return option(
        name, value_name,
        [&target, min, max](const std::string& v) { target = parse_integer<Int>(v, min, max); },
        help);
  }
  template <class Int>
  Cli& integer(const std::string& name, const std::string& value_name, Int& target, Int min,
               const std::string& help) {
    return integer(name, value_name, target, min, std::numeric_limits<Int>::max(), help);
  }
  Cli& number(const std::string& name, const std::string& value_name, double& target,
              const std::string& help) {
    return option(
        name, value_name, [&target](const std::string& v) { target = parse_number(v); }, help);
  }
  Cli& text(const std::string& name, const std::string& value_name, std::string& target,
            const std::string& help) {
    return option(
        name, value_name, [&target](const std::string& v) { target = v; }, help);
  }
  /// Arguments that do not start with "--": all of `names` in order, or none; each an integer
  /// in [min, max] for its target.
  template <class Int>
  Cli& positionals(const std::vector<std::string>& names, const std::vector<Int*>& targets, Int min,
                   Int max, const std::string& help) {
    if (names.size() != targets.size())
      throw std::logic_error("Cli::positionals: one target a name");
    for (std::size_t i = 0; i < names.size(); ++i) {
      Int* target = targets[i];
      m_positionals.push_back(
          {names[i], "",
           [target, min, max](const std::string& v) { *target = parse_integer<Int>(v, min, max); },
           nullptr, ""});
    }
    m_positional_help = help;
    return *this;
  }
  /// Arguments that start with `prefix` are left alone: options of a library that initialises
  /// from the same argv and leaves those it does not know (Kokkos 3.4 and 4.x's --kokkos-*).
  Cli& ignore_prefix(const std::string& prefix) {
    m_ignored_prefixes.push_back(prefix);
    return *this;
  }
  /// A paragraph at the end of --help.
  Cli& epilog(const std::string& text) {
    m_epilog += text;
    return *this;
  }

  /// True when argv asks for help: answered before a library sees the same argv.
  static bool asks_for_help(int argc, char* argv[]) {
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") return true;
    return false;
  }

  void print_help(std::ostream& os) const {
    os << "usage: " << m_synopsis << '\n';
    if (!m_positionals.empty()) item(os, names(m_positionals), m_positional_help);
    for (const Option& o : m_options)
      item(os, o.name + (o.value_name.empty() ? "" : " " + o.value_name), o.help);
    item(os, "--help", "this text");
    if (!m_epilog.empty()) os << m_epilog << (m_epilog.back() == '\n' ? "" : "\n");
  }

  /// Sets the declared variables from argv[1..]; throws Error naming the bad argument.
  void parse(int argc, char* argv[]) const {
    std::vector<std::string> positionals;
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (ignored(arg)) continue;
      if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
        if (m_positionals.empty()) throw Error("unexpected argument '" + arg + "'");
        positionals.push_back(arg);
        continue;
      }
      std::string inline_value;
      const std::size_t eq = arg.find('=');
      const bool has_inline_value = eq != std::string::npos;
      if (has_inline_value) {
        inline_value = arg.substr(eq + 1);
        arg.resize(eq);
      }
      const Option* o = find(arg);
      if (!o) throw Error("unknown option '" + arg + "'");
      if (o->flag) {
        if (has_inline_value) throw Error(arg + " takes no value");
        *o->flag = true;
        continue;
      }
      if (!has_inline_value && i + 1 >= argc) throw Error(arg + " needs a value");
      const std::string value = has_inline_value ? inline_value : argv[++i];
      set(*o, value);
    }
    if (positionals.empty()) return;
    if (positionals.size() != m_positionals.size())
      throw Error("give all of " + names(m_positionals) + ", or none");
    for (std::size_t i = 0; i < positionals.size(); ++i) set(m_positionals[i], positionals[i]);
  }

  /// parse() for a program that has nothing else to do first: the exit status to stop with, 0
  /// after --help (printed), 2 after a bad command line (said on stderr), or none to go on.
  /// `speak`: print (false on all MPI ranks but one; every rank parses the same argv).
  std::optional<int> parse_or_stop(int argc, char* argv[], bool speak = true) const {
    if (asks_for_help(argc, argv)) {
      if (speak) print_help(std::cout);
      return 0;
    }
    try {
      parse(argc, argv);
    } catch (const std::invalid_argument& e) {
      if (speak) std::cerr << message(e) << std::endl;
      return 2;
    }
    return std::nullopt;
  }

  /// The line a program prints for a bad command line.
  std::string message(const std::exception& e) const {
    return m_program + ": " + e.what() + " (see --help)";
  }

 private:
  struct Option {
    std::string name, value_name;
    std::function<void(const std::string&)> set;
    bool* flag;
    std::string help;
  };

  const Option* find(const std::string& name) const {
    for (const Option& o : m_options)
      if (o.name == name) return &o;
    return nullptr;
  }
  bool ignored(const std::string& arg) const {
    for (const std::string& p : m_ignored_prefixes)
      if (arg.rfind(p, 0) == 0) return true;
    return false;
  }
  /// Gives `value` to `o`, naming the option in the error.
  static void set(const Option& o, const std::string& value) {
    try {
      o.set(value);
    } catch (const std::invalid_argument& e) {
      throw Error(o.name + ": " + e.what());
    }
  }
  static std::string names(const std::vector<Option>& options) {
    std::string s;
    for (const Option& o : options) s += (s.empty() ? "" : " ") + o.name;
    return s;
  }
  /// "  NAME  help", the help wrapped at 100 columns in a column of its own.
  static void item(std::ostream& os, const std::string& name, const std::string& help) {
    constexpr std::size_t indent = 24, width = 100;
    std::string line = "  " + name;
    if (line.size() + 1 > indent) {
      os << line << '\n';
      line.clear();
    }
    line.resize(indent, ' ');
    std::istringstream words(help);
    bool first = true;
    for (std::string word; words >> word; first = false) {
      if (!first && line.size() + 1 + word.size() > width) {
        os << line << '\n';
        line = std::string(indent, ' ') + word;
      } else {
        line += (first ? "" : " ") + word;
      }
    }
    os << line << '\n';
  }

  std::string m_program, m_synopsis, m_epilog;
  std::vector<Option> m_options;
  std::vector<Option> m_positionals;
  std::vector<std::string> m_ignored_prefixes;
  std::string m_positional_help;
};

}  // namespace FusedLinearCli
