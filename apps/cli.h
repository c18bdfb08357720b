// What the command-line tools share: usage errors, "--flag value" parsing and
// the mapping of errors to messages and exit codes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dist/launcher.h"
#include "train/config.h"

namespace tcv::apps {

/// A bad command line: exit status 2, printed with the usage.
struct UsageError {
  std::string msg;
};

/// The integer after a flag, at least min_value; usage errors name the flag.
inline int64_t parse_int(const std::string& flag, const std::string& text, int64_t min_value) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw UsageError{flag + " expects an integer, got '" + text + "'"};
  if (v < min_value)
    throw UsageError{flag + " must be at least " + std::to_string(min_value) + ", got " + text};
  return v;
}

/// The number after a flag; usage errors name the flag.
inline double parse_double(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw UsageError{flag + " expects a number, got '" + text + "'"};
  return v;
}

/// Walks argv; a flag's value may follow it or be joined with '='.
class Args {
 public:
  Args(int argc, char** argv) : argc_(argc), argv_(argv) {}
  /// Advances to the next argument; false at the end.
  bool next() {
    if (++i_ >= argc_) return false;
    arg_ = argv_[i_];
    return true;
  }
  const std::string& arg() const { return arg_; }
  /// True when the current argument is `flag` or `flag=...`.
  bool is(const std::string& flag) const { return arg_ == flag || arg_.rfind(flag + "=", 0) == 0; }
  /// The value of the current flag (joined, or the next argument).
  std::string value(const std::string& flag) {
    const std::string prefix = flag + "=";
    if (arg_.rfind(prefix, 0) == 0) return arg_.substr(prefix.size());
    if (i_ + 1 >= argc_) throw UsageError{flag + " needs a value"};
    return argv_[++i_];
  }

 private:
  int argc_;
  char** argv_;
  int i_ = 0;
  std::string arg_;
};

/// A table of options, each writing its value straight into a variable:
///
///   Flags f;
///   f.text("--out", out).integer("--train", o.train, 0).toggle("--json", json);
///   f.parse(args);   // the rest of the command line; an unknown option is a usage error
///
/// The variables must outlive parse().
class Flags {
 public:
  using Setter = std::function<void(const std::string& flag, const std::string& value)>;

  /// --flag N, at least min_value, into any integer type.
  template <typename Int>
  Flags& integer(std::string flag, Int& dst, int64_t min_value) {
    static_assert(std::is_integral_v<Int>);
    return with_value(std::move(flag),
                      [&dst, min_value](const std::string& f, const std::string& v) {
                        dst = static_cast<Int>(parse_int(f, v, min_value));
                      });
  }
  Flags& number(std::string flag, double& dst) {
    return with_value(std::move(flag), [&dst](const std::string& f, const std::string& v) {
      dst = parse_double(f, v);
    });
  }
  Flags& text(std::string flag, std::string& dst) {
    return with_value(std::move(flag),
                      [&dst](const std::string&, const std::string& v) { dst = v; });
  }
  /// --flag alone (no value) sets dst.
  Flags& toggle(std::string flag, bool& dst) {
    entries_.push_back(
        {std::move(flag), false, [&dst](const std::string&, const std::string&) { dst = true; }});
    return *this;
  }
  /// --flag VALUE handed to `set` (flag, value).
  Flags& with_value(std::string flag, Setter set) {
    entries_.push_back({std::move(flag), true, std::move(set)});
    return *this;
  }

  /// Reads the remaining arguments of `a` into the variables.
  void parse(Args& a) const {
    while (a.next()) {
      const Entry* hit = nullptr;
      for (const Entry& e : entries_)
        if (e.takes_value ? a.is(e.flag) : a.arg() == e.flag) hit = &e;
      if (!hit) throw UsageError{"unknown option '" + a.arg() + "'"};
      hit->set(hit->flag, hit->takes_value ? a.value(hit->flag) : std::string());
    }
  }
  /// The same over a subcommand's arguments (those after its name).
  void parse(const std::vector<std::string>& args) const {
    std::vector<char*> argv{nullptr};  // Args skips argv[0]
    for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
    Args a(static_cast<int>(argv.size()), argv.data());
    parse(a);
  }

 private:
  struct Entry {
    std::string flag;
    bool takes_value;
    Setter set;
  };
  std::vector<Entry> entries_;
};

/// The synopsis of a usage text: its lines up to the first blank one.
inline std::string usage_synopsis(const std::string& usage) {
  const auto blank = usage.find("\n\n");
  return blank == std::string::npos ? usage : usage.substr(0, blank + 1);
}

/// Under tcv-run (or any launcher that sets TCV_ERROR_FILE, as torchrun's
/// TORCHELASTIC_ERROR_FILE), the error that ends this process is also written
/// there, so the launcher can say on every machine why a rank stopped.
inline void write_error_file(const std::string& tool, const std::string& msg) {
  const char* path = std::getenv("TCV_ERROR_FILE");
  if (!path || !*path) return;
  if (std::FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "%s: error: %s\n", tool.c_str(), msg.c_str());
    std::fclose(f);
  }
}

/// Runs a tool's body: usage and config errors exit 2, anything else 1, each
/// printed as "<tool>: error: <message>" (and written to TCV_ERROR_FILE). A
/// usage error is followed by the synopsis and a pointer to --help, not the
/// whole usage, so it stays in view.
template <typename F>
int run_tool(const char* tool, const char* usage, F&& body) {
  dist::watch_launcher();  // under tcv-run: stop when it is gone, whatever sits between
  try {
    return body();
  } catch (const UsageError& e) {
    write_error_file(tool, e.msg);
    std::cerr << tool << ": error: " << e.msg << "\n"
              << usage_synopsis(usage) << "Run '" << tool << " --help' for the options.\n";
    return 2;
  } catch (const train::ConfigError& e) {
    write_error_file(tool, e.what());
    std::cerr << tool << ": error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    write_error_file(tool, e.what());
    std::cerr << "\n" << tool << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace tcv::apps
