// The message of the exception a piece of test code throws.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "engine/error.h"

namespace tcv::testing {

/// The message of the E (tcv::Error unless named) that f throws; a test failure
/// (and "<no error>") when it throws none.
template <typename E = Error, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "<no error>";
}

}  // namespace tcv::testing
