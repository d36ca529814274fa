// bf16: rounding to nearest even, the special values, and the MPI datatype that moves it.
// Every expected value below is worked out from the bit layout, not from the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "distarray/bf16.hpp"
#include "distarray/mpi_datatype.hpp"

namespace tessera {
namespace {

float from_u32(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(Bf16, RoundsToNearestWithTiesToEven) {
  // 1.0 = 0x3f800000. One bf16 ulp at 1.0 is 2^-7 (bit 16 of the float).
  EXPECT_EQ(bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(bf16(from_u32(0x3f807fff)).bits, 0x3f80);  // just below half an ulp: down
  EXPECT_EQ(bf16(from_u32(0x3f808000)).bits, 0x3f80);  // exactly half, even below: stays even
  EXPECT_EQ(bf16(from_u32(0x3f818000)).bits, 0x3f82);  // exactly half, odd below: up to even
  EXPECT_EQ(bf16(from_u32(0x3f808001)).bits, 0x3f81);  // just above half: up
  EXPECT_EQ(bf16(-2.5f).bits, 0xc020);
  EXPECT_EQ(float(bf16(3.140625f)), 3.140625f);  // representable: exact
}

TEST(Bf16, EveryBf16ValueSurvivesARoundTrip) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const bf16 v = bf16::from_bits(std::uint16_t(b));
    const float f = v;
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(float(bf16(f)))) << b;
      continue;
    }
    EXPECT_EQ(bf16(f).bits, b) << b;
  }
}

TEST(Bf16, SpecialValuesKeepTheirMeaning) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bf16(inf).bits, 0x7f80);
  EXPECT_EQ(bf16(-inf).bits, 0xff80);
  EXPECT_EQ(bf16(-0.0f).bits, 0x8000);
  // A NaN whose payload sits only in the dropped bits must not round into infinity.
  EXPECT_TRUE(std::isnan(float(bf16(from_u32(0x7f800001)))));
  EXPECT_TRUE(std::isnan(float(bf16(from_u32(0xffffffff)))));
  // The largest float rounds up past bf16's largest finite value: infinity, as in IEEE.
  EXPECT_EQ(bf16(std::numeric_limits<float>::max()).bits, 0x7f80);
  // Subnormals round like any other value (no flush to zero).
  EXPECT_EQ(bf16(from_u32(0x00010000)).bits, 0x0001);
}

TEST(Bf16, MovesAsTwoBytesAndComputesInFloat) {
  int size = 0;
  MPI_Type_size(mpi_datatype<bf16>(), &size);
  EXPECT_EQ(size, 2);
  static_assert(std::is_same_v<Compute<bf16>, float>);
  static_assert(std::is_same_v<Compute<float>, float>);
  EXPECT_STREQ(precision_name<bf16>(), "bf16");
}

}  // namespace
}  // namespace tessera
