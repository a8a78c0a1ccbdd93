// SPDX-License-Identifier: Apache-2.0
/// \file FusedLinear.hpp
/// Umbrella header: Y = LeakyReLU(multiplier * (X . W^T + b), negative_slope) on Kokkos.
#ifndef FUSED_LINEAR_HPP
#define FUSED_LINEAR_HPP

#include "FusedLinear_Epilogue.hpp"
#include "FusedLinear_LinearLeakyReLU.hpp"
#include "FusedLinear_Reference.hpp"
#include "FusedLinear_Types.hpp"
#include "FusedLinear_Version.hpp"

#endif
