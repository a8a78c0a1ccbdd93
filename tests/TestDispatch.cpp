// SPDX-License-Identifier: Apache-2.0
// The dispatch, without a GPU: Impl::resolve for every Algorithm x Precision under hand-made
// Facts for each kind of build and device (host with an optimised, the reference or no BLAS TPL;
// CUDA on a Hopper GPU, on another GPU, without cuBLASLt; HIP with rocBLAS or without; double
// Views), the auto rule's thresholds at their boundaries, empty shapes; then the facts the
// library gathers for real Views of this build, the host BLAS classification and the rule that
// decides "host" by the execution space.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "FusedLinear/impl/cuda/Sm90Splits.hpp"
#include "support/Common.hpp"
#include "support/Serves.hpp"

namespace {

using namespace FusedLinearTest;
using Impl::Backend;
using Impl::Decision;
using Impl::Facts;
using Impl::Request;
using Impl::Shape;
using Rule = Impl::GpuRule;
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

const Shape large{1024, 1024, 1024};  // M, K, N: no skinny rule applies; K above short_k
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
  expect_table("host, optimised BLAS", f, Shape{64, 4096, 4096}, host_table(G::HostBlas, A::Fused));
  expect_table("host, optimised BLAS", f, Shape{4096, 64, 4096}, host_table(G::HostBlas, A::Fused));
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

// An optimised BLAS whose kernels fit the CPU takes long-K products of many rows where the
// model picks fused; other BLAS never.
TEST(Dispatch, HostVendorBoundaries) {
  const Facts opt = host_facts(G::HostBlas, Impl::HostBlas::Optimized);
  const Facts generic = host_facts(G::HostBlas, Impl::HostBlas::Generic);
  const std::int64_t rows = HostRule::vendor_rows, k = HostRule::vendor_k;
  const struct {
    Shape shape;
    Algorithm optimised, other;
  } cases[] = {
      {{rows, k, 512}, A::Vendor, A::Fused},
      {{rows - 1, k, 512}, A::Fused, A::Fused},
      {{rows, k - 1, 512}, A::Fused, A::Fused},
      {{4096, k, 4096}, A::Vendor, A::Fused},
      {{1, 8192, 8192}, A::FusedSkinny, A::FusedSkinny},
  };
  for (const auto& c : cases) {
    const std::string s = std::to_string(c.shape.M) + "x" + std::to_string(c.shape.K) + "x" +
                          std::to_string(c.shape.N);
    EXPECT_EQ(Impl::strict_auto(c.shape, opt), c.optimised) << s;
    EXPECT_EQ(Impl::strict_auto(c.shape, generic), c.other) << s;
  }
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
  // TF32's floor ends at tf32_floor_rows (the TF32 product is the faster past it), 3xtf32's
  // goes on as far as the strict rule takes a few-rows kernel; below tf32x3_min_work
  // multiply-adds 3xtf32 runs strict.
  const Shape tf32_last{Rule::tf32_floor_rows, 8192, 8192};
  const Shape tf32_past{Rule::tf32_floor_rows + 1, 8192, 8192};
  expect_case("Hopper", hopper(), tf32_last,
              {A::Auto, T, ran(A::SkinnySm90, S, G::Sm90SkinnyKernel, false, false, "a floor")});
  expect_case("Hopper", hopper(), tf32_past,
              {A::Auto, T, ran(A::VendorLt, T, G::CublasLt, true, true)});
  expect_case("Hopper", hopper(), tf32_past,
              {A::Auto, X3, ran(A::SkinnySm90, S, G::Sm90SkinnyKernel, false, false, "a floor")});
  expect_case("Hopper", hopper(), Shape{128, 4096, 1024},
              {A::Auto, X3, ran(A::VendorLt, S, G::CublasLt, true, true, "a floor")});
  expect_case("Hopper", hopper(), Shape{128, 4096, 1024},
              {A::Auto, T, ran(A::VendorLt, T, G::CublasLt, true, true)});
  // Explicit requests keep their meaning at few rows.
  expect_case("Hopper", hopper(), few_rows,
              {A::FusedSm90, X3, ran(A::FusedSm90, X3, G::Sm90Tf32x3Kernel, false)});
  expect_case("Hopper", hopper(), few_rows,
              {A::VendorLt, T, ran(A::VendorLt, T, G::CublasLt, true, true)});
}

// 3xtf32 under auto (Impl::tf32x3_slower): strict fp32 below each of the criteria's bounds,
// fused_sm90 at them; each pair differs in one extent.
TEST(Dispatch, Tf32x3FloorBoundaries) {
  const std::int64_t t = Rule::tf32x3_tile;
  const std::int64_t few_tiles_n = (Rule::tf32x3_min_tiles - 1) * t;
  const std::int64_t half_n = std::int64_t(Rule::tf32x3_min_n_use * double(t));
  const std::int64_t rows = Rule::tf32x3_padded_min_rows;
  const struct {
    Shape shape;
    bool strict;
  } cases[] = {
      {{64, 1023, 4096}, true},  // below tf32x3_min_work
      {{64, 1024, 4096}, false},
      {{128, 4096, few_tiles_n}, true},  // fewer than tf32x3_min_tiles on a mid-size product
      {{128, 4096, few_tiles_n + t}, false},
      {{128, 32768, few_tiles_n}, false},  // few tiles, but past tf32x3_few_tiles_work
      {{4096, 4096, half_n - 1}, true},    // N less than half its tile
      {{4096, 4096, half_n}, false},
      {{rows - 1, 8190, 8192}, true},  // W rows not 16-byte aligned on few rows
      {{rows, 8190, 8192}, false},
      {{rows - 1, 8192, 8192}, false},
      {{4096, Rule::tf32x3_min_k, 4096}, true},  // the shortest K
      {{4096, Rule::tf32x3_min_k + 4, 4096}, false},
  };
  static_assert(std::int64_t(64) * 1024 * 4096 == Rule::tf32x3_min_work, "");
  static_assert(std::int64_t(128) * 4096 * 2560 < Rule::tf32x3_few_tiles_work &&
                    std::int64_t(128) * 32768 * 2432 >= Rule::tf32x3_few_tiles_work,
                "");
  for (const auto& c : cases) {
    const std::string s = std::to_string(c.shape.M) + "x" + std::to_string(c.shape.K) + "x" +
                          std::to_string(c.shape.N);
    EXPECT_EQ(Impl::tf32x3_slower(c.shape), c.strict) << s;
    const Impl::Decision d = Impl::resolve({A::Auto, X3, false}, c.shape, hopper(), fn);
    EXPECT_EQ(d.algorithm, c.strict ? Impl::strict_auto(c.shape, hopper()) : A::FusedSm90) << s;
    EXPECT_EQ(d.precision, c.strict ? S : X3) << s;
  }
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
                 {A::Auto, X3, ran(A::VendorLt, X3, G::CublasLt, true, true)},
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

// Auto's GPU thresholds (Impl::GpuRule) at their boundaries: each constant is the last value
// the rule takes, one more is past it.
TEST(Dispatch, GpuRuleBoundaries) {
  const std::int64_t few_k = 8192;
  struct Boundary {
    Shape shape;
    Algorithm other_gpu, hopper, without_lt, hip_native;
  };
  const std::int64_t wide_k = 8192, wide_n = Rule::sm90_skinny_wide_n;
  const std::int64_t wide_w_k = Rule::sm90_skinny_wide_w / wide_n;  // K where N K reaches the bound
  // The sm_90a kernel's small W (N at the N K bound for the longest short K) and few tiles (the
  // most 128-column tiles whose 8 CTAs each stay under a quarter of 132 multiprocessors).
  const std::int64_t small_w_n = Rule::sm90_skinny_min_w / Rule::sm90_skinny_min_k;
  const std::int64_t few_tiles_n = (132 / 4 - 1) / 8 * Rule::sm90_skinny_tile;
  // Small products: K at the work bound for 1024 x 64 outputs; N at the outputs bound for K 128.
  const std::int64_t small_k = Rule::small_work / (1024 * 64);
  const std::int64_t outputs_n = Rule::small_outputs / 1024;
  const std::int64_t few_outputs_k = Rule::few_outputs_work / (64 * 128);
  const std::int64_t short_k_n = Rule::small_work_many_outputs / 1024;
  // Short K: N giving 1024 rows short_k_min_tiles tiles.
  const std::int64_t tiles_n =
      Rule::short_k_min_tiles / (1024 / Rule::short_k_tile) * Rule::short_k_tile;
  const Boundary cases[] = {
      // Few rows: the portable skinny kernel up to skinny_rows; on Hopper the sm_90a one up to
      // sm90_skinny_rows rows of any layer, and up to sm90_skinny_wide_rows where W is large (N
      // at least sm90_skinny_wide_n, N K at least sm90_skinny_wide_w).
      {{Rule::skinny_rows, few_k, few_k},
       A::FusedSkinny,
       A::SkinnySm90,
       A::FusedSkinny,
       A::FusedSkinny},
      {{Rule::skinny_rows + 1, few_k, few_k}, A::VendorLt, A::SkinnySm90, A::Vendor, A::Fused},
      {{Rule::sm90_skinny_wide_rows, wide_k, wide_n},
       A::VendorLt,
       A::SkinnySm90,
       A::Vendor,
       A::Fused},
      {{Rule::sm90_skinny_wide_rows + 1, wide_k, wide_n},
       A::VendorLt,
       A::VendorLt,
       A::Vendor,
       A::Fused},
      {{Rule::sm90_skinny_wide_rows, wide_k, wide_n - 1},
       A::VendorLt,
       A::VendorLt,
       A::Vendor,
       A::Fused},
      {{Rule::sm90_skinny_wide_rows, wide_w_k, wide_n},
       A::FusedSkinny,
       A::SkinnySm90,
       A::FusedSkinny,
       A::FusedSkinny},
      {{Rule::sm90_skinny_wide_rows, wide_w_k - 4, wide_n},
       A::FusedSkinny,
       A::FusedSkinny,
       A::FusedSkinny,
       A::FusedSkinny},
      // Shapes of the held-out study either side of the W bound: 25 x 1432 x 2837 (N K 4.06e6)
      // was 32% behind under fused_skinny; 24 x 768 x 3072 (N K 2.36e6) is fastest there.
      {{25, 1432, 2837}, A::FusedSkinny, A::SkinnySm90, A::FusedSkinny, A::FusedSkinny},
      {{24, 768, 3072}, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny},
      {{Rule::sm90_skinny_rows, 4 * wide_k, 4096},
       A::FusedSkinny,
       A::SkinnySm90,
       A::FusedSkinny,
       A::FusedSkinny},
      // ... but not on a small W of short rows (K at most sm90_skinny_min_k, N K at most
      // sm90_skinny_min_w): 10 x 68 x 3634 of the held-out study, fused_skinny 11% ahead.
      {{Rule::skinny_rows, 64, 64}, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny},
      {{Rule::skinny_rows, Rule::sm90_skinny_min_k, small_w_n},
       A::FusedSkinny,
       A::FusedSkinny,
       A::FusedSkinny,
       A::FusedSkinny},
      {{Rule::skinny_rows, Rule::sm90_skinny_min_k + 4, small_w_n - 16},
       A::FusedSkinny,
       A::SkinnySm90,
       A::FusedSkinny,
       A::FusedSkinny},
      {{Rule::skinny_rows, Rule::sm90_skinny_min_k, small_w_n + 1},
       A::FusedSkinny,
       A::SkinnySm90,
       A::FusedSkinny,
       A::FusedSkinny},
      {{10, 68, 3634}, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny},
      // ... nor on few tiles along a long K (CTAs, 8 per tile, under a quarter of the 132
      // multiprocessors; K past sm90_skinny_long_k): 13 x 12620 x 62, fused_skinny 1.7x ahead;
      // at 5 x 3148 x 96 skinny_sm90 is (0.016 ms against 0.025).
      {{Rule::skinny_rows, Rule::sm90_skinny_long_k + 4, few_tiles_n},
       A::FusedSkinny,
       A::FusedSkinny,
       A::FusedSkinny,
       A::FusedSkinny},
      {{Rule::skinny_rows, Rule::sm90_skinny_long_k, few_tiles_n},
       A::FusedSkinny,
       A::SkinnySm90,
       A::FusedSkinny,
       A::FusedSkinny},
      {{Rule::skinny_rows, Rule::sm90_skinny_long_k + 4, few_tiles_n + 1},
       A::FusedSkinny,
       A::SkinnySm90,
       A::FusedSkinny,
       A::FusedSkinny},
      {{13, 12620, 62}, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny},
      {{5, 3148, 96}, A::FusedSkinny, A::SkinnySm90, A::FusedSkinny, A::FusedSkinny},
      // Small products with few outputs: up to small_work multiply-adds and small_outputs.
      {{1024, small_k, 64}, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny},
      {{1024, small_k + 1, 64}, A::VendorLt, A::VendorLt, A::Vendor, A::Fused},
      {{1024, 128, outputs_n}, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny},
      {{1024, 128, outputs_n + 1}, A::Fused, A::Fused, A::Fused, A::Fused},
      // ... except the fused kernel at K up to small_work_short_k on at least
      // small_work_many_outputs outputs: 15651 x 16 x 55 of the held-out study, fused_skinny
      // 2.7x behind; 192 x 18 x 285 (fewer outputs) stays, 1.4x ahead.
      {{1024, Rule::small_work_short_k, short_k_n}, A::Fused, A::Fused, A::Fused, A::Fused},
      {{1024, Rule::small_work_short_k + 1, short_k_n},
       A::FusedSkinny,
       A::FusedSkinny,
       A::FusedSkinny,
       A::FusedSkinny},
      {{1024, Rule::small_work_short_k, short_k_n - 1},
       A::FusedSkinny,
       A::FusedSkinny,
       A::FusedSkinny,
       A::FusedSkinny},
      {{15651, 16, 55}, A::Fused, A::Fused, A::Fused, A::Fused},
      {{192, 18, 285}, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny},
      // ... and up to few_outputs_work where the outputs are at most few_outputs.
      {{64, few_outputs_k, 128}, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny, A::FusedSkinny},
      {{64, few_outputs_k + 1, 128}, A::VendorLt, A::VendorLt, A::Vendor, A::Fused},
      {{64, few_outputs_k / 2, 129}, A::VendorLt, A::VendorLt, A::Vendor, A::Fused},
      // Short K: the fused kernel up to short_k, on at least short_k_min_tiles tiles.
      {{1024, Rule::short_k, 4096}, A::Fused, A::Fused, A::Fused, A::Fused},
      {{1024, Rule::short_k + 1, 4096}, A::VendorLt, A::VendorLt, A::Vendor, A::Fused},
      {{1024, Rule::short_k, tiles_n}, A::Fused, A::Fused, A::Fused, A::Fused},
      {{1024, Rule::short_k, tiles_n - Rule::short_k_tile},
       A::VendorLt,
       A::VendorLt,
       A::Vendor,
       A::Fused},
  };
  static_assert(
      Rule::sm90_skinny_rows == Rule::skinny_rows &&
          Rule::skinny_rows < Rule::sm90_skinny_wide_rows &&
          wide_w_k * wide_n == Rule::sm90_skinny_wide_w && wide_w_k < wide_k &&
          Rule::sm90_skinny_wide_rows * wide_w_k * wide_n <= Rule::small_work &&
          std::int64_t(1024) * small_k * 64 == Rule::small_work &&
          1024 * outputs_n == Rule::small_outputs && 64 * 128 == Rule::few_outputs &&
          64 * few_outputs_k * 128 == Rule::few_outputs_work &&
          std::int64_t(64) * (few_outputs_k / 2) * 129 > Rule::small_work &&
          std::int64_t(1024) * 128 * outputs_n <= Rule::small_work && 128 <= Rule::short_k &&
          small_k > Rule::short_k && 1024 * short_k_n == Rule::small_work_many_outputs &&
          1024 * (Rule::small_work_short_k + 1) * short_k_n <= Rule::small_work &&
          std::int64_t(1024) * Rule::short_k * (tiles_n - Rule::short_k_tile) > Rule::small_work &&
          Rule::short_k_min_tiles % (1024 / Rule::short_k_tile) == 0 &&
          Rule::sm90_skinny_min_k < few_k &&
          small_w_n * Rule::sm90_skinny_min_k == Rule::sm90_skinny_min_w && few_tiles_n == 512 &&
          Rule::sm90_skinny_long_k < few_k,
      "the boundaries above are probed in this order");
  for (const Boundary& b : cases) {
    const std::string s = std::to_string(b.shape.M) + "x" + std::to_string(b.shape.K) + "x" +
                          std::to_string(b.shape.N);
    EXPECT_EQ(Impl::strict_auto(b.shape, other_gpu()), b.other_gpu) << s;
    EXPECT_EQ(Impl::strict_auto(b.shape, hopper()), b.hopper) << s;
    EXPECT_EQ(Impl::strict_auto(b.shape, cuda_without_lt()), b.without_lt) << s;
    EXPECT_EQ(Impl::strict_auto(b.shape, hip_facts(G::KokkosKernelsNative)), b.hip_native) << s;
    // And through resolve, the same path.
    const Request automatic{A::Auto, S, false};
    EXPECT_EQ(Impl::resolve(automatic, b.shape, other_gpu(), fn).algorithm, b.other_gpu) << s;
  }
}

// One row whose W fused_skinny must read element by element (rows not in 16-byte packs): cuBLASLt
// (its matrix-vector kernel) from unpacked_gemv_n outputs, unpacked_gemv_k long rows and
// unpacked_gemv_w elements of W.
TEST(Dispatch, OneUnpackedRowBoundaries) {
  Facts unpacked = other_gpu();
  unpacked.skinny_packed = false;
  Facts unpacked_without_lt = cuda_without_lt();
  unpacked_without_lt.skinny_packed = false;
  constexpr std::int64_t n = Rule::unpacked_gemv_n, k = Rule::unpacked_gemv_w / n;
  const struct {
    Shape shape;
    Algorithm unpacked;
  } cases[] = {
      {{1, k, n}, A::VendorLt},
      {{1, k - 1, n}, A::FusedSkinny},      // W below unpacked_gemv_w
      {{1, 2 * k, n - 1}, A::FusedSkinny},  // fewer than unpacked_gemv_n outputs
      {{2, k, n}, A::FusedSkinny},          // more than one row
      {{1, Rule::unpacked_gemv_k, 1024}, A::VendorLt},
      {{1, Rule::unpacked_gemv_k - 1, 1024}, A::FusedSkinny},  // rows shorter than unpacked_gemv_k
      {{1, 387, 6642}, A::FusedSkinny},  // seed 33: fused_skinny 0.0132 ms, vendor_lt 0.0171
  };
  static_assert(Rule::unpacked_gemv_w % Rule::unpacked_gemv_n == 0 && k >= Rule::unpacked_gemv_k &&
                    (Rule::unpacked_gemv_k - 1) * 1024 >= Rule::unpacked_gemv_w &&
                    387 * 6642 >= Rule::unpacked_gemv_w,
                "");
  for (const auto& c : cases) {
    const std::string s = std::to_string(c.shape.M) + "x" + std::to_string(c.shape.K) + "x" +
                          std::to_string(c.shape.N);
    EXPECT_EQ(Impl::strict_auto(c.shape, unpacked), c.unpacked) << s;
    EXPECT_EQ(Impl::strict_auto(c.shape, other_gpu()), A::FusedSkinny) << s;  // packed rows
    EXPECT_EQ(Impl::strict_auto(c.shape, unpacked_without_lt), A::FusedSkinny) << s;
    EXPECT_EQ(Impl::resolve({A::Auto, S, false}, c.shape, unpacked, fn).algorithm, c.unpacked) << s;
  }
}

// Empty shapes: M = 0 or N = 0 write nothing, K = 0 gives LeakyReLU(multiplier * b): no GEMM
// runs (gemm none), and the note says why. The request is still checked as usual.
TEST(Dispatch, EmptyShapes) {
  const Facts facts[] = {host_facts(G::HostBlas, Impl::HostBlas::Reference), hopper(), other_gpu(),
                         cuda_without_lt()};
  const std::pair<Shape, const char*> shapes[] = {{{0, 64, 64}, "empty output (M or N is 0)"},
                                                  {{64, 64, 0}, "empty output (M or N is 0)"},
                                                  {{0, 0, 0}, "empty output (M or N is 0)"},
                                                  {{64, 0, 64}, "K is 0"}};
  int vendor_flags_set = 0;
  std::string first_flagged;
  for (const Facts& f : facts)
    for (const auto& s : shapes)
      for (Algorithm a : all_algorithms)
        for (Precision p : all_precisions) {
          const std::string what = std::string(FusedLinear::to_string(a)) + "/" +
                                   FusedLinear::to_string(p) + " at " + std::to_string(s.first.M) +
                                   "x" + std::to_string(s.first.K) + "x" +
                                   std::to_string(s.first.N);
          // The same request with the empty extents made 1: served exactly when that one is.
          const Shape filled{std::max<std::int64_t>(s.first.M, 1),
                             std::max<std::int64_t>(s.first.K, 1),
                             std::max<std::int64_t>(s.first.N, 1)};
          bool full_refused = false;
          try {
            Impl::resolve({a, p, false}, filled, f, fn);
          } catch (const std::invalid_argument&) {
            full_refused = true;
          }
          try {
            const Decision d = Impl::resolve({a, p, false}, s.first, f, fn);
            EXPECT_FALSE(full_refused) << what << ": an empty shape must not change what is served";
            EXPECT_EQ(d.gemm, G::None) << what;
            EXPECT_TRUE(contains(d.note, s.second)) << what << ": " << d.note;
            if (d.vendor_blas || d.bias_in_gemm) {
              if (vendor_flags_set++ == 0) first_flagged = what;
            }
          } catch (const std::invalid_argument& e) {
            EXPECT_TRUE(full_refused) << what << ": " << e.what();
          }
        }
  // No product runs for an empty shape: no BLAS (RunInfo::vendor_blas: "True when a vendor path
  // runs on a vendor BLAS"), no bias through one. (resolve() left both as the vendor path set
  // them until the empty-shape branch cleared them.)
  EXPECT_EQ(vendor_flags_set, 0) << "decisions with gemm none but vendor_blas or bias_in_gemm "
                                    "set, first: "
                                 << first_flagged;
}

// The few-rows Hopper kernel's K split, on an H200's cluster capacities (cudaOccupancy-
// MaxActiveClusters for 1..8 CTAs): the split whose waves of co-resident clusters leave each CTA
// the least K. 32 tiles of 128 columns do not fit as 32 clusters of 4 (30 do): 3 CTAs per tile
// then beat 4 (measured: 16x8192x4096 0.057 ms against 0.081) and 2.
TEST(Sm90Splits, FillWavesOfCoResidentClusters) {
  const int h200[Impl::Sm90::max_splits] = {132, 66, 39, 30, 22, 17, 15, 15};
  const int unknown[Impl::Sm90::max_splits] = {};
  const auto splits = [&](std::int64_t tiles, std::int64_t K,
                          const int(&clusters)[Impl::Sm90::max_splits]) {
    return Impl::Sm90::choose_splits(tiles, (K + 31) / 32, 132, clusters);
  };
  EXPECT_EQ(splits(32, 8192, h200), 3);    // N = 4096
  EXPECT_EQ(splits(24, 8192, h200), 4);    // N = 3072: 24 clusters of 4 fit; 8 ties, loses
  EXPECT_EQ(splits(48, 8192, h200), 2);    // N = 6144: 96 CTAs in one wave
  EXPECT_EQ(splits(64, 8192, h200), 2);    // N = 8192
  EXPECT_EQ(splits(16, 8192, h200), 6);    // N = 2048: 16 clusters of 6 fit, of 7 or 8 do not
  EXPECT_EQ(splits(8, 65536, h200), 8);    // N = 1024, long K: the most a cluster takes
  EXPECT_EQ(splits(23, 1432, h200), 4);    // 45 k-blocks: 5 would need two waves of 22
  EXPECT_EQ(splits(1000, 8192, h200), 1);  // tiles enough for every multiprocessor
  EXPECT_EQ(splits(32, 200, h200), 1);     // 7 k-blocks: no range under 8
  EXPECT_EQ(splits(32, 512, h200), 2);     // 16 k-blocks: ranges of 8 at most 2 ways
  // Unknown capacities count multiprocessors / S: 33 clusters of 4 for 32 tiles.
  EXPECT_EQ(splits(32, 8192, unknown), 4);
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

// ------------------------------------------------------------------ the host BLAS

TEST(HostBlas, ClassifiesTypicalLibraries) {
  using Impl::HostBlas;
  const std::pair<const char*, HostBlas> paths[] = {
      {"/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", HostBlas::Optimized},
      {"/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3", HostBlas::Optimized},
      {"/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3", HostBlas::Optimized},
      {"/usr/lib/x86_64-linux-gnu/blis-pthread/libblas.so.3", HostBlas::Optimized},
      {"/usr/lib/x86_64-linux-gnu/atlas/libblas.so.3", HostBlas::Optimized},
      {"/opt/intel/oneapi/mkl/2024.0/lib/libmkl_rt.so.2", HostBlas::Optimized},
      {"libmkl_rt.so", HostBlas::Optimized},
      {"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", HostBlas::Reference},
      {"/usr/lib/aarch64-linux-gnu/blas/libblas.so.3.11.0", HostBlas::Reference},
      // The alternatives link itself, unresolved, says nothing; nor does an unknown library.
      {"/usr/lib/x86_64-linux-gnu/libblas.so.3", HostBlas::Unknown},
      {"/home/user/lib/libmyblas.so", HostBlas::Unknown},
      {"", HostBlas::Unknown},
  };
  for (const auto& p : paths)
    EXPECT_EQ(int(Impl::classify_blas_library(p.first)), int(p.second)) << "'" << p.first << "'";
  // An optimised library whose kernels use less of the vector units than the CPU has (an
  // OpenBLAS that does not know the CPU runs its oldest kernels) is Generic.
  EXPECT_EQ(Impl::openblas_core_level("Prescott"), 0);
  EXPECT_EQ(Impl::openblas_core_level("Haswell"), 2);
  EXPECT_EQ(Impl::openblas_core_level("SkylakeX"), 3);
  EXPECT_EQ(Impl::openblas_core_level("NeoverseN1"), -1);
  const std::string openblas = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3";
  const std::string blis = "/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3";
  const std::string reference = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";
  EXPECT_EQ(int(Impl::classify_blas(openblas, "Prescott", 3)), int(HostBlas::Generic));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "Haswell", 3)), int(HostBlas::Generic));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "Haswell", 2)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "SkylakeX", 3)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "", 3)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "NeoverseN1", 3)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "Prescott", -1)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas(reference, "Prescott", 3)), int(HostBlas::Reference));
  // BLIS does not say which kernels it runs; on AVX-512 CPUs it ran its AVX2 ones.
  EXPECT_EQ(int(Impl::classify_blas(blis, "", 3)), int(HostBlas::Generic));
  EXPECT_EQ(int(Impl::classify_blas(blis, "", 2)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas("", "", 3)), int(HostBlas::Unknown));
  // The process's own: whatever provides sgemm_, classified once.
  const std::string path = Impl::blas_library_path();
  EXPECT_EQ(int(Impl::host_blas_kind()),
            int(Impl::classify_blas(path, Impl::blas_kernels(path), Impl::cpu_vector_level())));
  std::printf("[ info     ] sgemm_ from '%s', kernels '%s', CPU vector level %d, kind %d\n",
              path.c_str(), Impl::blas_kernels(path).c_str(), Impl::cpu_vector_level(),
              int(Impl::host_blas_kind()));
}

// ------------------------------------------------------------------ execution spaces

// "Host" is decided by the execution space type, never by whether the host can reach the memory:
// CUDA with UVM (or HIP on an APU) is a GPU all the same.
TEST(ExecutionSpaces, HostIsDecidedByTheExecutionSpace) {
  int checked = 0;
#if defined(KOKKOS_ENABLE_SERIAL)
  EXPECT_TRUE(Impl::is_host_space<Kokkos::Serial>());
  EXPECT_EQ(Impl::ExecutionSpaceTraits<Kokkos::Serial>::lanes, 1);
  EXPECT_EQ(int(Impl::backend_of<Kokkos::Serial>()), int(Backend::Host));
  ++checked;
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  EXPECT_TRUE(Impl::is_host_space<Kokkos::OpenMP>());
  EXPECT_EQ(int(Impl::backend_of<Kokkos::OpenMP>()), int(Backend::Host));
  ++checked;
#endif
#if defined(KOKKOS_ENABLE_THREADS)
  EXPECT_TRUE(Impl::is_host_space<Kokkos::Threads>());
  EXPECT_EQ(int(Impl::backend_of<Kokkos::Threads>()), int(Backend::Host));
  ++checked;
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  EXPECT_FALSE(Impl::is_host_space<Kokkos::Cuda>());
  EXPECT_EQ(Impl::ExecutionSpaceTraits<Kokkos::Cuda>::lanes, 32);
  EXPECT_EQ(int(Impl::backend_of<Kokkos::Cuda>()), int(Backend::Cuda));
  // UVM memory is accessible from the host, yet its execution space is the GPU's.
  static_assert(Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::CudaUVMSpace>::accessible,
                "");
  using UvmDevice = Kokkos::Device<Kokkos::Cuda, Kokkos::CudaUVMSpace>;
  using PinnedDevice = Kokkos::Device<Kokkos::Cuda, Kokkos::CudaHostPinnedSpace>;
  EXPECT_FALSE(Impl::is_host_space<UvmDevice::execution_space>());
  EXPECT_FALSE(Impl::is_host_space<PinnedDevice::execution_space>());
  EXPECT_FALSE(Impl::is_host_space<Kokkos::CudaUVMSpace::execution_space>());
  ++checked;
#endif
  EXPECT_EQ(Impl::is_host_space<Kokkos::DefaultHostExecutionSpace>(), true);
  EXPECT_GT(checked, 0);
}

// The facts of this build for real Views (through the library's canonical Views), as a plan
// gathers them: which BLAS Kokkos Kernels calls (its own gemm_tpl_spec_avail decides), whether
// cuBLASLt and the sm_90a kernels are in the build.
TEST(ExecutionSpaces, FactsOfThisBuild) {
  using Right = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>;
  using Left = Kokkos::View<float**, Kokkos::LayoutLeft, MemorySpace>;
  using Vector = Kokkos::View<float*, MemorySpace>;
  Right X("X", 4, 8), W("W", 3, 8), Y("Y", 4, 3);
  Left W_left("W", 3, 8);
  Vector b("b", 3);
  const Facts same = facts_of(ExecSpace(), X, W, b, Y);
  const Facts mixed = facts_of(ExecSpace(), X, W_left, b, Y);
  // A column-offset subview of a wider View is still LayoutRight (padded rows): the BLAS takes
  // it; a View of LayoutStride is not.
  auto padded = Kokkos::subview(Right("wide", 4, 11), Kokkos::ALL, std::make_pair(1, 9));
  static_assert(std::is_same<decltype(padded)::array_layout, Kokkos::LayoutRight>::value, "");
  EXPECT_EQ(facts_of(ExecSpace(), padded, W, b, Y).blas, same.blas);
  const Kokkos::View<float**, Kokkos::LayoutStride, MemorySpace> strided = padded;
  const Facts stride = facts_of(ExecSpace(), strided, W, b, Y);
  EXPECT_TRUE(same.float_views);
  EXPECT_EQ(mixed.blas, Gemm::KokkosKernelsNative) << "mixed layouts: Kokkos Kernels' own gemm";
  EXPECT_EQ(stride.blas, Gemm::KokkosKernelsNative) << "LayoutStride: Kokkos Kernels' own gemm";
  EXPECT_FALSE(mixed.cublaslt);
  EXPECT_FALSE(stride.cublaslt);
  if (Impl::is_host_space<ExecSpace>()) {
    EXPECT_EQ(int(same.backend), int(Backend::Host));
    EXPECT_EQ(same.multiprocessors, 0);
    EXPECT_EQ(same.host_threads, ExecSpace().concurrency());
    EXPECT_EQ(same.host_tiling.mr, Impl::HostFusedTiles<float>::mr);
    EXPECT_EQ(same.host_tiling.skinny_rows, Impl::HostSkinnyTiles<float>::rows);
    EXPECT_EQ(same.host_tiling.scalar_bytes, 4);
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
    EXPECT_EQ(same.blas, Gemm::HostBlas);
    EXPECT_EQ(int(same.host_blas), int(Impl::host_blas_kind()));
#else
    EXPECT_EQ(same.blas, Gemm::KokkosKernelsNative);
#endif
    EXPECT_FALSE(same.cublaslt);
  }
#if defined(KOKKOS_ENABLE_CUDA)
  EXPECT_EQ(int(same.backend), int(Backend::Cuda));
  EXPECT_GT(same.multiprocessors, 0);
#if defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
  EXPECT_EQ(same.blas, Gemm::Cublas);
#endif
#if defined(FUSED_LINEAR_CUBLASLT)
  EXPECT_TRUE(same.cublaslt);
  EXPECT_TRUE(same.cublaslt_bias);
  // UVM Views: still CUDA, cuBLASLt still serves them.
  Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::CudaUVMSpace> Xu("X", 4, 8), Wu("W", 3, 8),
      Yu("Y", 4, 3);
  Kokkos::View<float*, Kokkos::CudaUVMSpace> bu("b", 3);
  const Facts uvm = facts_of(Kokkos::Cuda(), Xu, Wu, bu, Yu);
  EXPECT_EQ(int(uvm.backend), int(Backend::Cuda));
  EXPECT_TRUE(uvm.cublaslt);
#else
  EXPECT_FALSE(same.cublaslt);
#endif
#endif
#if !defined(FUSED_LINEAR_SM90A)
  EXPECT_TRUE(contains(same.sm90_tf32x3, "is not in this build"));
  EXPECT_TRUE(contains(same.sm90_skinny, "is not in this build"));
#endif
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> Xd("X", 4, 8), Wd("W", 3, 8),
      Yd("Y", 4, 3);
  Kokkos::View<double*, MemorySpace> bd("b", 3);
  EXPECT_FALSE(facts_of(ExecSpace(), Xd, Wd, bd, Yd).float_views);
  if (Impl::is_host_space<ExecSpace>()) {
    EXPECT_EQ(facts_of(ExecSpace(), Xd, Wd, bd, Yd).host_tiling.scalar_bytes, 8);
    EXPECT_EQ(facts_of(ExecSpace(), Xd, Wd, bd, Yd).host_tiling.lanes,
              Impl::HostFusedTiles<double>::lanes);
  }
  EXPECT_NE(facts_of(ExecSpace(), Xd, Wd, bd, Yd).sm90_tf32x3, nullptr);
}

// What Kokkos Kernels' gemm runs, asked at compile time with the canonical View types.
TEST(ExecutionSpaces, KokkosBlasGemmAvailability) {
  using E = ExecSpace;
  using CR = Impl::CanonicalInput<E, Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>>;
  using CL = Impl::CanonicalInput<E, Kokkos::View<float**, Kokkos::LayoutLeft, MemorySpace>>;
  using CS = Impl::CanonicalInput<E, Kokkos::View<float**, Kokkos::LayoutStride, MemorySpace>>;
  using YR = Impl::CanonicalOutput<E, Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>>;
  using YL = Impl::CanonicalOutput<E, Kokkos::View<float**, Kokkos::LayoutLeft, MemorySpace>>;
  constexpr Gemm right = Impl::kokkos_blas_gemm<E, CR, CR, YR>();
  constexpr Gemm left = Impl::kokkos_blas_gemm<E, CL, CL, YL>();
  constexpr Gemm mixed = Impl::kokkos_blas_gemm<E, CR, CL, YR>();
  constexpr Gemm strided = Impl::kokkos_blas_gemm<E, CS, CR, YR>();
  EXPECT_EQ(mixed, Gemm::KokkosKernelsNative);
  EXPECT_EQ(strided, Gemm::KokkosKernelsNative);
  EXPECT_EQ(right, left);
#if defined(KOKKOS_ENABLE_CUDA) && defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
  EXPECT_EQ(right, Gemm::Cublas);
#elif !defined(KOKKOS_ENABLE_CUDA) && !defined(KOKKOS_ENABLE_HIP) && \
    defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
  EXPECT_EQ(right, Gemm::HostBlas);
#endif
}

}  // namespace
