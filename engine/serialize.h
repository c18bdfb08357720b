// safetensors files (readable by PyTorch and Hugging Face tools) and atomic writes.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace tcv {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  NamedTensors tensors;                         ///< in file order
  std::map<std::string, std::string> metadata;  ///< the "__metadata__" entry
};

/// Writes `tensors` (any device/layout; copied to contiguous CPU) as a
/// safetensors file, atomically: a temp file beside `path`, fsync, rename.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads a safetensors file; errors name the file and what is wrong with it.
SafetensorsFile load_safetensors(const std::string& path);

/// Replaces `path` with `contents` atomically (temp file, fsync, rename, fsync dir).
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace tcv
