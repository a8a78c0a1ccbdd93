// SPDX-License-Identifier: Apache-2.0
// State the library shares where a user believes nothing is shared, on the host:
//   SharedState.ForkedChildNeverHangs        a child forked after a call on the host thread
//                                            pool computes or refuses clearly, never hangs;
//                                            Kokkos::Serial computes in it (the child frees no
//                                            managed View: its Views are unmanaged)
//   SharedState.ForkedChildRefusesTheDevice  CUDA builds: a child forked after a call on the
//                                            device is refused by name (the one-shot call and
//                                            Plan's constructor) on the parent's device memory;
//                                            a child that only exits ends with 0
//   SharedState.ForkRegistryOrder            the one fork registration runs prepare actions in
//                                            slot order, parent and child ones in reverse,
//                                            whatever order the pieces registered in
//   SharedState.WisdomTextIgnoresTheLocale   export and import under a global C++ locale with
//                                            digit grouping and a decimal comma (and the C
//                                            locale de_DE where installed)
//   SharedState.WisdomImportKeepsTheStreamsExceptionMask
//                                            an istream with failbit exceptions reads valid
//                                            wisdom without std::ios_base::failure
//   SharedState.WisdomKeyNamesTheVersions    the key names Kokkos', Kokkos Kernels' versions and
//                                            the host vector ISA
//   SharedState.AliasCheckBoundedOnInterleavedViews
//                                            shares_elements' budget bounds its work
// The CUDA side (graphs, captures, devices) is in TestGraphsShared.cpp.
#include <atomic>
#include <chrono>
#include <clocale>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <ios>
#include <locale>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <FusedLinear.hpp>
#include <FusedLinear/impl/Fork.hpp>

#if defined(__unix__)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#define FUSED_LINEAR_TEST_HAS_FORK 1
#endif

namespace {

using FusedLinear::Algorithm;
using FusedLinear::Options;
using FusedLinear::Planning;
using FusedLinear::Precision;

#if defined(FUSED_LINEAR_TEST_HAS_FORK)
/// Runs `child` in a forked process that an alarm kills after `seconds`; the child's exit code
/// (what `child` returns), or a description of how it ended otherwise.
std::string run_in_child(unsigned seconds, const std::function<int()>& child, int& code) {
  code = -1;
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    alarm(seconds);  // SIGALRM's default action ends the child: a hang fails the test
    int rc = 99;
    try {
      rc = child();
    } catch (...) {
      rc = 98;
    }
    _exit(rc);  // no atexit handlers, no Kokkos::finalize in the child
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return "waitpid failed";
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
    return "";
  }
  if (WIFSIGNALED(status))
    return "the child was killed by signal " + std::to_string(WTERMSIG(status)) +
           (WTERMSIG(status) == SIGALRM
                ? " (the alarm: it hung for " + std::to_string(seconds) + " s)"
                : "");
  return "the child ended abnormally";
}
#endif

using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostVector = Kokkos::View<float*, Kokkos::LayoutRight, Kokkos::HostSpace>;

/// A layer's inputs and output filled on the host (no kernel: a forked child may not run one on
/// the thread pool), in storage of its own under unmanaged Views: a child must not free a
/// managed View either, since Kokkos fences every backend then, the device's included, which
/// fails after fork() (and a throw from a View's destructor ends the process).
struct HostLayer {
  using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace,
                              Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Vector = Kokkos::View<float*, Kokkos::LayoutRight, Kokkos::HostSpace,
                              Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  std::vector<float> x, w, y, bias;  // declared before the Views, which point into them
  Matrix X, W, Y;
  Vector b;
  HostLayer(int M, int K, int N)
      : x(std::size_t(M) * K),
        w(std::size_t(N) * K),
        y(std::size_t(M) * N, std::nanf("")),
        bias(std::size_t(N)),
        X(x.data(), M, K),
        W(w.data(), N, K),
        Y(y.data(), M, N),
        b(bias.data(), N) {
    for (int i = 0; i < M; ++i)
      for (int k = 0; k < K; ++k) X(i, k) = float((i * 7 + k * 3) % 11) / 8 - 0.6f;
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < K; ++k) W(j, k) = float((j * 5 + k) % 13) / 16 - 0.4f;
    for (int j = 0; j < N; ++j) b(j) = float(j % 5) / 4 - 0.5f;
  }
  HostLayer(const HostLayer&) = delete;  // a copy's Views would point into this one's storage
  HostLayer& operator=(const HostLayer&) = delete;
  /// Largest relative error of Y against a float64 loop (LeakyReLU(2 (X W^T + b), 0.1)).
  double error() const {
    double worst = 0;
    for (int i = 0; i < int(X.extent(0)); ++i)
      for (int j = 0; j < int(W.extent(0)); ++j) {
        double s = b(j);
        for (int k = 0; k < int(X.extent(1)); ++k) s += double(X(i, k)) * double(W(j, k));
        s *= 2;
        const double ref = s > 0 ? s : 0.1 * s;
        const double e = std::abs(double(Y(i, j)) - ref) / std::max(1.0, std::abs(ref));
        worst = std::isnan(double(Y(i, j))) ? 1e30 : std::max(worst, e);
      }
    return worst;
  }
};

/// How `call` ended, as a forked child reports it: 0 refused by name (std::runtime_error whose
/// message starts with `function` + ": " and mentions fork), 1 it returned, 2 a runtime_error
/// with another message, 3 another exception.
int refusal(const std::function<void()>& call, const std::string& function) {
  try {
    call();
    return 1;
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    return what.rfind(function + ": ", 0) == 0 && what.find("fork") != std::string::npos ? 0 : 2;
  } catch (...) {
    return 3;
  }
}

// Guards against a forked child hanging in its first call: GNU OpenMP's pool does not survive
// fork() and Kokkos opens every parallel region with its whole pool. After the parent computed
// on OpenMP, the child's call on the thread pool must return, computed right or refused with
// std::runtime_error naming the function; Kokkos::Serial computes there.
TEST(SharedState, ForkedChildNeverHangs) {
#if !defined(FUSED_LINEAR_TEST_HAS_FORK) || !defined(KOKKOS_ENABLE_OPENMP)
  GTEST_SKIP() << "needs fork() and an OpenMP build";
#else
  if (Kokkos::OpenMP().concurrency() < 2)
    GTEST_SKIP() << "needs an OpenMP pool of two threads at least (a pool of one survives fork)";
  HostLayer layer(37, 64, 29);
  FusedLinear::linear_leaky_relu(Kokkos::OpenMP(), layer.X, layer.W, layer.b, layer.Y, 2.f, 0.1f);
  Kokkos::fence();
  ASSERT_LT(layer.error(), 1e-5) << "the parent's call";
  // Exit codes: 0 computed right, 1 refused clearly, 2 wrong result, 3 another exception, then
  // +10 when Serial did not compute right.
  int code = -1;
  const std::string how = run_in_child(
      30,
      [&] {
        HostLayer again(37, 64, 29);
        const int how_refused = refusal(
            [&] {
              FusedLinear::linear_leaky_relu(Kokkos::OpenMP(), again.X, again.W, again.b, again.Y,
                                             2.f, 0.1f);
            },
            "FusedLinear::linear_leaky_relu");
        int rc = how_refused == 0 ? 1 : how_refused == 1 ? (again.error() < 1e-5 ? 0 : 2) : 3;
#if defined(KOKKOS_ENABLE_SERIAL)
        HostLayer serial(37, 64, 29);
        FusedLinear::linear_leaky_relu(Kokkos::Serial(), serial.X, serial.W, serial.b, serial.Y,
                                       2.f, 0.1f);
        if (!(serial.error() < 1e-5)) rc += 10;
#endif
        return rc;
      },
      code);
  ASSERT_EQ(how, "");
  EXPECT_TRUE(code == 0 || code == 1) << "child exit code " << code
                                      << " (2: wrong result on OpenMP, 3: another exception or "
                                         "message, +10: Serial did not compute right)";
#endif
}

// Guards against a device call in a child forked after Kokkos started aborting the child (the
// parent's CUDA context does not survive fork(), and Kokkos' failing check aborts): the one-shot
// call and Plan's constructor throw std::runtime_error naming themselves before any CUDA call,
// here on the parent's device memory (with a plan for it in the parent's cache). The child
// makes unmanaged Views over the parent's pointers and frees nothing: freeing device memory
// would enter CUDA. And a child that only exits after the parent used the device ends with 0.
TEST(SharedState, ForkedChildRefusesTheDevice) {
#if !defined(FUSED_LINEAR_TEST_HAS_FORK) || !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs fork() and a CUDA build";
#else
  using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::CudaSpace>;
  using Vector = Kokkos::View<float*, Kokkos::LayoutRight, Kokkos::CudaSpace>;
  using UnmanagedMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::CudaSpace,
                                       Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using UnmanagedVector = Kokkos::View<float*, Kokkos::LayoutRight, Kokkos::CudaSpace,
                                       Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  static constexpr int M = 37, K = 64, N = 29;  // static: the child lambda captures nothing
  // The parent's Views stay alive (and untouched) in the child: it never frees them.
  const Matrix X0("X", M, K), W0("W", N, K), Y0("Y", M, N);
  const Vector b0("b", N);
  Kokkos::deep_copy(X0, 0.5f), Kokkos::deep_copy(W0, 0.25f), Kokkos::deep_copy(b0, -1.f);
  FusedLinear::linear_leaky_relu(Kokkos::Cuda(), X0, W0, b0, Y0, 2.f, 0.1f);
  Kokkos::fence();

  int code = -1;
  std::string how = run_in_child(
      30, [] { return 0; }, code);
  ASSERT_EQ(how, "") << "a child that only exits";
  EXPECT_EQ(code, 0) << "a child that only exits";

  // Exit code: the one-shot call's refusal() + 10 x the constructor's (0 both refused by name).
  how = run_in_child(
      30,
      [x = X0.data(), w = W0.data(), bias = b0.data(), y = Y0.data()] {
        const UnmanagedMatrix X(x, M, K), W(w, N, K), Y(y, M, N);
        const UnmanagedVector b(bias, N);
        const int call =
            refusal([&] { FusedLinear::linear_leaky_relu(Kokkos::Cuda(), X, W, b, Y, 2.f, 0.1f); },
                    "FusedLinear::linear_leaky_relu");
        const int plan = refusal(
            [&] {
              FusedLinear::Plan<Kokkos::Cuda, UnmanagedMatrix, UnmanagedMatrix, UnmanagedVector,
                                UnmanagedMatrix>
                  p(Kokkos::Cuda(), X, W, b, Y, 2.f, 0.1f);
            },
            "FusedLinear::Plan");
        return call + 10 * plan;
      },
      code);
  ASSERT_EQ(how, "");
  EXPECT_EQ(code, 0) << "ones: the one-shot call, tens: Plan's constructor; 1 not refused, 2 "
                        "another runtime_error message, 3 another exception";
#endif
}

// Guards the lock order around fork(): the plan cache's, the wisdom's and the extension's
// actions register lazily, in any order, with one pthread_atfork registration; prepare must
// take them in slot order (within a slot, as they came) and parent and child release them in
// the reverse order. A registry of the test's own: pthread_atfork never runs it.
TEST(SharedState, ForkRegistryOrder) {
  using FusedLinear::Impl::ForkSlot;
  static std::vector<std::string> ran;  // the actions are plain functions: no captures
  ran.clear();
  FusedLinear::Impl::ForkRegistry registry;
  registry.add(ForkSlot::Wisdom,
               {[] { ran.push_back("prepare wisdom"); }, [] { ran.push_back("parent wisdom"); },
                [] { ran.push_back("child wisdom"); }});
  registry.add(ForkSlot::KokkosState, {[] { ran.push_back("prepare kokkos"); }, nullptr,
                                       [] { ran.push_back("child kokkos"); }});
  registry.add(ForkSlot::PlanCache,
               {[] { ran.push_back("prepare cache"); }, [] { ran.push_back("parent cache"); },
                [] { ran.push_back("child cache"); }});
  registry.add(ForkSlot::Extension, {nullptr, nullptr, [] { ran.push_back("child extension"); }});
  registry.add(ForkSlot::PlanCache, {[] { ran.push_back("prepare cache 2"); }, nullptr,
                                     [] { ran.push_back("child cache 2"); }});
  registry.prepare();
  registry.parent();
  EXPECT_EQ(ran, (std::vector<std::string>{"prepare cache", "prepare cache 2", "prepare wisdom",
                                           "prepare kokkos", "parent wisdom", "parent cache"}));
  ran.clear();
  registry.prepare();
  registry.child();
  EXPECT_EQ(ran, (std::vector<std::string>{"prepare cache", "prepare cache 2", "prepare wisdom",
                                           "prepare kokkos", "child kokkos", "child wisdom",
                                           "child cache 2", "child cache", "child extension"}));
}

// ------------------------------------------------------------------ wisdom

std::string exported() {
  std::ostringstream os;
  FusedLinear::export_wisdom(os);
  return os.str();
}

/// A global C++ locale that groups digits by three with '.' and writes ',' for the decimal point.
struct GroupingComma : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};
struct GlobalLocale {
  explicit GlobalLocale(const std::locale& l) : previous(std::locale::global(l)) {}
  ~GlobalLocale() { std::locale::global(previous); }
  std::locale previous;
};

double fixed_clock(Algorithm a, Precision, int, int, double) {
  return a == Algorithm::Fused ? 1234.5 : 2000.25;
}

// Guards against the wisdom text following the process's locale: a global C++ locale with digit
// grouping would write the milliseconds as "1.234,5" (which import refuses) and the key's
// extents as "1.000x..."; under the C locale de_DE, strtod would read "1234.5" as 1234.
TEST(SharedState, WisdomTextIgnoresTheLocale) {
  FusedLinear::forget_wisdom();
  const std::string text = "FusedLinear wisdom 2\nentry\tlibrary " +
                           FusedLinear::Impl::build_identity() +
                           "; some key\tfused\tstrict\t0\t1234.5\nend\n";
  {
    GlobalLocale german(std::locale(std::locale::classic(), new GroupingComma));
    std::istringstream is(text);
    EXPECT_NO_THROW(FusedLinear::import_wisdom(is));
    const std::string out = exported();
    EXPECT_NE(out.find("\t1234.5\n"), std::string::npos) << out;
    // A measured plan's key: extents past 999 and the time, in the "C" locale's digits.
    HostMatrix X("X", 1000, 4), W("W", 3, 4), Y("Y", 1000, 3);
    HostVector b("b", 3);
    Options o(Algorithm::Auto, Precision::Strict, Planning::Measure);
    o.tuning.measure_clock = &fixed_clock;
    FusedLinear::Plan<Kokkos::DefaultHostExecutionSpace, HostMatrix, HostMatrix, HostVector,
                      HostMatrix>
        plan(Kokkos::DefaultHostExecutionSpace(), X, W, b, Y, 2.f, 0.1f, o);
    const std::string measured = exported();
    EXPECT_NE(measured.find("shape 1000x4x3"), std::string::npos) << measured;
    EXPECT_EQ(measured.find("1.000"), std::string::npos) << measured;
    FusedLinear::forget_wisdom();
    std::istringstream again(measured);
    EXPECT_NO_THROW(FusedLinear::import_wisdom(again)) << measured;
    EXPECT_EQ(FusedLinear::wisdom_size(), 2u);
  }
  // The C library's locale (strtod, printf) where de_DE is installed.
  FusedLinear::forget_wisdom();
  const std::string previous = std::setlocale(LC_NUMERIC, nullptr);
  if (std::setlocale(LC_NUMERIC, "de_DE.UTF-8") != nullptr) {
    std::istringstream is(text);
    EXPECT_NO_THROW(FusedLinear::import_wisdom(is));
    const std::string out = exported();
    std::setlocale(LC_NUMERIC, previous.c_str());
    EXPECT_NE(out.find("\t1234.5\n"), std::string::npos) << out;
  } else {
    std::cout << "[          ] the C locale de_DE.UTF-8 is not installed: its part is skipped\n";
  }
  FusedLinear::forget_wisdom();
}

// Guards against import_wisdom throwing std::ios_base::failure on valid input from an istream
// with failbit exceptions (reading to the end sets failbit): valid input is read, the caller's
// mask kept; invalid input gives std::invalid_argument.
TEST(SharedState, WisdomImportKeepsTheStreamsExceptionMask) {
  FusedLinear::forget_wisdom();
  const std::string text = "FusedLinear wisdom 2\nentry\tlibrary " +
                           FusedLinear::Impl::build_identity() +
                           "; k\tfused\tstrict\t0\t1.5\nend\n";
  std::istringstream is(text);
  is.exceptions(std::ios::failbit | std::ios::badbit);
  try {
    FusedLinear::import_wisdom(is);
  } catch (const std::ios_base::failure& e) {
    ADD_FAILURE() << "std::ios_base::failure on valid wisdom: " << e.what();
  }
  EXPECT_EQ(FusedLinear::wisdom_size(), 1u);
  EXPECT_EQ(is.exceptions(), std::ios::failbit | std::ios::badbit);
  std::istringstream bad("FusedLinear wisdom 2\nentry\tk\tfused\n");
  bad.exceptions(std::ios::failbit | std::ios::badbit);
  EXPECT_THROW(FusedLinear::import_wisdom(bad), std::invalid_argument);
  EXPECT_EQ(bad.exceptions(), std::ios::failbit | std::ios::badbit);
  FusedLinear::forget_wisdom();
}

// Guards against wisdom measured under one build being taken by another: a measured choice
// depends on Kokkos', Kokkos Kernels' versions and the host vector ISA the kernels were compiled
// for, not only on the library's version, so the key names them all.
TEST(SharedState, WisdomKeyNamesTheVersions) {
  FusedLinear::forget_wisdom();
  HostMatrix X("X", 8, 4), W("W", 3, 4), Y("Y", 8, 3);
  HostVector b("b", 3);
  Options o(Algorithm::Auto, Precision::Strict, Planning::Measure);
  o.tuning.measure_clock = &fixed_clock;
  FusedLinear::Plan<Kokkos::DefaultHostExecutionSpace, HostMatrix, HostMatrix, HostVector,
                    HostMatrix>
      plan(Kokkos::DefaultHostExecutionSpace(), X, W, b, Y, 2.f, 0.1f, o);
  const std::string out = exported();
  ASSERT_EQ(FusedLinear::wisdom_size(), 1u) << out;
  const std::string kokkos = "Kokkos " + std::to_string(KOKKOS_VERSION / 10000) + "." +
                             std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
                             std::to_string(KOKKOS_VERSION % 100);
  EXPECT_NE(out.find(kokkos), std::string::npos) << out;
  EXPECT_NE(out.find("Kokkos Kernels "), std::string::npos) << out;
  EXPECT_NE(out.find("isa "), std::string::npos) << out;
  FusedLinear::forget_wisdom();
}

// ------------------------------------------------------------------ the alias check

// Guards against the alias check's work escaping its budget: shares_elements' 2^16 budget must
// count the lines it walks, not only the pairs of lines it compares, or two interleaved Views of
// different strides whose lines never meet cost one step per line of the first (2^34 here:
// minutes). The check stays within its budget and answers yes, conservatively, past it. No
// memory is touched: the Views are unmanaged, over an address nothing is allocated at.
TEST(SharedState, AliasCheckBoundedOnInterleavedViews) {
#if !defined(FUSED_LINEAR_TEST_HAS_FORK)
  GTEST_SKIP() << "needs fork() (the unbounded loop would hang the suite)";
#else
  using Strided =
      Kokkos::View<float**, Kokkos::LayoutStride, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  const std::size_t lines = std::size_t(1) << 34;
  float* const base = reinterpret_cast<float*>(std::uintptr_t(1) << 20);
  // a: elements 4 i; b: elements 2 + 2^22 k, never a multiple of 4.
  const Strided a(base, Kokkos::LayoutStride(lines, 4, 1, 1));
  const Strided b(base + 2, Kokkos::LayoutStride(lines, std::size_t(1) << 22, 1, 1));
  int code = -1;
  const std::string how = run_in_child(
      20,
      [&] {
        const auto start = std::chrono::steady_clock::now();
        const bool shared = FusedLinear::Impl::shares_elements(a, b);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return s < 5 ? (shared ? 0 : 1) : 2;
      },
      code);
  ASSERT_EQ(how, "");
  EXPECT_EQ(code, 0) << "1: answered no (every line walked), 2: took more than 5 s";
#endif
}

}  // namespace
