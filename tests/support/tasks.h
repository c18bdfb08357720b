// Test programs that read configs register the tasks first (the config schema
// learns each task's keys and checks from register_task, train/task.h), as
// tcv-train does: including this header does it once per program, before main.
#pragma once

#include "train/task.h"

namespace tcv::testing {

[[maybe_unused]] inline const bool kTasksRegistered = (train::register_builtin_tasks(), true);

}  // namespace tcv::testing
