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

/// The checks every generator's options share; `tag` opens the message
/// ("[scenes]"). Both image sides in [16, 8192]:
void check_scene_size(const char* tag, int64_t width, int64_t height);

/// A range lo..hi of the option pair (lo_name, hi_name): floor <= lo (floor < lo
/// when `open_floor`), lo <= hi and hi <= ceiling, else "<tag> <what>: need
/// 0 <= min_x <= max_x <= C, got lo and hi".
void check_min_max(const char* tag, const char* what, const char* lo_name, const char* hi_name,
                   double lo, double hi, double floor, bool open_floor, double ceiling);

}  // namespace tcv::data
