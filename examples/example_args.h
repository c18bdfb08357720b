// What the examples share: "--flag value" command lines over defaults, and
// the check that training lowered the loss.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

/// "--flag value" pairs read over `defaults`; a flag nobody gave reads "".
class ExampleArgs {
 public:
  ExampleArgs(int argc, char** argv, std::map<std::string, std::string> defaults)
      : values_(std::move(defaults)) {
    for (int i = 1; i + 1 < argc; i += 2) values_[argv[i]] = argv[i + 1];
  }
  std::string text(const std::string& flag) const {
    const auto it = values_.find(flag);
    return it == values_.end() ? "" : it->second;
  }
  int64_t integer(const std::string& flag) const { return std::stoll(text(flag)); }
  double number(const std::string& flag) const { return std::stod(text(flag)); }

 private:
  std::map<std::string, std::string> values_;
};

/// Prints the mean loss of the first and the last k steps (k = min(10, n / 2))
/// and says whether it fell.
inline bool loss_fell(const std::vector<double>& losses) {
  const size_t k = std::max<size_t>(1, std::min<size_t>(10, losses.size() / 2));
  if (losses.size() < 2 * k) return false;
  const double first = std::accumulate(losses.begin(), losses.begin() + k, 0.0) / k;
  const double last = std::accumulate(losses.end() - k, losses.end(), 0.0) / k;
  std::printf("loss: first %zu steps %.4f, last %zu steps %.4f\n", k, first, k, last);
  return last < first;
}
