// tcv::Error and its check macros (TCV_CHECK, TCV_THROW) for code above the
// engine. They are defined below every folder of the tree (tcv/core/error.h),
// so that every layer, the kernels included, throws the one error type.
#pragma once

#include "tcv/core/error.h"
