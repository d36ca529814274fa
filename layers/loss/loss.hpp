#pragma once
// Every loss and metric, for code that wants them all.

#include "layers/loss/accuracy.hpp"
#include "layers/loss/cross_entropy.hpp"
#include "layers/loss/mse.hpp"
