// tcv::Error and its check macros (TCV_CHECK, TCV_THROW) for code above the
// engine. They are defined with the kernels, at the bottom of the tree
// (kernels/base.h), so that every layer throws the one error type; code above
// the engine includes them from here.
#pragma once

#include "kernels/base.h"
