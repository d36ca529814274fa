// number_from_text: the whole text must spell one number (blanks around it allowed); a text
// with anything left over, with no number, or out of double's range gives nothing, which
// the layer options and machine fields then refuse in their own words.
#include <gtest/gtest.h>

#include <cmath>

#include "distarray/number_text.hpp"

namespace tessera {
namespace {

TEST(NumberText, WholeTextsAreNumbers) {
  EXPECT_EQ(number_from_text("0.2"), 0.2);
  EXPECT_EQ(number_from_text("1e-5"), 1e-5);
  EXPECT_EQ(number_from_text("-3"), -3.0);
  EXPECT_EQ(number_from_text(" 7.5 "), 7.5);
  EXPECT_TRUE(std::isinf(*number_from_text("inf")));
}

TEST(NumberText, AnythingLeftOverOrNoNumberIsNothing) {
  for (const char* text : {"", " ", "abc", "0.2x", "1e", "1,5", "2 3", "1e999", "--1"})
    EXPECT_FALSE(number_from_text(text).has_value()) << "'" << text << "'";
}

}  // namespace
}  // namespace tessera
