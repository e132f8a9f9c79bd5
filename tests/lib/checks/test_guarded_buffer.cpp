#include "lib/checks/guarded_buffer.h"

#include <gtest/gtest.h>

#include <cstring>

namespace mla {
namespace {

TEST(GuardedBuffer, FreshGuardsAreIntact) {
  auto backend = make_host_backend();
  GuardedBuffer b(*backend, 1000);
  ASSERT_TRUE(b.status().ok()) << b.status().message();
  int64_t changed = -1;
  ASSERT_TRUE(b.guard_bytes_changed(&changed).ok());
  EXPECT_EQ(changed, 0);
}

TEST(GuardedBuffer, PayloadWritesLeaveGuardsIntact) {
  auto backend = make_host_backend();
  GuardedBuffer b(*backend, 1000);
  std::memset(b.data(), 0x00, 1000);  // host backend: the payload is host memory
  int64_t changed = -1;
  ASSERT_TRUE(b.guard_bytes_changed(&changed).ok());
  EXPECT_EQ(changed, 0);
}

TEST(GuardedBuffer, OneByteOverrunIsCaught) {
  auto backend = make_host_backend();
  GuardedBuffer b(*backend, 1000);  // not a multiple of the 256-byte rounding: no slack allowed
  static_cast<uint8_t*>(b.data())[1000] ^= 0xFF;
  int64_t changed = 0;
  ASSERT_TRUE(b.guard_bytes_changed(&changed).ok());
  EXPECT_EQ(changed, 1);
}

TEST(GuardedBuffer, UnderrunIsCaught) {
  auto backend = make_host_backend();
  GuardedBuffer b(*backend, 64);
  static_cast<uint8_t*>(b.data())[-3] ^= 0x01;
  int64_t changed = 0;
  ASSERT_TRUE(b.guard_bytes_changed(&changed).ok());
  EXPECT_EQ(changed, 1);
}

TEST(GuardedBuffer, LargeAfterGuardAbsorbsLongOverrun) {
  auto backend = make_host_backend();
  GuardedBuffer b(*backend, 128, GuardedBuffer::kDefaultGuardBytes, 1 << 16);
  std::memset(static_cast<uint8_t*>(b.data()) + 128, 0, 60000);
  int64_t changed = 0;
  ASSERT_TRUE(b.guard_bytes_changed(&changed).ok());
  EXPECT_GT(changed, 59000);  // a few pattern bytes may happen to be zero
}

TEST(GuardedBuffer, UploadFillDownloadRoundTrip) {
  auto backend = make_host_backend();
  GuardedBuffer b(*backend, 16);
  ASSERT_TRUE(b.fill(0x5A).ok());
  std::vector<uint8_t> got;
  ASSERT_TRUE(b.download(got).ok());
  EXPECT_EQ(got, std::vector<uint8_t>(16, 0x5A));
  const std::vector<uint8_t> src = {1, 2, 3};
  ASSERT_TRUE(b.upload(src.data(), src.size()).ok());
  ASSERT_TRUE(b.download(got).ok());
  EXPECT_EQ(got[2], 3);
  EXPECT_EQ(got[3], 0x5A);
  EXPECT_FALSE(b.upload(got.data(), 17).ok());
}

}  // namespace
}  // namespace mla
