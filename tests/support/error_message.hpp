#pragma once
// The what() of the exception of type Exception that `action` throws, or "" when it
// throws none: tests compare error messages, not just that something was thrown.

#include <exception>
#include <string>

namespace tessera::testing {

template <class Exception = std::exception, class Action>
std::string error_message(Action&& action) {
  try {
    action();
  } catch (const Exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace tessera::testing
