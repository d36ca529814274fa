#pragma once
// The number a whole text spells, or nothing: std::stod's syntax ("0.2", "1e-5", "inf"),
// blanks allowed around it, nothing else left over, and no overflow. The one reader of the
// layer options and machine fields that take a floating-point value; each caller words its
// own refusal, naming the option and the text.

#include <cctype>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

namespace tessera {

inline std::optional<double> number_from_text(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {  // no number at all, or out of double's range
    return std::nullopt;
  }
  for (std::size_t i = used; i < text.size(); ++i)
    if (!std::isspace(static_cast<unsigned char>(text[i]))) return std::nullopt;
  return value;
}

}  // namespace tessera
