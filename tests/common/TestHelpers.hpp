// SPDX-License-Identifier: Apache-2.0
// What several suites share, one header per role (in this folder; a suite's own helpers are
// beside it, in its folder):
//  - Common.hpp        the library's names in the test namespace, the precisions, the seed;
//  - HostCopies.hpp    Views to and from row-major doubles on the host;
//  - Oracle.hpp        the test's OWN float64 reference of the layer and its per-element
//                      tolerance; Bounds.hpp the extra error tf32 and 3xtf32 allow;
//  - Problems.hpp      problems on any execution space, filled from a seed; the hash fill;
//  - Instances.hpp     two execution space instances that may run concurrently;
//  - Serves.hpp        the documented contract of which requests a build serves, and `attempt`
//                      and `make_plan`, which check that a request ran exactly when it says;
//  - LiteralCases.hpp  hand-computed values with literal expectations.
#ifndef FUSED_LINEAR_TEST_COMMON_TEST_HELPERS_HPP
#define FUSED_LINEAR_TEST_COMMON_TEST_HELPERS_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <FusedLinear.hpp>

#include "Bounds.hpp"
#include "Common.hpp"
#include "HostCopies.hpp"
#include "Instances.hpp"
#include "LiteralCases.hpp"
#include "Oracle.hpp"
#include "Problems.hpp"
#include "Serves.hpp"

#endif
