// SPDX-License-Identifier: Apache-2.0
// The dispatch, without a GPU: Impl::resolve for every Algorithm x Precision under hand-made
// Facts for each kind of build and device (host with an optimised, the reference or no BLAS TPL;
// CUDA on a Hopper GPU, on another GPU, without cuBLASLt; HIP with rocBLAS or without; double
// Views): what each serves, refuses and says. Which path auto picks at each shape is the golden
// table's (TestDispatchGolden.cpp); the host model's counting and the shapes it was judged on
// are here.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "FusedLinear/impl/Dispatch.hpp"
#include "../common/Basics.hpp"

namespace {

using namespace FusedLinearTest;
using Impl::Backend;
using Impl::Decision;
using Impl::Facts;
using Impl::Request;
using Impl::Shape;
using HostRule = Impl::HostRule;

constexpr const char* fn = "FusedLinear::test";
constexpr const char* not_built =
    "is not in this build (a CUDA build with cuBLASLt and FusedLinear_ENABLE_SM90A)";
constexpr const char* not_hopper = "needs a compute capability 9.0 GPU (H100, H200)";

Facts host_facts(Gemm blas, Impl::HostBlas kind) {
  Facts f;
  f.backend = Backend::Host;
  f.float_views = true;
  f.blas = blas;
  f.host_blas = kind;
  f.cublaslt = f.cublaslt_bias = false;
  f.sm90_tf32x3 = f.sm90_skinny = not_built;
  f.multiprocessors = 0;
  f.host_threads = 2;  // as the host cost model was fitted; AVX-512 tiles for float (the default)
  return f;
}
Facts cuda_facts(bool lt, const char* sm90) {
  Facts f;
  f.backend = Backend::Cuda;
  f.float_views = true;
  f.blas = Gemm::Cublas;
  f.cublaslt = f.cublaslt_bias = lt;
  f.sm90_tf32x3 = f.sm90_skinny = sm90;
  f.multiprocessors = 132;
  return f;
}
Facts hopper() { return cuda_facts(true, nullptr); }
Facts other_gpu() { return cuda_facts(true, not_hopper); }
Facts cuda_without_lt() { return cuda_facts(false, not_built); }
Facts hip_facts(Gemm blas) {
  Facts f;
  f.backend = Backend::Hip;
  f.float_views = true;
  f.blas = blas;
  f.cublaslt = f.cublaslt_bias = false;
  f.sm90_tf32x3 = f.sm90_skinny = not_built;
  f.multiprocessors = 110;
  return f;
}
Facts double_views_on_hopper() {
  Facts f = hopper();
  f.float_views = false;
  f.cublaslt_bias = false;  // cuBLASLt's bias epilogue is used for float only
  f.sm90_tf32x3 = f.sm90_skinny = "runs on CUDA with float Views only";
  return f;
}

/// What a request must give: a decision, or a refusal whose message contains `refusal`.
struct Outcome {
  bool refused = false;
  std::string refusal;
  Algorithm algorithm = Algorithm::Auto;
  Precision precision = Precision::Strict;
  Gemm gemm = Gemm::None;
  bool vendor_blas = false, bias_in_gemm = false;
  std::string note;  // "": the note must be empty; else a part of it
};
Outcome ran(Algorithm a, Precision p, Gemm g, bool vendor_blas, bool bias_in_gemm = false,
            std::string note = "") {
  Outcome o;
  o.algorithm = a, o.precision = p, o.gemm = g, o.vendor_blas = vendor_blas;
  o.bias_in_gemm = bias_in_gemm, o.note = std::move(note);
  return o;
}
Outcome refused(std::string part) {
  Outcome o;
  o.refused = true;
  o.refusal = std::move(part);
  return o;
}

struct Case {
  Algorithm asked;
  Precision precision;
  Outcome expected;
};

std::string label(const char* scenario, const Shape& s, const Case& c, bool zero) {
  return std::string(scenario) + " " + std::to_string(s.M) + "x" + std::to_string(s.K) + "x" +
         std::to_string(s.N) + ": " + FusedLinear::to_string(c.asked) + "/" +
         FusedLinear::to_string(c.precision) + (zero ? " multiplier 0" : "");
}

void expect_case(const char* scenario, const Facts& f, const Shape& s, const Case& c,
                 bool zero = false) {
  const std::string what = label(scenario, s, c, zero);
  const Request r{c.asked, c.precision, zero};
  if (c.expected.refused) {
    try {
      const Decision d = Impl::resolve(r, s, f, fn);
      ADD_FAILURE() << what << ": expected a refusal (" << c.expected.refusal << "), got "
                    << FusedLinear::to_string(d.algorithm) << "/"
                    << FusedLinear::to_string(d.precision) << " " << d.note;
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(starts_with(e.what(), std::string(fn) + ": ")) << what << ": " << e.what();
      EXPECT_TRUE(contains(e.what(), c.expected.refusal))
          << what << ": " << e.what() << "\n  expected to contain: " << c.expected.refusal;
    }
    return;
  }
  Decision d;
  try {
    d = Impl::resolve(r, s, f, fn);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": refused: " << e.what();
    return;
  }
  EXPECT_EQ(FusedLinear::to_string(d.algorithm),
            std::string(FusedLinear::to_string(c.expected.algorithm)))
      << what;
  EXPECT_EQ(FusedLinear::to_string(d.precision),
            std::string(FusedLinear::to_string(c.expected.precision)))
      << what;
  EXPECT_EQ(FusedLinear::to_string(d.gemm), std::string(FusedLinear::to_string(c.expected.gemm)))
      << what;
  EXPECT_EQ(d.vendor_blas, c.expected.vendor_blas) << what;
  EXPECT_EQ(d.bias_in_gemm, c.expected.bias_in_gemm) << what;
  if (c.expected.note.empty())
    EXPECT_TRUE(d.note.empty()) << what << ": unexpected note: " << d.note;
  else
    EXPECT_TRUE(contains(d.note, c.expected.note))
        << what << ": note '" << d.note << "' should contain '" << c.expected.note << "'";
}

/// Every Algorithm x Precision must be listed once.
void expect_table(const char* scenario, const Facts& f, const Shape& s,
                  const std::vector<Case>& cases) {
  int listed[8][3] = {};
  for (const Case& c : cases) {
    ++listed[int(c.asked)][int(c.precision)];
    expect_case(scenario, f, s, c);
  }
  for (Algorithm a : all_algorithms)
    for (Precision p : all_precisions)
      EXPECT_EQ(listed[int(a)][int(p)], 1)
          << scenario << ": " << FusedLinear::to_string(a) << "/" << FusedLinear::to_string(p)
          << " listed " << listed[int(a)][int(p)] << " times";
}

const Shape large{1024, 1024, 1024};  // M, K, N: no few-rows or short-K criterion applies
const Shape few_rows{1, 8192, 8192};

using A = Algorithm;
using G = Gemm;
constexpr Precision S = Precision::Strict, T = Precision::TF32, X3 = Precision::TF32x3;

// The refusals every build shares for the portable kernels and the sm_90a ones' precisions.
const char* const tf32_refusal = "precision tf32 needs cuBLAS or cuBLASLt";
const char* const x3_refusal =
    "precision 3xtf32 runs on fused_sm90 (Hopper GPUs) and, through cuBLASLt";

// The rows the tables share, in groups; each table is its groups and its own rows (expect_table
// checks that together they list every Algorithm x Precision once).
std::vector<Case> table(std::initializer_list<std::vector<Case>> groups) {
  std::vector<Case> out;
  for (const auto& g : groups) out.insert(out.end(), g.begin(), g.end());
  return out;
}

/// Every build: the portable kernels run strict fp32.
std::vector<Case> portable_strict() {
  return {{A::Fused, S, ran(A::Fused, S, G::FusedKernel, false)},
          {A::FusedSkinny, S, ran(A::FusedSkinny, S, G::SkinnyKernel, false)}};
}

/// vendor and vendor_prefill on the vendor BLAS `g` in precision `p`.
std::vector<Case> vendor_paths(Gemm g, Precision p) {
  return {{A::Vendor, p, ran(A::Vendor, p, g, true)},
          {A::VendorPrefill, p, ran(A::VendorPrefill, p, g, true)}};
}

/// cuBLASLt serving the Views: vendor_lt in every precision, and auto takes it for strict and tf32.
std::vector<Case> cublaslt_paths() {
  return {{A::Auto, S, ran(A::VendorLt, S, G::CublasLt, true, true)},
          {A::VendorLt, S, ran(A::VendorLt, S, G::CublasLt, true, true)},
          {A::Auto, T, ran(A::VendorLt, T, G::CublasLt, true, true)},
          {A::VendorLt, T, ran(A::VendorLt, T, G::CublasLt, true, true)},
          {A::VendorLt, X3, ran(A::VendorLt, X3, G::CublasLt, true, true)}};
}

/// Without cuBLASLt no vendor path computes 3xtf32.
std::vector<Case> vendor_paths_without_tf32x3() {
  return {{A::Vendor, X3, refused("not on vendor here")},
          {A::VendorPrefill, X3, refused("not on vendor_prefill here")},
          {A::VendorLt, X3, refused("not on vendor here")}};
}

/// GPU builds: the shared tf32 and 3xtf32 refusals of the kernels listed.
std::vector<Case> kernel_refusals(std::initializer_list<Algorithm> tf32,
                                  std::initializer_list<Algorithm> tf32x3) {
  std::vector<Case> out;
  for (Algorithm a : tf32) out.push_back({a, T, refused(tf32_refusal)});
  for (Algorithm a : tf32x3) out.push_back({a, X3, refused(x3_refusal)});
  return out;
}

/// The host's table for a BLAS and the path strict auto takes at the shape (`automatic`).
std::vector<Case> host_table(Gemm blas, Algorithm automatic) {
  const bool vb = blas != G::KokkosKernelsNative;
  const std::string native = vb ? "" : "native kernel";
  const std::string gets = std::string("with these Views gets ") + FusedLinear::to_string(blas);
  const Gemm auto_gemm = automatic == A::Vendor        ? blas
                         : automatic == A::FusedSkinny ? G::SkinnyKernel
                                                       : G::FusedKernel;
  const bool auto_vb = automatic == A::Vendor && vb;
  return table(
      {portable_strict(),
       vendor_paths_without_tf32x3(),
       {
           {A::Auto, S, ran(automatic, S, auto_gemm, auto_vb)},
           {A::Vendor, S, ran(A::Vendor, S, blas, vb, false, native)},
           {A::VendorPrefill, S, ran(A::VendorPrefill, S, blas, vb, false, native)},
           {A::VendorLt, S,
            ran(A::Vendor, S, blas, vb, false, "cuBLASLt does not serve these Views")},
           {A::FusedSm90, S, refused("fused_sm90 computes precision 3xtf32 only (asked: strict)")},
           {A::SkinnySm90, S,
            refused(std::string("skinny_sm90 (the sm_90a few-rows kernel) ") + not_built)},
           // The tensor-core precisions under auto are floors; no host path computes them, so
           // strict fp32 runs at every shape, and the note says why.
           {A::Auto, T, ran(automatic, S, auto_gemm, auto_vb, false, "a floor")},
           {A::Vendor, T, refused(std::string("vendor ") + gets)},
           {A::VendorPrefill, T, refused(std::string("vendor_prefill ") + gets)},
           {A::VendorLt, T, refused(std::string("vendor ") + gets)},
           {A::Fused, T, refused("fused with these Views gets no tensor cores")},
           {A::FusedSkinny, T, refused("fused_skinny with these Views gets no tensor cores")},
           {A::FusedSm90, T, refused("fused_sm90 with these Views gets no tensor cores")},
           {A::SkinnySm90, T, refused("skinny_sm90 with these Views gets no tensor cores")},
           {A::Auto, X3, ran(automatic, S, auto_gemm, auto_vb, false, "a floor")},
           {A::Fused, X3, refused("not on fused here")},
           {A::FusedSkinny, X3, refused("not on fused_skinny here")},
           {A::FusedSm90, X3,
            refused(std::string("fused_sm90 (the sm_90a 3xtf32 kernel) ") + not_built)},
           {A::SkinnySm90, X3, refused("not on skinny_sm90 here")},
       }});
}

// Host auto (Impl::HostRule): the host kernel the cost model predicts faster (fused_skinny
// for few rows); vendor where an optimised BLAS whose kernels fit the CPU serves long-K products
// of many rows; never the reference BLAS, a generic-kernel one or an unidentified one.
TEST(Dispatch, HostWithAnOptimisedBlas) {
  const Facts f = host_facts(G::HostBlas, Impl::HostBlas::Optimized);
  expect_table("host, optimised BLAS", f, large, host_table(G::HostBlas, A::Vendor));
  expect_table("host, optimised BLAS", f, Shape{4096, 4096, 4096},
               host_table(G::HostBlas, A::Vendor));
  expect_table("host, optimised BLAS", f, few_rows, host_table(G::HostBlas, A::FusedSkinny));
}

TEST(Dispatch, HostWithTheReferenceOrAGenericBlas) {
  for (auto kind : {Impl::HostBlas::Reference, Impl::HostBlas::Generic, Impl::HostBlas::Unknown}) {
    const Facts f = host_facts(G::HostBlas, kind);
    expect_table("host BLAS", f, large, host_table(G::HostBlas, A::Fused));
    expect_table("host BLAS", f, Shape{4096, 4096, 4096}, host_table(G::HostBlas, A::Fused));
    expect_table("host BLAS", f, few_rows, host_table(G::HostBlas, A::FusedSkinny));
  }
}

TEST(Dispatch, HostWithoutBlasTpl) {
  // (The kind of host BLAS is not looked at when Kokkos Kernels does not call it.)
  for (auto kind : {Impl::HostBlas::Unknown, Impl::HostBlas::Optimized}) {
    const Facts f = host_facts(G::KokkosKernelsNative, kind);
    expect_table("host without BLAS", f, large, host_table(G::KokkosKernelsNative, A::Fused));
    expect_table("host without BLAS", f, few_rows,
                 host_table(G::KokkosKernelsNative, A::FusedSkinny));
  }
}

// Host auto picks the kernel of the least predicted time (the host cost model: HostRule::
// fused_ms, skinny_ms). Shapes where one kernel was at least 1.25x ahead of the other
// on the machine the model was fitted on (2 threads, AVX-512; perf/results/host-2c-2026-12-05-*),
// through the mechanisms it counts: W packed again for each item of few rows on a narrow Y,
// dot products of a few steps, X streamed again per column group.
TEST(Dispatch, HostCostModelPicksTheFasterKernel) {
  const Facts generic = host_facts(G::HostBlas, Impl::HostBlas::Generic);
  const struct {
    Shape shape;
    Algorithm faster;
  } cases[] = {
      // fused_skinny: few rows along a long K; a narrow Y (fused packs W again for each of its
      // 12-row items, and pads N to 32 columns).
      {{1, 6658, 1551}, A::FusedSkinny},   // 0.587 ms against 2.46
      {{3, 19321, 4606}, A::FusedSkinny},  // 8.41 against 23.5
      {{8, 13887, 34}, A::FusedSkinny},    // 0.042 against 0.210
      {{2, 25541, 25}, A::FusedSkinny},    // 0.039 against 0.459
      {{21, 2925, 25}, A::FusedSkinny},    // 0.025 against 0.060
      {{55, 5476, 38}, A::FusedSkinny},    // 0.156 against 0.404
      {{293, 331, 18}, A::FusedSkinny},    // 0.034 against 0.054
      // fused: dot products of a few steps, even on few rows; many rows.
      {{6, 48, 567}, A::Fused},       // 0.0095 against 0.0140
      {{7, 24, 542}, A::Fused},       // 0.0086 against 0.0127
      {{18, 30, 12662}, A::Fused},    // 0.143 against 1.08
      {{32, 52, 1313}, A::Fused},     // 0.028 against 0.093
      {{44, 828, 18404}, A::Fused},   // 6.43 against 9.45
      {{76, 5582, 4599}, A::Fused},   // 17.7 against 25.8
      {{580, 31, 761}, A::Fused},     // 0.187 against 2.09
      {{1268, 1069, 894}, A::Fused},  // 8.17 against 18.3
  };
  for (const auto& c : cases) {
    const std::string s = std::to_string(c.shape.M) + "x" + std::to_string(c.shape.K) + "x" +
                          std::to_string(c.shape.N);
    EXPECT_EQ(Impl::strict_auto(c.shape, generic), c.faster) << s;
    const Request automatic{A::Auto, S, false};
    EXPECT_EQ(Impl::resolve(automatic, c.shape, generic, fn).algorithm, c.faster) << s;
  }
}

// What the model counts: the items each kernel makes for the threads, the work per thread in
// waves of them, X outgrowing the cache.
TEST(Dispatch, HostCostModelCountsTheKernelsWork) {
  const Impl::HostTiling t;  // AVX-512, float
  // The skinny kernel's items: 24 columns, fewer where the threads would not each have one.
  EXPECT_EQ(Impl::skinny_item_columns(1000, 2, 3, 24), 24);
  EXPECT_EQ(Impl::skinny_item_columns(24, 2, 3, 24), 12);
  EXPECT_EQ(Impl::skinny_item_columns(30, 2, 3, 24), 15);
  EXPECT_EQ(Impl::skinny_item_columns(24, 1, 3, 24), 24);
  EXPECT_EQ(Impl::skinny_item_columns(24, 0, 3, 24), 24);  // no threads known: one
  EXPECT_EQ(Impl::skinny_item_columns(5, 2, 3, 24), 3);
  EXPECT_EQ(Impl::skinny_item_columns(1, 8, 3, 24), 3);
  // Work per thread halves with twice the threads where the items allow it...
  const Shape wide{8, 4096, 4800}, narrow{8, 4096, 3};  // 200 items of 24 columns; one
  const auto per_thread = [&](const Impl::HostTerms& one, const Impl::HostTerms& two, int i) {
    return one.term[i] / two.term[i];
  };
  EXPECT_DOUBLE_EQ(
      per_thread(Impl::host_skinny_terms(wide, t, 1), Impl::host_skinny_terms(wide, t, 2), 1), 2.0);
  EXPECT_DOUBLE_EQ(
      per_thread(Impl::host_fused_terms(wide, t, 1), Impl::host_fused_terms(wide, t, 2), 3), 2.0);
  // ... and not where a narrow Y is one item of one column group.
  EXPECT_DOUBLE_EQ(
      per_thread(Impl::host_skinny_terms(narrow, t, 1), Impl::host_skinny_terms(narrow, t, 2), 1),
      1.0);
  // fused at 55x5476x38: two column tiles (32 + 6 columns), M cut to 12-row tiles for 8
  // items: 10 items, 5 a thread, each packing its columns of W again.
  const Impl::HostFusedGrid g(55, 38, 2, t.mr, t.nr, t.max_rows, t.max_columns);
  EXPECT_EQ(g.items(), 10);
  EXPECT_DOUBLE_EQ(Impl::host_fused_terms({55, 5476, 38}, t, 2).term[5], 5.0);
  // X in a core's cache (1 MB) is read once; beyond, once per column group.
  const std::int64_t in_cache = HostRule::cache_bytes / 4 / 1024;  // rows of K = 1024
  EXPECT_EQ(Impl::host_skinny_terms({in_cache, 1024, 512}, t, 2).term[7], 0.0);
  EXPECT_GT(Impl::host_skinny_terms({in_cache + 1, 1024, 512}, t, 2).term[7], 0.0);
  Impl::HostTiling doubles = t;
  doubles.scalar_bytes = 8;
  EXPECT_GT(Impl::host_skinny_terms({in_cache, 1024, 512}, doubles, 2).term[7], 0.0);
  // An empty shape runs no product: nothing is counted (and nothing divides by its extents).
  for (const Shape& empty : {Shape{0, 64, 64}, Shape{64, 0, 64}, Shape{64, 64, 0}}) {
    EXPECT_EQ(Impl::host_fused_terms(empty, t, 2).ms(HostRule::fused_ms), 0.0);
    EXPECT_EQ(Impl::host_skinny_terms(empty, t, 2).ms(HostRule::skinny_ms), 0.0);
  }
}

// The GPU cost model picks the path measured fastest by a clear margin (at least 1.4x ahead of
// the next strict path) on an H200, stored in perf/data/runs (seeds 29-33, the grids, the sweep),
// through what it counts: W streamed once by the few-rows kernels, dot products of a few steps
// on many outputs, a long K on one output tile.
TEST(Dispatch, GpuCostModelPicksTheFasterPath) {
  const struct {
    Shape shape;
    Algorithm faster;
  } cases[] = {
      {{2, 219, 483}, A::FusedSkinny},    {{64, 259, 342}, A::FusedSkinny},
      {{299, 150, 22}, A::FusedSkinny},   {{32, 8192, 8192}, A::SkinnySm90},
      {{16, 4096, 50257}, A::SkinnySm90}, {{3, 7848, 4979}, A::SkinnySm90},
      {{24, 6144, 1536}, A::SkinnySm90},  {{8192, 64, 8192}, A::Fused},
      {{4526, 29, 16855}, A::Fused},      {{15651, 16, 55}, A::Fused},
      {{8192, 128, 8192}, A::Fused},
  };
  for (const auto& c : cases) {
    const std::string s = std::to_string(c.shape.M) + "x" + std::to_string(c.shape.K) + "x" +
                          std::to_string(c.shape.N);
    Facts f = hopper();
    f.skinny_packed = c.shape.K % 4 == 0;  // the perf program's contiguous rows
    if (!f.skinny_packed) f.sm90_skinny = "needs X's and W's rows 16-byte aligned";
    EXPECT_EQ(Impl::strict_auto(c.shape, f), c.faster) << s;
    EXPECT_EQ(Impl::resolve({A::Auto, S, false}, c.shape, f, fn).algorithm, c.faster) << s;
  }
}

// What the GPU model counts in: the device's rates. Bytes cost twice as long at half the
// bandwidth and flops twice as long at half the fp32 rate, each term one or the other; where a
// shape's choice moves when the bandwidth halves, it moves to the path that moves fewer bytes
// (at 1192x554x6136 from cuBLASLt plus the pass over Y to the fused kernel, which writes Y once).
// A device that reports no rates is counted as the one the model was fitted on.
TEST(Dispatch, GpuCostModelCountsTheDevicesRates) {
  const Facts fitted = hopper();
  Facts h200 = fitted, half_bandwidth = fitted, half_flops = fitted;
  h200.fp32_gflops = Impl::GpuRule::fitted_fp32_gflops;
  h200.memory_gbps = Impl::GpuRule::fitted_memory_gbps;
  half_bandwidth.fp32_gflops = half_flops.fp32_gflops = h200.fp32_gflops;
  half_bandwidth.memory_gbps = h200.memory_gbps / 2;
  half_flops.memory_gbps = h200.memory_gbps;
  half_flops.fp32_gflops = h200.fp32_gflops / 2;
  const Shape shapes[] = {{1, 8192, 8192}, {16, 4096, 4096}, {1024, 8192, 8192}, {1192, 554, 6136},
                          {9, 441, 55305}, {8192, 64, 8192}, {60, 14798, 12920}, {300, 1025, 129}};
  int moved = 0;
  for (const Shape& shape : shapes) {
    const std::string s =
        std::to_string(shape.M) + "x" + std::to_string(shape.K) + "x" + std::to_string(shape.N);
    // A candidate's predicted time moving bytes at full bandwidth: what halving it adds.
    const auto bytes_ms = [&](const Impl::Candidate& c) {
      return Impl::gpu_predicted_ms(c, shape, half_bandwidth) -
             Impl::gpu_predicted_ms(c, shape, h200);
    };
    for (const Impl::Candidate& c : Impl::gpu_candidates) {
      const Impl::GpuTerms at = Impl::gpu_terms(c.algorithm, shape, h200);
      const Impl::GpuTerms b = Impl::gpu_terms(c.algorithm, shape, half_bandwidth);
      const Impl::GpuTerms f = Impl::gpu_terms(c.algorithm, shape, half_flops);
      const Impl::GpuTerms none = Impl::gpu_terms(c.algorithm, shape, fitted);
      for (int i = 0; i < Impl::GpuTerms::count; ++i) {
        const std::string what = s + " " + FusedLinear::to_string(c.algorithm) + "/" +
                                 FusedLinear::to_string(c.precision) + " term " + std::to_string(i);
        EXPECT_DOUBLE_EQ(none.term[i], at.term[i]) << what;
        // Each term scales with one rate, or with neither (a launch, a count of waves).
        const bool bytes = b.term[i] != at.term[i], flops = f.term[i] != at.term[i];
        EXPECT_FALSE(bytes && flops) << what;
        if (bytes) EXPECT_DOUBLE_EQ(b.term[i], 2 * at.term[i]) << what;
        if (flops) EXPECT_DOUBLE_EQ(f.term[i], 2 * at.term[i]) << what;
      }
    }
    const Impl::Candidate before = Impl::gpu_auto(shape, h200, S);
    const Impl::Candidate after = Impl::gpu_auto(shape, half_bandwidth, S);
    if (before.algorithm != after.algorithm) {
      ++moved;
      EXPECT_LT(bytes_ms(after), bytes_ms(before)) << s;
    }
  }
  EXPECT_EQ(Impl::strict_auto({1192, 554, 6136}, h200), A::VendorLt);
  EXPECT_EQ(Impl::strict_auto({1192, 554, 6136}, half_bandwidth), A::Fused);
  EXPECT_GT(moved, 0);
  // An empty shape runs no product: nothing is counted.
  for (const Shape& empty : {Shape{0, 64, 64}, Shape{64, 0, 64}, Shape{64, 64, 0}})
    for (const Impl::Candidate& c : Impl::gpu_candidates)
      EXPECT_EQ(Impl::gpu_predicted_ms(c, empty, h200), 0.0);
}

TEST(Dispatch, CudaOnHopper) {
  expect_table(
      "Hopper", hopper(), large,
      table({portable_strict(),
             vendor_paths(G::Cublas, S),
             vendor_paths(G::Cublas, T),
             vendor_paths(G::CublasLt, X3),
             cublaslt_paths(),
             kernel_refusals({A::Fused, A::FusedSkinny}, {A::Fused}),
             {
                 {A::FusedSm90, S, refused("fused_sm90 computes precision 3xtf32 only")},
                 {A::SkinnySm90, S, ran(A::SkinnySm90, S, G::Sm90SkinnyKernel, false)},
                 {A::FusedSm90, T, refused("fused_sm90 with these Views gets no tensor cores")},
                 {A::SkinnySm90, T, refused("skinny_sm90 with these Views gets no tensor cores")},
                 {A::Auto, X3, ran(A::FusedSm90, X3, G::Sm90Tf32x3Kernel, false)},
                 {A::FusedSkinny, X3, refused("not on fused_skinny here")},
                 {A::FusedSm90, X3, ran(A::FusedSm90, X3, G::Sm90Tf32x3Kernel, false)},
                 {A::SkinnySm90, X3, refused("not on skinny_sm90 here")},
             }}));
  // Few rows: the few-rows kernel, and strict as the floor of the tensor-core precisions.
  expect_case("Hopper", hopper(), few_rows,
              {A::Auto, S, ran(A::SkinnySm90, S, G::Sm90SkinnyKernel, false)});
  expect_case(
      "Hopper", hopper(), few_rows,
      {A::Auto, T, ran(A::SkinnySm90, S, G::Sm90SkinnyKernel, false, false, "skinny_sm90")});
  expect_case("Hopper", hopper(), few_rows,
              {A::Auto, X3, ran(A::SkinnySm90, S, G::Sm90SkinnyKernel, false, false, "a floor")});
  // Explicit requests keep their meaning at few rows.
  expect_case("Hopper", hopper(), few_rows,
              {A::FusedSm90, X3, ran(A::FusedSm90, X3, G::Sm90Tf32x3Kernel, false)});
  expect_case("Hopper", hopper(), few_rows,
              {A::VendorLt, T, ran(A::VendorLt, T, G::CublasLt, true, true)});
}

TEST(Dispatch, CudaOnAnotherGpu) {
  expect_table(
      "other GPU", other_gpu(), large,
      table({portable_strict(),
             vendor_paths(G::Cublas, S),
             vendor_paths(G::Cublas, T),
             vendor_paths(G::CublasLt, X3),
             cublaslt_paths(),
             kernel_refusals({A::Fused, A::FusedSkinny, A::FusedSm90, A::SkinnySm90},
                             {A::Fused, A::FusedSkinny, A::SkinnySm90}),
             {
                 {A::FusedSm90, S, refused("fused_sm90 computes precision 3xtf32 only")},
                 {A::SkinnySm90, S,
                  refused(std::string("skinny_sm90 (the sm_90a few-rows kernel) ") + not_hopper)},
                 // cuBLASLt's strict product is predicted faster than its three TF32 ones here.
                 {A::Auto, X3, ran(A::VendorLt, S, G::CublasLt, true, true, "a floor")},
                 {A::FusedSm90, X3,
                  refused(std::string("fused_sm90 (the sm_90a 3xtf32 kernel) ") + not_hopper)},
             }}));
  expect_case("other GPU", other_gpu(), few_rows,
              {A::Auto, S, ran(A::FusedSkinny, S, G::SkinnyKernel, false)});
  expect_case("other GPU", other_gpu(), few_rows,
              {A::Auto, X3, ran(A::FusedSkinny, S, G::SkinnyKernel, false, false, "a floor")});
}

TEST(Dispatch, CudaWithoutCublasLt) {
  const std::string lt_note = "cuBLASLt does not serve these Views";
  expect_table(
      "CUDA without cuBLASLt", cuda_without_lt(), large,
      table(
          {portable_strict(),
           vendor_paths(G::Cublas, S),
           vendor_paths(G::Cublas, T),
           vendor_paths_without_tf32x3(),
           kernel_refusals({A::Fused, A::FusedSkinny, A::FusedSm90, A::SkinnySm90},
                           {A::Fused, A::FusedSkinny, A::SkinnySm90}),
           {
               {A::Auto, S, ran(A::Vendor, S, G::Cublas, true)},
               {A::VendorLt, S, ran(A::Vendor, S, G::Cublas, true, false, lt_note)},
               {A::FusedSm90, S, refused("fused_sm90 computes precision 3xtf32 only")},
               {A::SkinnySm90, S, refused(not_built)},
               {A::Auto, T, ran(A::Vendor, T, G::Cublas, true)},
               {A::VendorLt, T, ran(A::Vendor, T, G::Cublas, true, false, lt_note)},
               // No path computes 3xtf32 without cuBLASLt or the Hopper kernel: auto's floor runs
               // strict.
               {A::Auto, X3, ran(A::Vendor, S, G::Cublas, true, false, "no path computes it here")},
               {A::FusedSm90, X3,
                refused(std::string("fused_sm90 (the sm_90a 3xtf32 kernel) ") + not_built)},
           }}));
  expect_case("CUDA without cuBLASLt", cuda_without_lt(), few_rows,
              {A::Auto, X3, ran(A::FusedSkinny, S, G::SkinnyKernel, false, false, "a floor")});
}

TEST(Dispatch, Hip) {
  const std::string lt_note = "cuBLASLt does not serve these Views";
  expect_table(
      "HIP with rocBLAS", hip_facts(G::Rocblas), large,
      table(
          {portable_strict(),
           vendor_paths(G::Rocblas, S),
           vendor_paths_without_tf32x3(),
           kernel_refusals({A::Fused, A::FusedSkinny, A::FusedSm90, A::SkinnySm90},
                           {A::Fused, A::FusedSkinny, A::SkinnySm90}),
           {
               {A::Auto, S, ran(A::Vendor, S, G::Rocblas, true)},
               {A::VendorLt, S, ran(A::Vendor, S, G::Rocblas, true, false, lt_note)},
               {A::FusedSm90, S, refused("3xtf32 only")},
               {A::SkinnySm90, S, refused(not_built)},
               {A::Auto, T, ran(A::Vendor, S, G::Rocblas, true, false, "no path computes it here")},
               {A::Vendor, T, refused("vendor with these Views gets rocBLAS")},
               {A::VendorPrefill, T, refused("vendor_prefill with these Views gets rocBLAS")},
               {A::VendorLt, T, refused("vendor with these Views gets rocBLAS")},
               {A::Auto, X3,
                ran(A::Vendor, S, G::Rocblas, true, false, "no path computes it here")},
               {A::FusedSm90, X3, refused(not_built)},
           }}));
  // Without a vendor BLAS for the Views, auto takes the fused kernel (it beats Kokkos Kernels'
  // native gemm plus a pass); vendor says that the native gemm runs.
  const Facts native = hip_facts(G::KokkosKernelsNative);
  expect_case("HIP native", native, large, {A::Auto, S, ran(A::Fused, S, G::FusedKernel, false)});
  expect_case(
      "HIP native", native, large,
      {A::Vendor, S, ran(A::Vendor, S, G::KokkosKernelsNative, false, false, "native kernel")});
  expect_case("HIP native", native, few_rows,
              {A::Auto, S, ran(A::FusedSkinny, S, G::SkinnyKernel, false)});
}

TEST(Dispatch, DoubleViews) {
  const char* tf32_float = "precision tf32 applies to float Views only";
  const char* x3_float = "precision 3xtf32 applies to float Views only";
  std::vector<Case> cases =
      table({portable_strict(),
             vendor_paths(G::Cublas, S),
             {
                 {A::Auto, S, ran(A::VendorLt, S, G::CublasLt, true, false)},
                 {A::VendorLt, S, ran(A::VendorLt, S, G::CublasLt, true, false)},
                 {A::FusedSm90, S, refused("3xtf32 only")},
                 {A::SkinnySm90, S, refused("runs on CUDA with float Views only")},
             }});
  for (Algorithm a : all_algorithms) {
    cases.push_back({a, T, refused(tf32_float)});
    cases.push_back({a, X3, refused(x3_float)});
  }
  expect_table("CUDA double", double_views_on_hopper(), large, cases);
  // Even at few rows (where auto's floor would run strict): the precision is refused for double.
  expect_case("CUDA double", double_views_on_hopper(), few_rows, {A::Auto, X3, refused(x3_float)});
  Facts host_double = host_facts(G::HostBlas, Impl::HostBlas::Reference);
  host_double.float_views = false;
  expect_case("host double", host_double, large, {A::Auto, T, refused(tf32_float)});
  expect_case("host double", host_double, large, {A::Auto, X3, refused(x3_float)});
  expect_case("host double", host_double, large,
              {A::Vendor, S, ran(A::Vendor, S, G::HostBlas, true)});
}

// vendor_prefill with multiplier 0 would let the BLAS skip the product (alpha = 0): vendor runs,
// and says why; nothing else changes.
TEST(Dispatch, ZeroMultiplier) {
  const char* why = "multiplier 0";
  expect_case("Hopper", hopper(), large,
              {A::VendorPrefill, S, ran(A::Vendor, S, G::Cublas, true, false, why)}, true);
  expect_case("Hopper", hopper(), large,
              {A::VendorPrefill, T, ran(A::Vendor, T, G::Cublas, true, false, why)}, true);
  expect_case("Hopper", hopper(), large,
              {A::VendorPrefill, X3, ran(A::Vendor, X3, G::CublasLt, true, false, why)}, true);
  expect_case("Hopper", hopper(), large, {A::Vendor, S, ran(A::Vendor, S, G::Cublas, true)}, true);
  expect_case("Hopper", hopper(), large, {A::Auto, S, ran(A::VendorLt, S, G::CublasLt, true, true)},
              true);
  expect_case("host", host_facts(G::HostBlas, Impl::HostBlas::Reference), large,
              {A::VendorPrefill, S, ran(A::Vendor, S, G::HostBlas, true, false, why)}, true);
}

TEST(Dispatch, NamesRoundTrip) {
  for (Algorithm a : all_algorithms)
    EXPECT_EQ(FusedLinear::algorithm_from_string(FusedLinear::to_string(a)), a);
  for (Precision p : all_precisions)
    EXPECT_EQ(FusedLinear::precision_from_string(FusedLinear::to_string(p)), p);
  try {
    FusedLinear::algorithm_from_string("cublas");
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(
        starts_with(e.what(), "FusedLinear::algorithm_from_string: unknown algorithm 'cublas'"))
        << e.what();
  }
  EXPECT_THROW(FusedLinear::precision_from_string("fp16"), std::invalid_argument);
  EXPECT_EQ(std::string(FusedLinear::to_string(Gemm::None)), "none");
  EXPECT_EQ(std::string(FusedLinear::to_string(Gemm::HostBlas)), "host BLAS");
  EXPECT_EQ(std::string(FusedLinear::to_string(Gemm::Cublas)), "cuBLAS");
  EXPECT_EQ(std::string(FusedLinear::to_string(Gemm::CublasLt)), "cuBLASLt");
  EXPECT_EQ(std::string(FusedLinear::to_string(Gemm::KokkosKernelsNative)),
            "Kokkos Kernels native gemm");
  const Gemm all_gemms[] = {Gemm::None,
                            Gemm::HostBlas,
                            Gemm::Cublas,
                            Gemm::CublasLt,
                            Gemm::Rocblas,
                            Gemm::OneMkl,
                            Gemm::KokkosKernelsNative,
                            Gemm::FusedKernel,
                            Gemm::SkinnyKernel,
                            Gemm::Sm90Tf32x3Kernel,
                            Gemm::Sm90SkinnyKernel};
  std::vector<std::string> names;
  for (Gemm g : all_gemms) {
    names.emplace_back(FusedLinear::to_string(g));
    EXPECT_NE(names.back(), "unknown");
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end()) << "names must be distinct";
}

}  // namespace

namespace {

// The gradient's products (dX: M rows, reduction N, K columns; dW: N rows, reduction M, K
// columns), each the forward's product of another shape.
FusedLinear::GradientOptions gradient_request(Algorithm a, Precision p) {
  FusedLinear::GradientOptions o;
  o.algorithm = a, o.precision = p;
  return o;
}

TEST(DispatchGradient, HostRunsStrictOnItsBlas) {
  const Facts f = host_facts(Gemm::HostBlas, Impl::HostBlas::Optimized);
  for (Precision floor : {Precision::Strict, Precision::TF32, Precision::TF32x3}) {
    const FusedLinear::RunInfo r = Impl::resolve_gradient_product(
        gradient_request(Algorithm::Auto, floor), Shape{64, 128, 32}, true, false, f, fn);
    EXPECT_EQ(r.algorithm, Algorithm::Vendor);
    EXPECT_EQ(r.precision, Precision::Strict);
    EXPECT_EQ(r.gemm, Gemm::HostBlas);
    EXPECT_EQ(r.note.find("no path computes it here") != std::string::npos,
              floor != Precision::Strict)
        << r.note;
  }
  const Facts native = host_facts(Gemm::KokkosKernelsNative, Impl::HostBlas::Unknown);
  EXPECT_EQ(Impl::resolve_gradient_product(gradient_request(Algorithm::Vendor, Precision::Strict),
                                           Shape{4, 4, 4}, true, false, native, fn)
                .gemm,
            Gemm::KokkosKernelsNative);
}

TEST(DispatchGradient, RefusesWhatNoPathComputes) {
  const Facts host = host_facts(Gemm::HostBlas, Impl::HostBlas::Optimized);
  const auto refusal = [&](Algorithm a, Precision p, const Facts& f, bool lt3x) {
    try {
      Impl::resolve_gradient_product(gradient_request(a, p), Shape{8, 8, 8}, true, lt3x, f, fn);
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(fn, 0), 0u) << e.what();
      return std::string(e.what());
    }
    return std::string("not refused");
  };
  EXPECT_NE(refusal(Algorithm::Fused, Precision::Strict, host, false).find("not on fused"),
            std::string::npos);
  EXPECT_NE(refusal(Algorithm::FusedSm90, Precision::Strict, hopper(), true).find("3xtf32"),
            std::string::npos);
  // The sm_90a kernel where it cannot run: the reason is named.
  EXPECT_NE(refusal(Algorithm::FusedSm90, Precision::TF32x3, other_gpu(), true).find(not_hopper),
            std::string::npos);
  EXPECT_NE(refusal(Algorithm::Vendor, Precision::TF32, host, false).find("only on CUDA"),
            std::string::npos);
  EXPECT_NE(refusal(Algorithm::VendorLt, Precision::Strict, hopper(), true).find("3xtf32"),
            std::string::npos);
  // 3xTF32 needs cuBLASLt's row-major contiguous Views (lt3x), and float.
  EXPECT_NE(refusal(Algorithm::Vendor, Precision::TF32x3, hopper(), false).find("only on CUDA"),
            std::string::npos);
  EXPECT_NE(refusal(Algorithm::Auto, Precision::TF32, double_views_on_hopper(), false)
                .find("float Views only"),
            std::string::npos);
}

TEST(DispatchGradient, GpuFloorPicksByTheCostModel) {
  const Facts f = hopper();
  const auto resolve = [&](Precision floor, const Shape& s, bool lt3x) {
    return Impl::resolve_gradient_product(gradient_request(Algorithm::Auto, floor), s, true, lt3x,
                                          f, fn);
  };
  // The reference shape's products, 3xTF32 floor: the sm_90a kernel, cuBLASLt's 3xTF32 where
  // it cannot run; a few rows: strict.
  for (const Shape& s : {Shape{1024, 8192, 8192}, Shape{8192, 1024, 8192}}) {
    const FusedLinear::RunInfo r = resolve(Precision::TF32x3, s, true);
    EXPECT_EQ(r.algorithm, Algorithm::FusedSm90);
    EXPECT_EQ(r.precision, Precision::TF32x3);
    EXPECT_EQ(r.gemm, Gemm::Sm90Tf32x3Kernel);
    EXPECT_TRUE(r.note.empty()) << r.note;
    const FusedLinear::RunInfo lt = Impl::resolve_gradient_product(
        gradient_request(Algorithm::Auto, Precision::TF32x3), s, true, true, other_gpu(), fn);
    EXPECT_EQ(lt.algorithm, Algorithm::VendorLt);
    EXPECT_EQ(lt.gemm, Gemm::CublasLt);
  }
  const FusedLinear::RunInfo few = resolve(Precision::TF32x3, Shape{4, 8192, 8192}, true);
  EXPECT_EQ(few.precision, Precision::Strict);
  EXPECT_NE(few.note.find("strict fp32 (vendor) is at least as accurate"), std::string::npos);
  // Without cuBLASLt's Views (nor the sm_90a kernel's: the same Views) only strict meets a
  // 3xTF32 floor; TF32 takes cuBLAS's TF32.
  EXPECT_EQ(Impl::resolve_gradient_product(gradient_request(Algorithm::Auto, Precision::TF32x3),
                                           Shape{1024, 8192, 8192}, true, false, other_gpu(), fn)
                .precision,
            Precision::Strict);
  EXPECT_EQ(resolve(Precision::TF32, Shape{1024, 8192, 8192}, true).precision, Precision::TF32);
  EXPECT_EQ(resolve(Precision::Strict, Shape{1024, 8192, 8192}, true).algorithm, Algorithm::Vendor);
  // No product to run: the path is named, no GEMM runs.
  const FusedLinear::RunInfo none = Impl::resolve_gradient_product(
      gradient_request(Algorithm::Auto, Precision::Strict), Shape{0, 8, 8}, false, true, f, fn);
  EXPECT_EQ(none.gemm, Gemm::None);
  EXPECT_FALSE(none.vendor_blas);
}

}  // namespace
