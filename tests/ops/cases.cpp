#include "ops/cases.h"

namespace tcv::testing {

const OpRegistry& op_registry() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_elementwise_cases(r);
    register_reduce_cases(r);
    register_linalg_cases(r);
    register_conv_cases(r);
    register_pool_cases(r);
    register_norm_cases(r);
    register_softmax_cases(r);
    register_loss_cases(r);
    register_shape_cases(r);
    register_index_cases(r);
    register_sort_cases(r);
    register_upsample_cases(r);
    register_boxes_cases(r);
    register_optim_cases(r);
    register_pose_cases(r);

    // Functions of tcv::ops that need no cases of their own. Only pure views
    // and helpers whose every part is checked elsewhere belong here.
    r.exempt("broadcast_shapes",
             "computes a shape from two shapes, no tensor (its errors: "
             "tests/engine/test_elementwise.cpp)");
    r.exempt("sum_to",
             "the backward of broadcasting (a sum over the broadcast dims): every case with a "
             "broadcast or expanded operand checks it through that operand's gradient");
    r.exempt("split",
             "returns views (narrow) of its input: no kernel and no gradient of its own; narrow's "
             "gradient is checked in tests/engine/test_autograd.cpp");
    r.exempt("chunk", "split into equal pieces: views, as split");
    r.exempt("fused_step_supported",
             "a predicate on dtypes, devices and layouts, no tensor: the optimizers' fallback to "
             "tensor ops is checked against the fused loop in tests/train/test_optim.cpp");
    r.exempt("gaussian_taps",
             "computes the filter's weights on the host, no tensor (against scipy's formula: "
             "tests/engine/test_pose_ops.cpp); gaussian_filter2d's cases use them");
    return r;
  }();
  return registry;
}

}  // namespace tcv::testing
