// SPDX-License-Identifier: Apache-2.0
// The main typed suite (TypedSuite.hpp) on the default execution space: float and double,
// LayoutRight and LayoutLeft.
#include "TypedSuite.hpp"

namespace FusedLinearTest {

INSTANTIATE_TYPED_TEST_SUITE_P(Default, Layer, AsGTestTypes<DefaultConfigs>::type, ConfigName);

}  // namespace FusedLinearTest
