// tcv::Error, the one error type every layer of tcv throws, and its check
// macros (TCV_CHECK, TCV_THROW). Below every folder of the tree, like
// tcv/core/dtype.h.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tcv {

/// Everything tcv throws. Messages name the op, the shapes and the file or key.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
[[noreturn]] inline void throw_error(const char* file, int line, const std::string& msg) {
  (void)file;
  (void)line;
  throw Error(msg);
}
}  // namespace detail

}  // namespace tcv

/// Throws tcv::Error with the streamed message when cond is false:
/// TCV_CHECK(x.dim() == 4, "[conv2d] expects 4-D input, got ", x.shape_str());
#define TCV_CHECK(cond, ...)                                                               \
  do {                                                                                     \
    if (!(cond)) [[unlikely]]                                                              \
      ::tcv::detail::throw_error(__FILE__, __LINE__, ::tcv::detail::str_cat(__VA_ARGS__)); \
  } while (0)

#define TCV_THROW(...) \
  ::tcv::detail::throw_error(__FILE__, __LINE__, ::tcv::detail::str_cat(__VA_ARGS__))
