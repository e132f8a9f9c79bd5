// mla-bench's untimed preamble (apps/mla_bench/l2_flush.h): the lead's range, and on a GPU that the
// lead holds the stream for at least its cycles at the device's peak clock (clock64 cannot count
// faster), where no lead leaves only the read.
#include "apps/mla_bench/l2_flush.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "apps/mla_bench/device_timer.h"
#include "kernels/backend.h"
#include "tests/kernels/cuda/require_cuda.h"

#if defined(MLA_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

namespace mla::bench {
namespace {

TEST(L2FlushLead, ACountOutsideItsRangeIsRefused) {
  const std::unique_ptr<Backend> host = make_host_backend();
  std::unique_ptr<L2Flusher> f;
  const Status below = L2Flusher::create(*host, nullptr, -1, &f);
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.message().find("lead of -1 cycles"), std::string::npos) << below.message();
  const Status above = L2Flusher::create(*host, nullptr, L2Flusher::kMaxLeadCycles + 1, &f);
  ASSERT_FALSE(above.ok());
  EXPECT_NE(above.message().find("outside [0, " + std::to_string(L2Flusher::kMaxLeadCycles) + "]"), std::string::npos)
      << above.message();
  for (const int64_t ok : {int64_t{0}, L2Flusher::kDefaultLeadCycles, L2Flusher::kMaxLeadCycles}) {
    ASSERT_TRUE(L2Flusher::create(*host, nullptr, ok, &f).ok()) << ok;
    EXPECT_EQ(f->lead_cycles(), 0) << "the host has no stream: no lead";
    EXPECT_TRUE(f->flush().ok());
  }
}

TEST(L2FlushLead, TheLeadHoldsTheStreamForItsCycles) {
#if defined(MLA_HAVE_CUDA)
  std::string why;
  if (!cuda_backend_available(&why)) MLA_SKIP_WITHOUT_CUDA() << "CUDA backend unavailable: " << why;
  const std::unique_ptr<Backend> cuda = make_cuda_backend(KernelPolicy{}, &why);
  ASSERT_NE(cuda, nullptr) << why;
  std::unique_ptr<DeviceTimer> timer;
  ASSERT_TRUE(DeviceTimer::create(*cuda, &timer).ok());
  int device = 0, peak_khz = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&peak_khz, cudaDevAttrClockRate, device), cudaSuccess);
  ASSERT_GT(peak_khz, 0);
  constexpr int64_t kLead = 40'000'000;  // about 20 ms at 1.98 GHz
  const double lead_s = static_cast<double>(kLead) / (1e3 * peak_khz);
  std::unique_ptr<L2Flusher> with_lead, without_lead;
  ASSERT_TRUE(L2Flusher::create(*cuda, timer->stream(), kLead, &with_lead).ok());
  ASSERT_TRUE(L2Flusher::create(*cuda, timer->stream(), 0, &without_lead).ok());
  EXPECT_EQ(with_lead->lead_cycles(), kLead);
  EXPECT_EQ(without_lead->lead_cycles(), 0);
  // Seconds from the start event to the stop event around one flush() (warmed up once).
  auto time_flush = [&](L2Flusher& f) {
    EXPECT_TRUE(f.flush().ok());
    EXPECT_TRUE(timer->start().ok());
    EXPECT_TRUE(f.flush().ok());
    double s = 0.0;
    EXPECT_TRUE(timer->stop(&s).ok());
    return s;
  };
  const double with = time_flush(*with_lead);
  const double without = time_flush(*without_lead);
  EXPECT_GE(with, lead_s * (1.0 - 1e-3)) << "peak clock " << peak_khz << " kHz";
  // 0 is no lead: the read alone (~37 us on an H200) is far below the 20 ms lead.
  EXPECT_LT(without, 0.5 * lead_s) << "a lead of 0 cycles took " << without << " s";
#else
  MLA_SKIP_WITHOUT_CUDA() << "this build has no CUDA backend";
#endif
}

}  // namespace
}  // namespace mla::bench
