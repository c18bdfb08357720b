// What every annotated data set (detection, segmentation, pose) keeps beside
// its task's own fields: the records read from the annotations, a name for
// messages, what a corrupt file does and the log of skipped samples, and the
// pixel limits images are read under. Each task's data set derives from
// RecordSet<ItsRecord> and adds its classes, its targets and load().
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/folder.h"
#include "data/image.h"
#include "engine/error.h"

namespace tcv::data {

template <typename Record>
class RecordSet {
 public:
  int64_t size() const { return static_cast<int64_t>(records_.size()); }
  /// Record i; an index outside [0, size()) is an error naming the data set.
  const Record& record(int64_t i) const {
    TCV_CHECK(i >= 0 && i < size(), name_, ": image index ", i, " out of range [0, ", size(), ")");
    return records_[static_cast<size_t>(i)];
  }
  const std::vector<Record>& records() const { return records_; }
  const std::string& name() const { return name_; }
  const ImageLimits& limits() const { return limits_; }

  /// Images skipped: at reading (bad annotations, missing files) and at load().
  int64_t skipped() const { return skips_.count(); }
  /// The first skipped file and why (empty when none).
  std::string first_skipped() const { return skips_.first(); }

 protected:
  /// `skipped_at_load` records were left out while reading the annotations
  /// (the first because of `first_skipped`); they count in skipped().
  RecordSet(std::vector<Record> records, std::string name, OnCorrupt on_corrupt, ImageLimits limits,
            int64_t skipped_at_load, std::string first_skipped)
      : records_(std::move(records)),
        name_(std::move(name)),
        on_corrupt_(on_corrupt),
        limits_(limits),
        skips_(skipped_at_load, std::move(first_skipped)) {}
  RecordSet(RecordSet&&) noexcept = default;
  RecordSet& operator=(RecordSet&&) = delete;

  /// The first n records (all of them when n >= size()): what head(n) is made of.
  std::vector<Record> first_records(int64_t n) const {
    return {records_.begin(), records_.begin() + std::clamp<int64_t>(n, 0, size())};
  }

  /// Runs `read` (decoding a record's files): true when it returns. A
  /// tcv::Error it throws is rethrown (OnCorrupt::error), or counted in
  /// skipped() with false returned (OnCorrupt::skip: the sample is left out).
  template <typename F>
  bool attempt(F&& read) const {
    return skips_.attempt(on_corrupt_, std::forward<F>(read));
  }

  /// Sample i of an annotated record (a Sample with index, image_id, image,
  /// orig_height and orig_width): its index and image id, what `read(record,
  /// sample)` copies and decodes into it, run through attempt(), and the size
  /// the annotation gives. A sample whose files were skipped has no image (it
  /// is left out of the batch), whatever `read` had decoded before it failed.
  template <typename Sample, typename Read>
  Sample annotated_sample(int64_t i, Read&& read) const {
    const Record& r = record(i);
    Sample s;
    s.index = i;
    s.image_id = r.image_id;
    if (!attempt([&] { read(r, s); })) {
      s.image = Tensor();
      return s;
    }
    s.orig_height = r.height;
    s.orig_width = r.width;
    return s;
  }

  /// Record r's image in u8 RGB, its size checked against the annotation's
  /// (records with image_path, width, height and source).
  Tensor annotated_image(const Record& r) const {
    return read_annotated_image(r.image_path, r.width, r.height, r.source, limits_);
  }

  std::vector<Record> records_;
  std::string name_;
  OnCorrupt on_corrupt_;
  ImageLimits limits_;
  SkipLog skips_;
};

}  // namespace tcv::data
