// SPDX-License-Identifier: Apache-2.0
/// \file FusedLinear.hpp
/// Umbrella header: Y = LeakyReLU(multiplier * (X . W^T + b), negative_slope) on Kokkos.
#ifndef FUSED_LINEAR_HPP
#define FUSED_LINEAR_HPP

#include "FusedLinear/Config.hpp"
#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/Gradient.hpp"
#include "FusedLinear/LinearLeakyReLU.hpp"
#include "FusedLinear/Plan.hpp"
#include "FusedLinear/Reference.hpp"
#include "FusedLinear/Types.hpp"
#include "FusedLinear/Wisdom.hpp"

#endif
