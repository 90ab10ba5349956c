// Every op of the engine, by family. See ops/README.md for the list and how to add one.
#pragma once
#include "engine/ops/common.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/index.h"
#include "engine/ops/linalg.h"
#include "engine/ops/loss.h"
#include "engine/ops/nn.h"
#include "engine/ops/nn_norm.h"
#include "engine/ops/reduce.h"
#include "engine/tensor/factories.h"
