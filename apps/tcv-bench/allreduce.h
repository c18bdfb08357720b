// tcv-bench allreduce: all-reduce bus bandwidth over a size sweep, in the
// manner of nccl-tests' all_reduce_perf, for the NCCL and Gloo process groups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace tcv::bench {

struct AllreduceOptions {
  std::string backend = "gloo";  ///< nccl | gloo
  int64_t min_bytes = 32 << 20;  ///< -b
  int64_t max_bytes = 32 << 20;  ///< -e
  int64_t step_factor = 2;       ///< -f: sizes grow by this factor
  int64_t iters = 20;            ///< -n: timed all-reduces per size
  int64_t warmup = 5;            ///< -w
  bool check = true;             ///< -c: verify the result on known values
  DType dtype = DType::f32;      ///< -d float|half|bfloat16|double
  std::string op = "sum";        ///< --op sum|avg
  bool json = false;             ///< --json: one JSON object per line
};

/// Parses a size: "8", "1K", "16M", "1G" (binary multiples). Throws UsageError.
int64_t parse_bytes(const std::string& flag, const std::string& text);

/// Parses the arguments after "allreduce". Throws apps::UsageError.
AllreduceOptions parse_allreduce_args(const std::vector<std::string>& args);

/// Runs the sweep (reading RANK/WORLD_SIZE/... when set, else one process);
/// rank 0 prints. Returns the exit status: 1 when any element was wrong.
int run_allreduce_bench(const AllreduceOptions& opts);

/// The usage text of the subcommand.
extern const char* const kAllreduceUsage;

}  // namespace tcv::bench
