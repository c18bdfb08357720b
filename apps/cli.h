// What the command-line tools share: usage errors, "--flag value" parsing and
// the mapping of errors to messages and exit codes.
#pragma once

#include <cstdint>
#include <exception>
#include <iostream>
#include <string>

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

/// The synopsis of a usage text: its lines up to the first blank one.
inline std::string usage_synopsis(const std::string& usage) {
  const auto blank = usage.find("\n\n");
  return blank == std::string::npos ? usage : usage.substr(0, blank + 1);
}

/// Runs a tool's body: usage and config errors exit 2, anything else 1, each
/// printed as "<tool>: error: <message>". A usage error is followed by the
/// synopsis and a pointer to --help, not the whole usage, so it stays in view.
template <typename F>
int run_tool(const char* tool, const char* usage, F&& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::cerr << tool << ": error: " << e.msg << "\n"
              << usage_synopsis(usage) << "Run '" << tool << " --help' for the options.\n";
    return 2;
  } catch (const train::ConfigError& e) {
    std::cerr << tool << ": error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "\n" << tool << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace tcv::apps
