// SPDX-License-Identifier: Apache-2.0
// Wisdom: a second plan measures nothing, the text round trip, malformed input (and version 1)
// refused with nothing changed, imported choices used (and ignored where they are not
// candidates), the key's build part, entries of other builds dropped at import.
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif
#include <sstream>
#include <string>
#include <vector>

#include "Measuring.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Measuring;

std::string exported() {
  std::ostringstream os;
  FusedLinear::export_wisdom(os);
  return os.str();
}
FusedLinear::WisdomImport import_text(const std::string& text) {
  std::istringstream is(text);
  return FusedLinear::import_wisdom(is);
}
/// A key of this build's (what a key made here starts with), then `rest`.
std::string this_build(const std::string& rest) {
  return "library " + FusedLinear::Impl::build_identity() + "; " + rest;
}
/// The entry lines of a wisdom text.
std::vector<std::string> entries_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (starts_with(line, "entry\t")) out.push_back(line);
  return out;
}

// A second plan of the same kind measures nothing and runs the remembered choice; the wisdom
// survives a text round trip; a plan made from imported wisdom times nothing and runs the
// imported choice.
TEST(Planning, WisdomRoundTrip) {
  P p(64, 1024, 300, 14);  // several candidates at every floor, GPUs' cost model's too
  const auto cands = candidates_for(p, Precision::Strict);
  ASSERT_GE(cands.size(), 2u);
  FusedLinear::forget_wisdom();
  EXPECT_EQ(FusedLinear::wisdom_size(), 0u);
  FakeClock::times.clear();
  FakeClock::times[{cands.back().algorithm, cands.back().precision}] = 1.0;
  FakeClock::calls = 0;
  PlanType first(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  EXPECT_TRUE(first.info().measured);
  EXPECT_EQ(first.info().algorithm, cands.back().algorithm);
  const int calls = FakeClock::calls;
  EXPECT_GT(calls, 0);
  EXPECT_EQ(FusedLinear::wisdom_size(), 1u);

  // Another multiplier and slope, the same kind of plan: from wisdom.
  PlanType second(ExecSpace(), p.X, p.W, p.b, p.Y, 3.f, 0.2f, measured());
  EXPECT_EQ(FakeClock::calls, calls) << "a plan made from wisdom measures nothing";
  EXPECT_TRUE(second.info().measured);
  EXPECT_TRUE(second.info().from_wisdom);
  EXPECT_TRUE(second.measurements().empty());
  EXPECT_EQ(second.info().algorithm, first.info().algorithm);
  p.poison();
  second.execute(p.X, p.W, p.b, p.Y);
  EXPECT_TRUE(matches_reference(p, 3, double(0.2f), p.Y));

  // Another shape is another key.
  P q(65, 1024, 300, 15);
  ASSERT_GE(candidates_for(q, Precision::Strict).size(), 2u);
  PlanType other(ExecSpace(), q.X, q.W, q.b, q.Y, 2.f, 0.1f, measured());
  EXPECT_GT(FakeClock::calls, calls);
  EXPECT_FALSE(other.info().from_wisdom);
  EXPECT_EQ(FusedLinear::wisdom_size(), 2u);

  const std::string text = exported();
  EXPECT_TRUE(starts_with(text, "FusedLinear wisdom 2\n")) << text;
  EXPECT_TRUE(contains(text, "\nend\n")) << text;
  FusedLinear::forget_wisdom();
  EXPECT_EQ(FusedLinear::wisdom_size(), 0u);
  EXPECT_EQ(exported(), "FusedLinear wisdom 2\nend\n");
  const FusedLinear::WisdomImport counts = import_text(text);
  EXPECT_EQ(counts.kept, 2u);
  EXPECT_EQ(counts.other_builds, 0u);
  EXPECT_EQ(FusedLinear::wisdom_size(), 2u);
  EXPECT_EQ(exported(), text) << "export, import, export gives the same text";

  const int before = FakeClock::calls;
  PlanType imported(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  EXPECT_EQ(FakeClock::calls, before);
  EXPECT_TRUE(imported.info().from_wisdom);
  EXPECT_EQ(imported.info().algorithm, cands.back().algorithm);

  // Imported wisdom that names another candidate: that one runs, nothing timed.
  const std::string from =
      std::string("\t") + FusedLinear::to_string(cands.back().algorithm) + "\tstrict\t";
  const std::string to =
      std::string("\t") + FusedLinear::to_string(cands.front().algorithm) + "\tstrict\t";
  std::string edited;
  {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (contains(line, "shape 64x1024x300") && contains(line, from))
        line.replace(line.find(from), from.size(), to);
      edited += line + "\n";
    }
  }
  ASSERT_NE(edited, text);
  FusedLinear::forget_wisdom();
  import_text(edited);
  PlanType chosen(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  EXPECT_EQ(FakeClock::calls, before);
  EXPECT_TRUE(chosen.info().from_wisdom);
  EXPECT_EQ(chosen.info().algorithm, cands.front().algorithm);
  p.poison();
  chosen.execute(p.X, p.W, p.b, p.Y);
  EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y));

  // Wisdom naming a path that is no candidate here (fused_sm90 never computes strict) is not
  // run: the plan measures.
  std::string bogus;
  {
    std::istringstream lines(edited);
    for (std::string line; std::getline(lines, line);) {
      if (contains(line, "shape 64x1024x300") && contains(line, to))
        line.replace(line.find(to), to.size(), "\tfused_sm90\tstrict\t");
      bogus += line + "\n";
    }
  }
  FusedLinear::forget_wisdom();
  import_text(bogus);
  PlanType remeasured(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  EXPECT_GT(FakeClock::calls, before);
  EXPECT_FALSE(remeasured.info().from_wisdom);
  EXPECT_EQ(remeasured.info().algorithm, cands.back().algorithm);
  FusedLinear::forget_wisdom();
}

// Malformed wisdom is refused, naming the function and the line, and changes nothing.
TEST(Planning, MalformedWisdomIsRefusedAndChangesNothing) {
  FusedLinear::forget_wisdom();
  const std::string head = "FusedLinear wisdom 2\n";
  const std::string some = this_build("some key"), k2 = this_build("k2");
  import_text(head + "entry\t" + some + "\tfused\tstrict\t0\t1.5\nend\n");
  const std::string before = exported();
  ASSERT_EQ(FusedLinear::wisdom_size(), 1u);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty"},
      {"not wisdom\n", "not FusedLinear wisdom"},
      {"FusedLinear wisdom 3\nend\n", "unsupported version"},
      {"FusedLinear wisdom 0\nend\n", "unsupported version"},
      // Version 1's keys lack the cuBLAS and driver versions: none would ever match.
      {"FusedLinear wisdom 1\nentry\t" + k2 + "\tfused\tstrict\t0\t1\nend\n",
       "version 1, whose keys predate this library's"},
      {head, "truncated"},
      {head + "entry\tk2\tfused\tstrict\t0\t1\n", "truncated"},
      {head + "entry\tk2\tfused\tstrict\t0\nend\n", "tabs"},
      {head + "entry\tk2\tfused\tstrict\t0\t1\t7\nend\n", "tabs"},
      {head + "item\tk2\tfused\tstrict\t0\t1\nend\n", "tabs"},
      {head + "entry\t\tfused\tstrict\t0\t1\nend\n", "empty key"},
      {head + "entry\tk2\tfastest\tstrict\t0\t1\nend\n", "unknown algorithm"},
      {head + "entry\tk2\tfused\tfp16\t0\t1\nend\n", "unknown precision"},
      {head + "entry\tk2\tauto\tstrict\t0\t1\nend\n", "not auto"},
      {head + "entry\tk2\tfused\tstrict\t-1\t1\nend\n", "variant"},
      {head + "entry\tk2\tfused\tstrict\tx\t1\nend\n", "variant"},
      {head + "entry\tk2\tfused\tstrict\t0\tnan\nend\n", "milliseconds"},
      {head + "entry\tk2\tfused\tstrict\t0\t1ms\nend\n", "milliseconds"},
      {head + "entry\tk2\tfused\tstrict\t0\t-2\nend\n", "milliseconds"},
      {head + "entry\tk2\tfused\tstrict\t0\t1\nend\nentry\tk3\tfused\tstrict\t0\t1\n",
       "after \"end\""},
  };
  for (const auto& [text, why] : bad) {
    try {
      import_text(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(starts_with(e.what(), "FusedLinear::import_wisdom: line ")) << e.what();
      EXPECT_TRUE(contains(e.what(), why)) << e.what() << " (expected: " << why << ")";
    }
    EXPECT_EQ(exported(), before) << "a refused import changed the wisdom: " << text;
  }
  // A well-formed import adds, replacing entries of the same key.
  import_text(head + "entry\t" + some + "\tvendor\tstrict\t0\t1\nentry\t" + k2 +
              "\tfused\tstrict\t0\t1\nend\n");
  EXPECT_EQ(FusedLinear::wisdom_size(), 2u);
  EXPECT_TRUE(contains(exported(), "some key\tvendor\t"));
  FusedLinear::forget_wisdom();
  EXPECT_EQ(FusedLinear::wisdom_size(), 0u);
}

// A version-1 text is refused by name, says to re-measure, and changes nothing: its keys lack
// parts this library's have, so its entries would never match.
TEST(Planning, WisdomVersion1IsRefused) {
  FusedLinear::forget_wisdom();
  const std::string kept =
      "FusedLinear wisdom 2\nentry\t" + this_build("kept") + "\tfused\tstrict\t0\t1.5\nend\n";
  import_text(kept);
  const std::string v1 =
      "FusedLinear wisdom 1\nentry\t" + this_build("k") + "\tfused\tstrict\t0\t1.5\nend\n";
  try {
    import_text(v1);
    ADD_FAILURE() << "version 1 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(starts_with(e.what(), "FusedLinear::import_wisdom: line 1: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "version 1")) << e.what();
    EXPECT_TRUE(contains(e.what(), "re-measure")) << e.what();
  }
  EXPECT_EQ(exported(), kept);
  FusedLinear::forget_wisdom();
}

// The key's build part names the library, Kokkos, Kokkos Kernels and the host ISA, and on CUDA
// builds the runtime, the driver, cuBLAS and cuBLASLt, whose versions change which path is
// fastest; the device part names the device.
TEST(Planning, WisdomKeyNamesTheBuildAndTheDevice) {
  FusedLinear::forget_wisdom();
  P p(64, 1024, 300, 14);
  FakeClock::times.clear();
  PlanType plan(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  const std::vector<std::string> lines = entries_of(exported());
  ASSERT_EQ(lines.size(), 1u);
  const std::string& key = lines[0];
  EXPECT_TRUE(starts_with(key, "entry\tlibrary FusedLinear ")) << key;
  for (const char* part : {", Kokkos ", ", Kokkos Kernels ", ", isa "})
    EXPECT_TRUE(contains(key, part)) << part << " in " << key;
  EXPECT_TRUE(contains(key, std::string("; device ") + ExecSpace::name() + ' ')) << key;
  if (FusedLinear::Impl::is_host_space<ExecSpace>()) {
    for (const char* part : {" threads ", " blas "})
      EXPECT_TRUE(contains(key, part)) << part << " in " << key;
  }
#if defined(KOKKOS_ENABLE_CUDA)
  int driver = 0;
  ASSERT_EQ(cudaDriverGetVersion(&driver), cudaSuccess);
  EXPECT_TRUE(contains(key, ", CUDA driver " + std::to_string(driver) + ",")) << key;
#if defined(FUSED_LINEAR_CUBLAS)
  int major = 0, minor = 0, patch = 0;
  ASSERT_EQ(cublasGetProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasGetProperty(MINOR_VERSION, &minor), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasGetProperty(PATCH_LEVEL, &patch), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(contains(key, ", cuBLAS " + std::to_string(major) + '.' + std::to_string(minor) +
                                '.' + std::to_string(patch) + ","))
      << key;
#endif
#if defined(FUSED_LINEAR_CUBLASLT)
  EXPECT_TRUE(contains(key, ", cuBLASLt " + std::to_string(cublasLtGetVersion()) + ",")) << key;
#endif
#endif
  FusedLinear::forget_wisdom();
}

// Entries of another build (or naming none) can never match here: import drops them and counts
// them, so that export never writes them again; this build's entries round-trip.
TEST(Planning, WisdomOfOtherBuildsIsDroppedAtImport) {
  FusedLinear::forget_wisdom();
  P p(64, 1024, 300, 14);
  FakeClock::times.clear();
  PlanType plan(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  const std::string text = exported();
  const std::vector<std::string> lines = entries_of(text);
  ASSERT_EQ(lines.size(), 1u);
  const std::string ours = "entry\tlibrary FusedLinear ";
  ASSERT_TRUE(starts_with(lines[0], ours)) << lines[0];
  // The same entry measured by another version of this library, and by a gradient plan of
  // another build, and a key naming no build.
  std::string other = lines[0];
  other.replace(0, ours.size(), "entry\tlibrary FusedLinear 0.0.0-other, ");
  std::string gradient = lines[0];
  gradient.replace(0, ours.size(), "entry\tgradient; library FusedLinear 0.0.0-other, ");
  const std::string nobuild = "entry\tno build\tfused\tstrict\t0\t1";
  const std::string mixed = "FusedLinear wisdom 2\n" + other + "\n" + lines[0] + "\n" + gradient +
                            "\n" + nobuild + "\nend\n";
  FusedLinear::forget_wisdom();
  const FusedLinear::WisdomImport counts = import_text(mixed);
  EXPECT_EQ(counts.kept, 1u);
  EXPECT_EQ(counts.other_builds, 3u);
  EXPECT_EQ(FusedLinear::wisdom_size(), 1u);
  EXPECT_EQ(exported(), text) << "only this build's entry comes back out";
  // And it is used: a plan of the same kind measures nothing.
  const int calls = FakeClock::calls;
  PlanType again(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  EXPECT_EQ(FakeClock::calls, calls);
  EXPECT_TRUE(again.info().from_wisdom);
  // A file of other builds only adds nothing, and is no error.
  FusedLinear::forget_wisdom();
  const FusedLinear::WisdomImport none =
      import_text("FusedLinear wisdom 2\n" + other + "\n" + gradient + "\nend\n");
  EXPECT_EQ(none.kept, 0u);
  EXPECT_EQ(none.other_builds, 2u);
  EXPECT_EQ(FusedLinear::wisdom_size(), 0u);
  EXPECT_EQ(exported(), "FusedLinear wisdom 2\nend\n");
  FusedLinear::forget_wisdom();
}

}  // namespace
