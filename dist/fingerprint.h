// Internal to dist/: what identifies one collective across ranks (its
// sequence number in the group, the operation, dtype, element count and
// root), in the manner of PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL checks.
// Ranks compare fingerprints before data moves, and publish the one they are
// blocked in, so a rank that issued another collective is named instead of
// corrupting memory or hanging until the timeout.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "dist/process_group.h"

namespace tcv::dist::detail {

enum class CollectiveKind : uint8_t {
  all_reduce = 1,
  broadcast,
  all_gather,
  reduce_scatter,
  barrier
};

const char* collective_kind_name(CollectiveKind k);

struct Fingerprint {
  uint64_t seq = 0;  ///< 0-based position among the group's collectives
  CollectiveKind kind = CollectiveKind::barrier;
  ReduceOp op = ReduceOp::sum;  ///< all_reduce and reduce_scatter only
  DType dtype = DType::u8;      ///< of the input
  int32_t root = -1;            ///< broadcast only
  int64_t count = 0;            ///< elements of the input

  /// Everything but seq is the same.
  bool same_call(const Fingerprint& o) const {
    return kind == o.kind && op == o.op && dtype == o.dtype && root == o.root && count == o.count;
  }
  bool operator==(const Fingerprint& o) const { return seq == o.seq && same_call(o); }

  /// "all_reduce avg (f32, 1000 elements)", without the sequence number.
  std::string call_str() const;
  /// "#17 all_reduce avg (f32, 1000 elements)".
  std::string str() const;

  /// Four i64 words, for an all_gather.
  std::array<int64_t, 4> pack() const;
  static Fingerprint unpack(const int64_t* words);

  /// A transport tag that differs between unlike calls (so Gloo never matches
  /// their messages) and has the top bit clear; check_tag() has it set.
  uint32_t tag() const;
  static uint32_t check_tag(uint64_t seq);
};

/// Empty when every rank's fingerprint equals all[rank]; else a message naming
/// the ranks and what each issued (ranks with the same call grouped).
std::string compare_fingerprints(const std::vector<Fingerprint>& all, const std::string& backend);

/// How many of a group's first collectives are checked: `configured` unless
/// TCV_DISTRIBUTED_DEBUG says OFF (0) or DETAIL (every one: -1).
int64_t checked_collectives(int64_t configured);

}  // namespace tcv::dist::detail
