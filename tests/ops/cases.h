// The op-case table's families (tests/ops/cases_<family>.cpp), each adding
// its ops' cases to the registry (support/op_cases.h explains how).
#pragma once

#include "engine/ops.h"
#include "support/error_bound.h"
#include "support/op_bounds.h"
#include "support/op_cases.h"

namespace tcv::testing {

/// A conv2d geometry of the table (tests/ops/cases_conv.cpp).
struct ConvGeometry {
  const char* name;
  Shape x;  ///< (N, C, H, W)
  Shape w;  ///< (K, C/groups, R, S)
  bool bias;
  ops::Conv2dParams p;
};
/// The table's conv2d geometries by group, for tests of the conv kernels
/// themselves (the f64 im2col path against the direct loops).
enum class ConvGroup : uint8_t { small, device, blocked, dead_taps };
const std::vector<ConvGeometry>& conv_geometries(ConvGroup group);

void register_elementwise_cases(OpRegistry& r);
void register_reduce_cases(OpRegistry& r);
void register_linalg_cases(OpRegistry& r);
void register_conv_cases(OpRegistry& r);
void register_pool_cases(OpRegistry& r);
void register_norm_cases(OpRegistry& r);
void register_softmax_cases(OpRegistry& r);
void register_loss_cases(OpRegistry& r);
void register_shape_cases(OpRegistry& r);
void register_index_cases(OpRegistry& r);
void register_sort_cases(OpRegistry& r);
void register_upsample_cases(OpRegistry& r);
void register_boxes_cases(OpRegistry& r);
void register_optim_cases(OpRegistry& r);
void register_pose_cases(OpRegistry& r);

}  // namespace tcv::testing
