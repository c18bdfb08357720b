#include "engine/dtype.h"

#include <string>

#include "engine/error.h"

namespace tcv {

namespace {
int rank(DType t) {
  switch (t) {
    case DType::b8:
      return 0;
    case DType::u8:
      return 1;
    case DType::i32:
      return 2;
    case DType::i64:
      return 3;
    case DType::f16:
      return 4;
    case DType::bf16:
      return 5;
    case DType::f32:
      return 6;
    case DType::f64:
      return 7;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // f16 with bf16 has no common 16-bit type: use f32, as PyTorch does.
  if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16))
    return DType::f32;
  return rank(a) >= rank(b) ? a : b;
}

DType parse_dtype(const std::string& s) {
  if (s == "f32" || s == "float32" || s == "float") return DType::f32;
  if (s == "f64" || s == "float64" || s == "double") return DType::f64;
  if (s == "f16" || s == "float16" || s == "half") return DType::f16;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "i32" || s == "int32") return DType::i32;
  if (s == "i64" || s == "int64" || s == "long") return DType::i64;
  if (s == "u8" || s == "uint8") return DType::u8;
  if (s == "bool" || s == "b8") return DType::b8;
  TCV_THROW("[dtype] unknown dtype '", s, "' (valid: f32, f64, f16, bf16, i32, i64, u8, bool)");
}

}  // namespace tcv
