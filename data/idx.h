// IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or raw.
//
// Layout: two zero bytes, a type code, the number of dims, then each dim as a
// big-endian u32, then the elements big-endian. Type codes: 0x08 u8, 0x09 i8,
// 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64.
#pragma once

#include <string>

#include "engine/tensor.h"

namespace tcv::data {

/// Reads a whole file, inflating it when it starts with the gzip magic bytes
/// (1f 8b). Errors name the file: missing, unreadable, corrupt or truncated gzip.
std::string read_maybe_gzip(const std::string& path);

/// Parses IDX bytes already in memory; `name` is used in error messages.
/// u8, i32, f32 and f64 keep their type; i8 and i16 widen to i32.
Tensor parse_idx(const std::string& bytes, const std::string& name);

/// Reads an IDX file (gzip or raw, detected by magic bytes). Validates the
/// magic, the type code, the dims and the size against the file length;
/// errors name the file.
Tensor read_idx(const std::string& path);

}  // namespace tcv::data
