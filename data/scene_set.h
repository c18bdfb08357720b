// What the generators of data sets (data/det/scenes.h, data/pose/scenes.h)
// share when they write a set: the file names of its images, its directories,
// and rendering the scenes on every thread with the first
// error reported.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>

#include "data/image.h"  // write_file, write_image

namespace tcv::data {

/// Image i of a set of n is named i + 1 with leading zeros to at least six
/// digits (more when n needs them): "000001", "000002", ...
class SceneNames {
 public:
  explicit SceneNames(int64_t n);
  std::string operator()(int64_t i) const;

 private:
  int digits_;
};

/// Creates root/d for each d (with parents); errors name the directory.
void create_set_dirs(const std::filesystem::path& root, std::initializer_list<const char*> dirs);

/// Runs fn(i) for every i in [0, n) on OpenMP's threads. After an exception
/// the remaining scenes are skipped, and the first exception's message is
/// thrown as a tcv::Error once all threads are done.
void parallel_for_scenes(int64_t n, const std::function<void(int64_t)>& fn);

}  // namespace tcv::data
