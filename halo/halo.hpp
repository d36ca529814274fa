#pragma once
// Everything a layer needs to make its input window present: window rules, plans,
// transports and the exchange.
#include "halo/boundary.hpp"
#include "halo/exchange.hpp"
#include "halo/plan.hpp"
#include "halo/transport_factory.hpp"
#include "halo/window_rule.hpp"
