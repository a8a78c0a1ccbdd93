// SPDX-License-Identifier: Apache-2.0
// auto's rule replayed without running it: what Impl::resolve chooses for each shape (MxKxN, as
// arguments or one per line on standard input) under Algorithm::Auto at the strict and 3xtf32
// floors, for contiguous, 16-byte aligned row-major float Views (what the perf program makes)
// and the facts of a Hopper GPU (the rates the GPU model was fitted with, or those given) or, with
// --host, of a host (its BLAS optimised for the CPU or not, --threads threads, AVX-512 tiles).
// tuning.judge --replay-tool reads the output beside the runs' per-path times, so a change to the
// rule is judged on every stored run before it reaches the machine; --terms prints the cost
// model's terms instead (every GPU path and precision, or the host kernels), which
// tuning.gpu_model and tuning.host_model fit the coefficients to; --golden prints the golden
// dispatch table (every profile x shape x floor of tests/dispatch/GoldenProfiles.hpp, CSV), which
// tuning.rules writes to src/FusedLinear/impl/rules/dispatch-golden.csv:
//   fused_linear_replay_rule [--multiprocessors S --fp32-gflops F --memory-gbps B] [--terms]
//   SHAPES... fused_linear_replay_rule --host generic --threads 2 [--terms] SHAPES...
//   fused_linear_replay_rule --golden
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "FusedLinear/impl/Dispatch.hpp"
#include "dispatch/GoldenProfiles.hpp"

namespace {

using FusedLinear::Algorithm;
using FusedLinear::Precision;
namespace Impl = FusedLinear::Impl;

// The facts gather_facts finds on a Hopper GPU for the perf program's Views: cuBLAS and cuBLASLt,
// both sm_90a kernels, each refusing rows that are not 16-byte aligned where it needs them; the
// device's rates are the caller's.
Impl::Facts hopper_facts(const Impl::Shape& s, const Impl::GpuRates& rates) {
  Impl::Facts f;
  f.backend = Impl::Backend::Cuda;
  f.float_views = true;
  f.blas = FusedLinear::Gemm::Cublas;
  f.cublaslt = f.cublaslt_bias = true;
  const bool packed = s.K % 4 == 0;
  f.sm90_tf32x3 = nullptr;
  f.sm90_skinny = packed ? nullptr : "needs X's and W's rows 16-byte aligned";
  f.skinny_packed = packed;
  f.multiprocessors = std::int64_t(rates.multiprocessors);
  f.fp32_gflops = rates.fp32_gflops;
  f.memory_gbps = rates.memory_gbps;
  return f;
}

// A host backend (OpenMP, Threads, Serial) whose KokkosBlas::gemm calls the host BLAS, of the
// kind HostBlas.hpp finds (BLIS on an AVX-512 CPU is Generic), on `threads` threads.
Impl::Facts host_facts(Impl::HostBlas blas, std::int64_t threads) {
  Impl::Facts f;
  f.backend = Impl::Backend::Host;
  f.float_views = true;
  f.blas = FusedLinear::Gemm::HostBlas;
  f.host_blas = blas;
  f.cublaslt = f.cublaslt_bias = false;
  f.sm90_tf32x3 = f.sm90_skinny = "needs a CUDA build";
  f.host_threads = threads;
  return f;
}

bool parse_host_blas(const std::string& text, Impl::HostBlas& blas) {
  if (text == "optimized")
    blas = Impl::HostBlas::Optimized;
  else if (text == "generic")
    blas = Impl::HostBlas::Generic;
  else if (text == "reference")
    blas = Impl::HostBlas::Reference;
  else
    return false;
  return true;
}

bool parse(const std::string& text, Impl::Shape& s) {
  std::istringstream in(text);
  char x1 = 0, x2 = 0;
  return bool(in >> s.M >> x1 >> s.K >> x2 >> s.N) && x1 == 'x' && x2 == 'x' && s.M > 0 &&
         s.K > 0 && s.N > 0;
}

int usage(const std::string& problem) {
  std::cerr << "fused_linear_replay_rule: " << problem
            << "\nusage: fused_linear_replay_rule [--multiprocessors S] [--fp32-gflops F] "
               "[--memory-gbps B] [--terms] [SHAPE...]\n"
               "       fused_linear_replay_rule --host optimized|generic|reference [--threads T] "
               "[--terms] [SHAPE...]\n"
               "       fused_linear_replay_rule --golden\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> shapes;
  bool host = false, terms = false, golden = false;
  Impl::HostBlas host_blas = Impl::HostBlas::Optimized;
  std::int64_t threads = 1;
  Impl::GpuRates rates = {Impl::GpuRule::fitted_multiprocessors, Impl::GpuRule::fitted_fp32_gflops,
                          Impl::GpuRule::fitted_memory_gbps};
  const std::pair<const char*, double*> rate_options[] = {
      {"--multiprocessors", &rates.multiprocessors},
      {"--fp32-gflops", &rates.fp32_gflops},
      {"--memory-gbps", &rates.memory_gbps}};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool has_value = i + 1 < args.size();
    double* rate = nullptr;
    for (const auto& [name, value] : rate_options)
      if (args[i] == name) rate = value;
    if (rate != nullptr) {
      std::istringstream in(has_value ? args[++i] : "");
      if (!(in >> *rate) || !in.eof() || !(*rate > 0))
        return usage(args[i - (has_value ? 1 : 0)] + " takes a positive number");
    } else if (args[i] == "--host") {
      if (!has_value || !parse_host_blas(args[++i], host_blas))
        return usage("--host takes optimized, generic or reference");
      host = true;
    } else if (args[i] == "--threads") {
      std::istringstream in(has_value ? args[++i] : "");
      if (!(in >> threads) || !in.eof() || threads < 1)
        return usage("--threads takes a positive count");
    } else if (args[i] == "--terms") {
      terms = true;
    } else if (args[i] == "--golden") {
      golden = true;
    } else {
      shapes.push_back(args[i]);
    }
  }
  if (golden) {
    if (args.size() != 1) return usage("--golden takes no other argument");
    std::cout << FusedLinearGolden::csv_header() << '\n';
    for (const std::string& row : FusedLinearGolden::csv_rows()) std::cout << row << '\n';
    return 0;
  }
  if (shapes.empty())
    for (std::string line; std::getline(std::cin, line);)
      if (!line.empty()) shapes.push_back(line);
  std::cout << (!terms ? "# shape floor algorithm precision\n"
                : host ? "# shape algorithm terms (Impl::HostTerms)\n"
                       : "# shape algorithm precision terms (Impl::GpuTerms)\n");
  for (const std::string& text : shapes) {
    Impl::Shape s;
    if (!parse(text, s)) return usage("'" + text + "' is not a shape MxKxN");
    const Impl::Facts f = host ? host_facts(host_blas, threads) : hopper_facts(s, rates);
    if (terms && !host) {
      for (const Impl::Candidate& c : Impl::gpu_candidates) {
        if (!Impl::gpu_serves(c, f)) continue;
        std::cout << text << ' ' << FusedLinear::to_string(c.algorithm) << ' '
                  << FusedLinear::to_string(c.precision);
        for (double v : Impl::gpu_terms(c.algorithm, s, f).term) std::cout << ' ' << v;
        std::cout << '\n';
      }
      continue;
    }
    if (terms) {
      const std::pair<Algorithm, Impl::HostTerms> paths[] = {
          {Algorithm::Fused, Impl::host_fused_terms(s, f.host_tiling, f.host_threads)},
          {Algorithm::FusedSkinny, Impl::host_skinny_terms(s, f.host_tiling, f.host_threads)}};
      for (const auto& [algorithm, t] : paths) {
        std::cout << text << ' ' << FusedLinear::to_string(algorithm);
        for (double v : t.term) std::cout << ' ' << v;
        std::cout << '\n';
      }
      continue;
    }
    for (Precision floor : {Precision::Strict, Precision::TF32x3}) {
      const Impl::Decision d =
          Impl::resolve({Algorithm::Auto, floor, false}, s, f, "fused_linear_replay_rule");
      std::cout << s.M << 'x' << s.K << 'x' << s.N << ' ' << FusedLinear::to_string(floor) << ' '
                << FusedLinear::to_string(d.algorithm) << ' ' << FusedLinear::to_string(d.precision)
                << '\n';
    }
  }
  return 0;
}
