// What both config harnesses check after building a Config (from a file, or
// from --set overrides): validation may refuse it, but whatever it resolves
// to is written as TOML that reads back to the same values.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_support.h"
#include "train/config.h"
#include "train/task.h"

// The tasks' keys and checks join the config schema before any config is read.
[[maybe_unused]] inline const bool kTasksRegistered = (tcv::train::register_builtin_tasks(), true);

inline void expect_resolved_config_reads_back(const tcv::train::Config& c) {
  try {
    c.validate();
  } catch (const tcv::Error&) {
  }
  const std::string resolved = c.to_toml();
  tcv::train::Config again;
  try {
    again = tcv::train::Config::from_string(resolved, "config.toml");
  } catch (const tcv::Error& e) {
    std::fprintf(stderr, "the resolved config does not read back: %s\n%s\n", e.what(),
                 resolved.c_str());
    std::abort();
  }
  // The same values (the first line is a comment naming the file read).
  const auto body = [](const std::string& t) { return t.substr(t.find('\n')); };
  TCV_FUZZ_EXPECT(body(again.to_toml()) == body(resolved));
}
