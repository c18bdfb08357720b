// DIR/report.html: one self-contained page per run (inline SVG charts and PNG
// data URIs, no network, no scripts) with the training curves read from
// metrics.jsonl, the resolved config, and sample validation images with their
// predicted and true labels. The trainer rewrites it at each evaluation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/json.h"

namespace tcv::train {

/// One validation image with its labels.
struct ReportSample {
  std::vector<uint8_t> pixels;  ///< u8 (C, H, W), C = 1 or 3
  int64_t channels = 1, height = 0, width = 0;
  int64_t label = 0;  ///< the true class
  int64_t pred = 0;   ///< the predicted class
};

struct ReportInputs {
  std::string title;
  std::string config_toml;    ///< the resolved config
  std::vector<Json> metrics;  ///< metrics.jsonl lines ("split": "train" | "val")
  std::vector<ReportSample> samples;
  std::vector<std::string> class_names;  ///< may be empty (classes shown by index)
};

/// The page as a string.
std::string render_report(const ReportInputs& in);

/// Writes render_report(in) to `path` atomically.
void write_report(const std::string& path, const ReportInputs& in);

/// Reads a JSON-lines file (a missing file reads as empty; a bad line is an
/// error naming the file and line).
std::vector<Json> read_jsonl(const std::string& path);

/// A PNG file (8-bit gray for channels 1, RGB for channels 3) of u8 pixels in
/// (C, H, W) layout, zlib-compressed.
std::string encode_png(const uint8_t* chw, int64_t channels, int64_t height, int64_t width);

/// Standard base64 with padding.
std::string base64_encode(const std::string& bytes);

/// Class names of a known dataset ("fashion_mnist", "mnist"); indices as text
/// for others, or past the known names.
std::vector<std::string> dataset_class_names(const std::string& dataset, int64_t num_classes);

}  // namespace tcv::train
