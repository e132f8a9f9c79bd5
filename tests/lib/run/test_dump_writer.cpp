// lib/run/npy and lib/run/dump_writer: the .npy 1.0 header, and --dump's files, index and cap.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/run/dump_writer.h"
#include "lib/run/npy.h"
#include "tests/common/temp_dir.h"

namespace mla {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(Npy, HeaderIsVersionOneAlignedTo64WithAPythonDict) {
  const std::string h = npy_header("<i4", {3, 5});
  ASSERT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t len = static_cast<unsigned char>(h[8]) | static_cast<unsigned char>(h[9]) << 8;
  EXPECT_EQ(len + 10, h.size());
  EXPECT_EQ(h.back(), '\n');
  EXPECT_EQ(h.substr(10, h.find('}') - 9), "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 5), }");
  EXPECT_NE(npy_header("|u1", {7}).find("'shape': (7,)"), std::string::npos);
  EXPECT_NE(npy_header("<f8", {}).find("'shape': ()"), std::string::npos);
}

TEST(Npy, WritesHeaderThenTheBytes) {
  test::TempDir dir;
  const std::vector<int32_t> v = {1, -2, 3, INT32_MAX};
  const std::string path = dir.path() + "/a.npy";
  ASSERT_TRUE(write_npy(path, "<i4", {2, 2}, v.data(), v.size() * 4).ok());
  const std::string text = read_all(path);
  const std::string header = npy_header("<i4", {2, 2});
  ASSERT_EQ(text.size(), header.size() + 16);
  EXPECT_EQ(text.substr(0, header.size()), header);
  EXPECT_EQ(std::memcmp(text.data() + header.size(), v.data(), 16), 0);
  EXPECT_FALSE(write_npy(dir.path() + "/no/such/dir/a.npy", "<i4", {1}, v.data(), 4).ok());
}

TEST(DirectoryDump, WritesFilesAndAnIndexWithVerdicts) {
  test::TempDir dir;
  DirectoryDump dump(DumpOptions{dir.path(), 1 << 20}, "scen", nlohmann::json{{"scenario", "scen"}});
  const std::vector<int32_t> idx = {5, -1, 7, 2};
  const std::vector<uint16_t> bf16 = {0x3F80, 0x7FC0};
  dump.begin_check("convert/case[0]/rank1");
  dump_array(&dump, "indices", DumpRole::kInput, "picks", {2, 2}, idx);
  dump_array(&dump, "out", DumpRole::kOutput, "slots", {2}, bf16);
  dump_param(&dump, "block_size", 16);
  CheckResult r;
  r.id = "convert/case[0]/rank1";
  r.check = "convert";
  r.verdict = Verdict::kFail;
  r.reason = "differs";
  dump.end_check(r);
  EXPECT_TRUE(r.notes.empty());
  const std::string base = dir.path() + "/scen/";
  EXPECT_TRUE(fs::exists(base + "convert/case_0_/rank1/input/indices.npy"));
  EXPECT_TRUE(fs::exists(base + "convert/case_0_/rank1/output/out.npy"));
  const nlohmann::json index = nlohmann::json::parse(read_all(base + "index.json"));
  EXPECT_EQ(index.at("schema"), kDumpIndexSchema);
  EXPECT_EQ(index.at("scenario"), "scen");
  EXPECT_EQ(index.at("bytes_written"), 16 + 4);
  const nlohmann::json& c = index.at("checks").at(0);
  EXPECT_EQ(c.at("id"), "convert/case[0]/rank1");
  EXPECT_EQ(c.at("verdict"), "FAIL");
  EXPECT_EQ(c.at("reason"), "differs");
  EXPECT_EQ(c.at("params").at("block_size"), 16.0);
  EXPECT_EQ(c.at("arrays").at(0).at("file"), "convert/case_0_/rank1/input/indices.npy");
  EXPECT_EQ(c.at("arrays").at(0).at("shape"), nlohmann::json::array({2, 2}));
  EXPECT_EQ(c.at("arrays").at(0).at("dtype"), "<i4");
  EXPECT_EQ(c.at("arrays").at(1).at("element"), "bf16");
  EXPECT_EQ(c.at("arrays").at(1).at("dtype"), "<u2");
}

TEST(DirectoryDump, LargeArraysWithTheSameBytesAreWrittenOnce) {
  test::TempDir dir;
  DirectoryDump dump(DumpOptions{dir.path(), int64_t{1} << 30}, "s", nlohmann::json::object());
  const std::vector<uint8_t> cache(kDumpSharedMinBytes, 0xFF);
  for (const char* id : {"a", "b"}) {
    dump.begin_check(id);
    dump_array(&dump, "cache", DumpRole::kInput, "pool", {static_cast<int64_t>(cache.size())}, cache);
    CheckResult r;
    dump.end_check(r);
  }
  EXPECT_EQ(dump.bytes_written(), static_cast<int64_t>(cache.size()));
  const nlohmann::json& second = dump.index().at("checks").at(1).at("arrays").at(0);
  EXPECT_EQ(second.at("file"), "a/input/cache.npy");
  EXPECT_TRUE(second.at("same_as_earlier").get<bool>());
  EXPECT_FALSE(fs::exists(dir.path() + "/s/b/input/cache.npy"));
}

TEST(DirectoryDump, TheCapLeavesArraysOutAndSaysSo) {
  test::TempDir dir;
  DirectoryDump dump(DumpOptions{dir.path(), 100}, "s", nlohmann::json::object());
  const std::vector<double> small(10, 1.0), big(20, 2.0);
  dump.begin_check("c");
  dump_array(&dump, "small", DumpRole::kInput, "fits", {10}, small);
  dump_array(&dump, "big", DumpRole::kOutput, "does not fit", {20}, big);
  CheckResult r;
  dump.end_check(r);
  EXPECT_EQ(dump.bytes_written(), 80);
  EXPECT_TRUE(fs::exists(dir.path() + "/s/c/input/small.npy"));
  EXPECT_FALSE(fs::exists(dir.path() + "/s/c/output/big.npy"));
  const nlohmann::json& left = dump.index().at("checks").at(0).at("left_out");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left.at(0).at("name"), "big");
  EXPECT_EQ(left.at(0).at("bytes"), 160);
  EXPECT_NE(left.at(0).at("why").get<std::string>().find("--dump-max-bytes"), std::string::npos);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0].rfind("--dump: 1 arrays", 0), 0u) << r.notes[0];
  EXPECT_NE(r.notes[0].find("--dump-max-bytes"), std::string::npos) << r.notes[0];
}

TEST(DumpPath, IdsBecomeSafeDirectories) {
  EXPECT_EQ(dump_path_of("gather/ctx[1]"), "gather/ctx_1_");
  EXPECT_EQ(dump_path_of("dcp/4_ranks"), "dcp/4_ranks");
  EXPECT_EQ(dump_path_of("../x//y/."), "__/x/_/y/_");
  EXPECT_EQ(dump_path_of("a b"), "a_b");
}

}  // namespace
}  // namespace mla
