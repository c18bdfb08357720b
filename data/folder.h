// Datasets of image files decoded on demand: ImageFolder (root/<class>/<image>,
// as torchvision's) and a list file ("relative/path label" per line).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/image.h"

namespace tcv::data {

/// What a corrupt or missing image does when a sample is read.
enum class OnCorrupt {
  error,  ///< throw a tcv::Error naming the file (the default)
  skip,   ///< return an empty Sample (left out of the batch) and count it
};

/// The samples a data set skipped as corrupt: how many, and the first with its
/// reason. Loader workers record into it concurrently.
class SkipLog {
 public:
  explicit SkipLog(int64_t count = 0, std::string first = "")
      : count_(count), first_(std::move(first)) {}
  SkipLog(SkipLog&& o) noexcept : count_(o.count()), first_(o.first()) {}

  void record(const std::string& why) const {
    count_.fetch_add(1);
    std::lock_guard<std::mutex> l(mu_);
    if (first_.empty()) first_ = why;
  }
  /// Runs `read` (a sample's decode): true when it returns. When it throws a
  /// tcv::Error, `on_corrupt` decides: error rethrows, skip records why and
  /// returns false.
  template <typename F>
  bool attempt(OnCorrupt on_corrupt, F&& read) const {
    try {
      read();
      return true;
    } catch (const Error& e) {
      if (on_corrupt == OnCorrupt::error) throw;
      record(e.what());
      return false;
    }
  }
  int64_t count() const { return count_.load(); }
  /// The first skipped file and why (empty when none).
  std::string first() const {
    std::lock_guard<std::mutex> l(mu_);
    return first_;
  }

 private:
  mutable std::atomic<int64_t> count_;
  mutable std::mutex mu_;
  mutable std::string first_;
};

/// Whether `path` exists, for paths read from data files: a name the system
/// cannot look up (too long, through a file, not permitted) counts as missing,
/// where std::filesystem::exists would throw a filesystem_error naming no
/// data file.
bool path_exists(const std::string& path);

/// `s` without leading and trailing spaces, tabs, CRs and LFs (a line or a
/// value of an annotation or list file).
std::string trim(const std::string& s);

struct ImageFileOptions {
  /// Accepted file extensions, lower case with the dot; matched case-insensitively.
  std::vector<std::string> extensions{".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm"};
  ImageMode mode = ImageMode::rgb;
  OnCorrupt on_corrupt = OnCorrupt::error;
  /// Images above limits.max_pixels are refused (a corrupt file).
  ImageLimits limits{};
};

/// Image files with labels, decoded and transformed when a sample is read.
class ImageFileDataset : public Dataset {
 public:
  ImageFileDataset(std::vector<std::pair<std::string, int64_t>> samples, int64_t num_classes,
                   Transform transform, ImageFileOptions opts, std::string name);

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  int64_t num_classes() const override { return num_classes_; }
  /// Reads, decodes and transforms file i. A bad file is an error naming it,
  /// or with OnCorrupt::skip an empty Sample counted in skipped().
  Sample get(int64_t i, Rng& rng) const override;
  Sample get_for_batch(int64_t i, Rng& rng) const override;
  int64_t skipped() const override { return skips_.count(); }
  std::string name() const override { return name_; }

  /// (path, label) of every sample, in dataset order.
  const std::vector<std::pair<std::string, int64_t>>& samples() const { return samples_; }
  /// The first skipped file and its error (empty when none).
  std::string first_skipped() const;

 private:
  Sample make(int64_t i, Rng& rng, bool defer) const;

  std::vector<std::pair<std::string, int64_t>> samples_;
  int64_t num_classes_;
  Transform transform_;
  ImageFileOptions opts_;
  std::string name_;
  SkipLog skips_;
};

/// torchvision's ImageFolder: every sub-directory of `root` is a class, sorted by
/// name (byte order); its files (recursively, following links), sorted by
/// directory then name, are the samples. Errors: no class directories, or a
/// class without any file with an accepted extension.
class ImageFolder : public ImageFileDataset {
 public:
  ImageFolder(const std::string& root, Transform transform = {}, ImageFileOptions opts = {});
  const std::vector<std::string>& classes() const { return classes_; }
  const std::map<std::string, int64_t>& class_to_idx() const { return class_to_idx_; }

 private:
  struct Scan {
    std::vector<std::string> classes;
    std::vector<std::pair<std::string, int64_t>> samples;
  };
  static Scan scan(const std::string& root, const ImageFileOptions& opts);
  ImageFolder(Scan scan, const std::string& root, Transform transform, ImageFileOptions opts);

  std::vector<std::string> classes_;
  std::map<std::string, int64_t> class_to_idx_;
};

/// A list file: one "relative/path label" per line (the path may contain spaces;
/// the label is the last field), paths relative to `root` (default: the list
/// file's directory). Blank lines and lines starting with '#' are ignored.
/// `num_classes` 0 means max label + 1. Errors name the file and the line.
class ListFileDataset : public ImageFileDataset {
 public:
  ListFileDataset(const std::string& list_path, const std::string& root = "",
                  int64_t num_classes = 0, Transform transform = {}, ImageFileOptions opts = {});

  /// Parses a list file into (full path, label) pairs; errors name the file and line
  /// (also a label >= num_classes when num_classes > 0).
  static std::vector<std::pair<std::string, int64_t>> parse(const std::string& list_path,
                                                            const std::string& root,
                                                            int64_t num_classes = 0);

 private:
  using Parsed = std::pair<std::vector<std::pair<std::string, int64_t>>, int64_t>;
  ListFileDataset(Parsed parsed, const std::string& list_path, Transform transform,
                  ImageFileOptions opts);
};

}  // namespace tcv::data
