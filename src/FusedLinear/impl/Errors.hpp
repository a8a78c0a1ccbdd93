// SPDX-License-Identifier: Apache-2.0
/// \file Errors.hpp
/// How the library says no: every refusal is a std::invalid_argument naming the entry point,
/// and notes on what ran are joined one after another.
#ifndef FUSED_LINEAR_IMPL_ERRORS_HPP
#define FUSED_LINEAR_IMPL_ERRORS_HPP

#include <stdexcept>
#include <string>

namespace FusedLinear {
namespace Impl {

/// Throws std::invalid_argument "function: problem".
[[noreturn]] inline void refuse(const char* function, const std::string& problem) {
  throw std::invalid_argument(std::string(function) + ": " + problem);
}

/// Appends `more` to a note, "; "-separated.
inline void append(std::string& note, const std::string& more) {
  note += note.empty() ? "" : "; ";
  note += more;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
