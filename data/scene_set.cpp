#include "data/scene_set.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>

#include "engine/error.h"

namespace tcv::data {

SceneNames::SceneNames(int64_t n)
    : digits_(std::max(6, static_cast<int>(std::to_string(n).size()))) {}

std::string SceneNames::operator()(int64_t i) const {
  std::string s = std::to_string(i + 1);
  if (static_cast<int>(s.size()) < digits_)
    s.insert(0, static_cast<size_t>(digits_) - s.size(), '0');
  return s;
}

void create_set_dirs(const std::filesystem::path& root, std::initializer_list<const char*> dirs) {
  for (const char* d : dirs) {
    std::error_code ec;
    std::filesystem::create_directories(root / d, ec);
    TCV_CHECK(!ec, (root / d).string(), ": cannot create directory: ", ec.message());
  }
}

void parallel_for_scenes(int64_t n, const std::function<void(int64_t)>& fn) {
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string error;
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    if (failed.load()) continue;
    try {
      fn(i);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> l(mu);
      if (!failed.exchange(true)) error = e.what();
    }
  }
  TCV_CHECK(!failed.load(), error);
}

void check_scene_size(const char* tag, int64_t width, int64_t height) {
  TCV_CHECK(width >= 16 && height >= 16 && width <= 8192 && height <= 8192, tag,
            " image size must be in [16, 8192], got ", width, "x", height);
}

void check_min_max(const char* tag, const char* what, const char* lo_name, const char* hi_name,
                   double lo, double hi, double floor, bool open_floor, double ceiling) {
  TCV_CHECK((open_floor ? lo > floor : lo >= floor) && lo <= hi && hi <= ceiling, tag, " ", what,
            ": need ", floor, open_floor ? " < " : " <= ", lo_name, " <= ", hi_name,
            " <= ", ceiling, ", got ", lo, " and ", hi);
}

}  // namespace tcv::data
