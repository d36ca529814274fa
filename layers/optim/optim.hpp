#pragma once
// Every optimizer, the schedule and the norms, for code that wants them all.

#include "layers/optim/adam.hpp"
#include "layers/optim/lars.hpp"
#include "layers/optim/lr_schedule.hpp"
#include "layers/optim/norms.hpp"
#include "layers/optim/sgd.hpp"
