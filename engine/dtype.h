// Element types (defined below every folder of the tree: tcv/core/dtype.h).
#pragma once

#include <string>

#include "tcv/core/dtype.h"

namespace tcv {

/// The type both operands of a binary op are computed in, PyTorch's rules
/// simplified: floating beats integral, wider beats narrower, bool is lowest.
DType promote_types(DType a, DType b);

/// Parses "f32", "float32", "bf16", ... as written in configs.
DType parse_dtype(const std::string& s);

}  // namespace tcv
