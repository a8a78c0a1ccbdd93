// SPDX-License-Identifier: Apache-2.0
// Wisdom: a second plan measures nothing, the text round trip, malformed input refused with
// nothing changed, imported choices used (and ignored where they are not candidates).
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
void import_text(const std::string& text) {
  std::istringstream is(text);
  FusedLinear::import_wisdom(is);
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
  EXPECT_TRUE(starts_with(text, "FusedLinear wisdom 1\n")) << text;
  EXPECT_TRUE(contains(text, "\nend\n")) << text;
  FusedLinear::forget_wisdom();
  EXPECT_EQ(FusedLinear::wisdom_size(), 0u);
  EXPECT_EQ(exported(), "FusedLinear wisdom 1\nend\n");
  import_text(text);
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
  import_text("FusedLinear wisdom 1\nentry\tsome key\tfused\tstrict\t0\t1.5\nend\n");
  const std::string before = exported();
  ASSERT_EQ(FusedLinear::wisdom_size(), 1u);
  const std::string head = "FusedLinear wisdom 1\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty"},
      {"not wisdom\n", "not FusedLinear wisdom"},
      {"FusedLinear wisdom 2\nend\n", "version"},
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
  import_text(head +
              "entry\tsome key\tvendor\tstrict\t0\t1\nentry\tk2\tfused\tstrict\t0\t1\nend\n");
  EXPECT_EQ(FusedLinear::wisdom_size(), 2u);
  EXPECT_TRUE(contains(exported(), "some key\tvendor\t"));
  FusedLinear::forget_wisdom();
  EXPECT_EQ(FusedLinear::wisdom_size(), 0u);
}

}  // namespace
