#pragma once
// The layers' log: one line whenever a layer decides something a user tuning a run wants to
// know (which forward path ran, why overlap fell back). Lines go to a replaceable sink so
// apps can route them and tests can read them; layers never print directly.
//
// Default sink: stderr on world rank 0 when the environment sets TESSERA_VERBOSE (to
// anything but "" or "0"), otherwise nothing.

#include <functional>
#include <string>

namespace tessera::layers {

using LogSink = std::function<void(const std::string& line)>;

// Replaces the sink and returns the previous one. An empty sink discards every line.
LogSink set_log_sink(LogSink sink);

// Writes "tessera: <line>" to stderr on world rank 0; other ranks stay quiet.
LogSink stderr_on_rank0();

void log_line(const std::string& line);

}  // namespace tessera::layers
