// SPDX-License-Identifier: Apache-2.0
// Auto's decisions against the golden table (src/FusedLinear/impl/rules/dispatch-golden.csv,
// written by `fused_linear_replay_rule --golden` from GoldenProfiles.hpp): a change
// to the rule's numbers or code shows here as the rows it changes, and is accepted by
// regenerating the table beside the rule, one reviewable diff.
#include <cstddef>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "GoldenProfiles.hpp"

#if !defined(FUSED_LINEAR_DISPATCH_GOLDEN)
#error "FUSED_LINEAR_DISPATCH_GOLDEN (the golden table's path) is set by tests/CMakeLists.txt"
#endif

namespace {

namespace Golden = FusedLinearGolden;

constexpr const char* path = FUSED_LINEAR_DISPATCH_GOLDEN;
constexpr const char* regenerate =
    "if the change to the rule is meant, regenerate the table: PYTHONPATH=perf python3 -m "
    "tuning.rules --write --replay-tool build/host/perf/fused_linear_replay_rule";

std::vector<std::string> read_lines() {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// A row's profile, M, K, N and floor: the first five fields.
std::string key_of(const std::string& row) {
  std::size_t at = 0;
  for (int field = 0; field < 5 && at != std::string::npos; ++field) at = row.find(',', at + 1);
  return at == std::string::npos ? row : row.substr(0, at);
}

/// The rows auto gives now, by key.
std::map<std::string, std::string> rows_now() {
  std::map<std::string, std::string> rows;
  for (const std::string& row : Golden::csv_rows()) rows.emplace(key_of(row), row);
  return rows;
}

TEST(DispatchGolden, EveryRowIsWhatResolvePicks) {
  const std::vector<std::string> lines = read_lines();
  ASSERT_FALSE(lines.empty()) << "cannot read " << path;
  EXPECT_EQ(lines[0], Golden::csv_header()) << path << ":1: the header";
  const std::map<std::string, std::string> now = rows_now();
  int differ = 0, unknown = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string where = std::string(path) + ":" + std::to_string(i + 1);
    const auto found = now.find(key_of(lines[i]));
    if (found == now.end()) {
      if (++unknown <= 10)
        ADD_FAILURE() << where << ": '" << lines[i]
                      << "' is no profile x shape x floor of GoldenProfiles.hpp; " << regenerate;
    } else if (found->second != lines[i]) {
      if (++differ <= 20)
        ADD_FAILURE() << where << ": the table says '" << lines[i] << "', resolve picks '"
                      << found->second << "' now; " << regenerate;
    }
  }
  EXPECT_EQ(differ, 0) << "rows whose decision changed (the first 20 named above); " << regenerate;
  EXPECT_EQ(unknown, 0) << "rows of no profile x shape x floor; " << regenerate;
}

TEST(DispatchGolden, CoversEveryProfileShapeAndFloor) {
  const std::vector<std::string> lines = read_lines();
  ASSERT_FALSE(lines.empty()) << "cannot read " << path;
  std::map<std::string, int> listed;
  std::set<std::string> profiles_listed;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    ++listed[key_of(lines[i])];
    profiles_listed.insert(lines[i].substr(0, lines[i].find(',')));
  }
  for (const Golden::Profile& p : Golden::profiles())
    EXPECT_EQ(profiles_listed.count(p.name), 1u)
        << path << " has no row of profile " << p.name << "; " << regenerate;
  int missing = 0, repeated = 0;
  for (const auto& row : rows_now()) {
    const auto found = listed.find(row.first);
    const int count = found == listed.end() ? 0 : found->second;
    if (count == 0 && ++missing <= 10)
      ADD_FAILURE() << path << " has no row for " << row.first << "; " << regenerate;
    if (count > 1 && ++repeated <= 10)
      ADD_FAILURE() << path << " lists " << row.first << " " << count << " times; " << regenerate;
  }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(repeated, 0);
  EXPECT_EQ(lines.size(), 1 + rows_now().size()) << path << ": a header and one row a case";
}

}  // namespace
