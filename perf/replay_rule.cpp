// SPDX-License-Identifier: Apache-2.0
// auto's rule replayed off the GPU: what Impl::resolve chooses for each shape (MxKxN, as
// arguments or one per line on standard input) under Algorithm::Auto at the strict and 3xtf32
// floors, for an H200's facts and contiguous, 16-byte aligned row-major Views (what the perf
// program makes). perf/fit_rule.py --replay reads the output beside the runs' per-path times,
// so a change to the rule is judged on every stored run before it reaches a GPU:
//   fused_linear_replay_rule $(python3 perf/random_shapes.py --seed 22 --count 24) > choices.txt
//   python3 perf/fit_rule.py --shapes perf/results/random-shapes-22.json --replay choices.txt
//       perf/results/h200-2026-12-02-random22
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "FusedLinear/impl/Dispatch.hpp"

namespace {

using FusedLinear::Algorithm;
using FusedLinear::Precision;
namespace Impl = FusedLinear::Impl;

// The facts gather_facts finds on an H200 for the perf program's Views: cuBLAS and cuBLASLt,
// both sm_90a kernels, each refusing rows that are not 16-byte aligned where it needs them.
Impl::Facts h200_facts(const Impl::Shape& s) {
  Impl::Facts f;
  f.backend = Impl::Backend::Cuda;
  f.float_views = true;
  f.blas = FusedLinear::Gemm::Cublas;
  f.cublaslt = f.cublaslt_bias = true;
  const bool packed = s.K % 4 == 0;
  f.sm90_tf32x3 = nullptr;
  f.sm90_skinny = packed ? nullptr : "needs X's and W's rows 16-byte aligned";
  f.skinny_packed = packed;
  f.multiprocessors = 132;
  return f;
}

bool parse(const std::string& text, Impl::Shape& s) {
  std::istringstream in(text);
  char x1 = 0, x2 = 0;
  return bool(in >> s.M >> x1 >> s.K >> x2 >> s.N) && x1 == 'x' && x2 == 'x' && s.M > 0 &&
         s.K > 0 && s.N > 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> shapes(argv + 1, argv + argc);
  if (shapes.empty())
    for (std::string line; std::getline(std::cin, line);)
      if (!line.empty()) shapes.push_back(line);
  std::cout << "# shape floor algorithm precision\n";
  for (const std::string& text : shapes) {
    Impl::Shape s;
    if (!parse(text, s)) {
      std::cerr << "fused_linear_replay_rule: '" << text << "' is not a shape MxKxN\n";
      return 2;
    }
    for (Precision floor : {Precision::Strict, Precision::TF32x3}) {
      const Impl::Decision d = Impl::resolve({Algorithm::Auto, floor, false}, s, h200_facts(s),
                                             "fused_linear_replay_rule");
      std::cout << s.M << 'x' << s.K << 'x' << s.N << ' ' << FusedLinear::to_string(floor) << ' '
                << FusedLinear::to_string(d.algorithm) << ' ' << FusedLinear::to_string(d.precision)
                << '\n';
    }
  }
  return 0;
}
