// DIR/report.html: one self-contained page per run (inline SVG charts and PNG
// data URIs, no network, no scripts) with the training curves read from
// metrics.jsonl, the task's validation metrics, the resolved config, and
// sample validation pictures (classification: images with their predicted and
// true labels; detection and segmentation: predictions beside the ground
// truth). The trainer rewrites it at each evaluation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/value.h"

namespace tcv::train {

/// One validation image with its labels.
struct ReportSample {
  std::vector<uint8_t> pixels;  ///< u8 (C, H, W), C = 1 or 3
  int64_t channels = 1, height = 0, width = 0;
  int64_t label = 0;  ///< the true class
  int64_t pred = 0;   ///< the predicted class
};

/// A picture: u8 pixels in (C, H, W) layout, C = 1 or 3.
struct ReportPicture {
  std::vector<uint8_t> pixels;
  int64_t channels = 3, height = 0, width = 0;
};

/// One validation sample of detection or segmentation: pictures side by side,
/// each with its label ("prediction", "ground truth"), and a caption.
struct ReportFigure {
  std::vector<ReportPicture> pictures;
  std::vector<std::string> labels;
  std::string caption;
};

/// A number the page leads with: `key` of the latest val row, e.g. {"top1", "top-1", "%"}.
struct ReportHeadline {
  std::string key, label, unit;
};

/// A chart of val-row metrics: (key, legend) per series.
struct ReportChart {
  std::string title;
  std::vector<std::pair<std::string, std::string>> series;
};

/// What the page shows. The task's parts (headline, val charts, samples,
/// figures) are the task's to fill (TaskEvaluator::fill_report).
struct ReportInputs {
  std::string title;
  std::string config_toml;     ///< the resolved config
  std::vector<Value> metrics;  ///< metrics.jsonl lines ("split": "train" | "val")
  std::vector<ReportHeadline> headline;
  std::vector<ReportChart> val_charts;
  /// Classification samples (an image, its predicted and true class).
  std::vector<ReportSample> samples;
  std::vector<std::string> class_names;  ///< may be empty (classes shown by index)
  /// Other tasks' samples, under this heading.
  std::vector<ReportFigure> figures;
  std::string figures_title = "Validation samples";
};

/// The page as a string.
std::string render_report(const ReportInputs& in);

/// Writes render_report(in) to `path` atomically.
void write_report(const std::string& path, const ReportInputs& in);

/// Reads a JSON-lines file (a missing file reads as empty; a bad line is an
/// error naming the file and line).
std::vector<Value> read_jsonl(const std::string& path);

/// A PNG file (8-bit gray for channels 1, RGB for channels 3) of u8 pixels in
/// (C, H, W) layout, zlib-compressed.
std::string encode_png(const uint8_t* chw, int64_t channels, int64_t height, int64_t width);

/// Standard base64 with padding.
std::string base64_encode(const std::string& bytes);

}  // namespace tcv::train
