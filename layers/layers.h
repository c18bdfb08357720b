// Every layer: include this to build models.
#pragma once

#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/dropout.h"
#include "layers/init.h"
#include "layers/l2norm.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "layers/shape.h"
