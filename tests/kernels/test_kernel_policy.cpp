// The kernel policy's names (both ways), its errors and its description (kernels/kernel_policy.h).
#include <gtest/gtest.h>

#include <string>

#include "kernels/kernel_policy.h"

namespace {

using mla::DenseMhaImpl;
using mla::DenseWgmmaDebug;
using mla::DenseWgmmaSchedule;
using mla::KernelPolicy;
using mla::SparseMqaImpl;

template <typename E>
E parsed(const char* text) {
  E v{};
  const mla::Status st = mla::parse(text, &v);
  EXPECT_TRUE(st.ok()) << text << ": " << st.message();
  return v;
}

TEST(KernelPolicy, NamesParseToTheirValues) {
  EXPECT_EQ(parsed<SparseMqaImpl>("auto"), SparseMqaImpl::kAuto);
  EXPECT_EQ(parsed<SparseMqaImpl>("crossover"), SparseMqaImpl::kCrossover);
  EXPECT_EQ(parsed<SparseMqaImpl>("wgmma"), SparseMqaImpl::kWgmma);
  EXPECT_EQ(parsed<SparseMqaImpl>("tc"), SparseMqaImpl::kTc);
  EXPECT_EQ(parsed<SparseMqaImpl>("simple"), SparseMqaImpl::kSimple);
  EXPECT_EQ(parsed<DenseMhaImpl>("wgmma"), DenseMhaImpl::kWgmma);
  EXPECT_EQ(parsed<DenseMhaImpl>("tc"), DenseMhaImpl::kTc);
  EXPECT_EQ(parsed<DenseMhaImpl>("simple"), DenseMhaImpl::kSimple);
  EXPECT_EQ(parsed<DenseWgmmaSchedule>("persistent"), DenseWgmmaSchedule::kPersistent);
  EXPECT_EQ(parsed<DenseWgmmaSchedule>("grid"), DenseWgmmaSchedule::kGrid);
  EXPECT_EQ(parsed<DenseWgmmaDebug>("off"), DenseWgmmaDebug::kNone);
  EXPECT_EQ(parsed<DenseWgmmaDebug>("scores"), DenseWgmmaDebug::kScores);
  EXPECT_EQ(parsed<DenseWgmmaDebug>("values"), DenseWgmmaDebug::kValues);
}

TEST(KernelPolicy, ToStringNamesEveryValue) {
  EXPECT_STREQ(to_string(SparseMqaImpl::kAuto), "auto");
  EXPECT_STREQ(to_string(SparseMqaImpl::kCrossover), "crossover");
  EXPECT_STREQ(to_string(SparseMqaImpl::kWgmma), "wgmma");
  EXPECT_STREQ(to_string(SparseMqaImpl::kTc), "tc");
  EXPECT_STREQ(to_string(SparseMqaImpl::kSimple), "simple");
  EXPECT_STREQ(to_string(DenseMhaImpl::kWgmma), "wgmma");
  EXPECT_STREQ(to_string(DenseMhaImpl::kTc), "tc");
  EXPECT_STREQ(to_string(DenseMhaImpl::kSimple), "simple");
  EXPECT_STREQ(to_string(DenseWgmmaSchedule::kPersistent), "persistent");
  EXPECT_STREQ(to_string(DenseWgmmaSchedule::kGrid), "grid");
  EXPECT_STREQ(to_string(DenseWgmmaDebug::kNone), "off");
  EXPECT_STREQ(to_string(DenseWgmmaDebug::kScores), "scores");
  EXPECT_STREQ(to_string(DenseWgmmaDebug::kValues), "values");
}

// An unknown name is an error that quotes it and lists the names; the output is left alone.
TEST(KernelPolicy, UnknownNamesAreErrors) {
  SparseMqaImpl sparse = SparseMqaImpl::kTc;
  mla::Status st = mla::parse("fastest", &sparse);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "unknown sparse MQA implementation 'fastest' (expected 'auto', 'crossover', 'wgmma', 'tc' or "
            "'simple')");
  EXPECT_EQ(sparse, SparseMqaImpl::kTc);

  DenseWgmmaSchedule schedule = DenseWgmmaSchedule::kGrid;
  st = mla::parse("gird", &schedule);
  EXPECT_EQ(st.message(), "unknown dense wgmma schedule 'gird' (expected 'persistent' or 'grid')");
  EXPECT_EQ(schedule, DenseWgmmaSchedule::kGrid);

  DenseMhaImpl dense = DenseMhaImpl::kWgmma;
  for (const char* bad : {"", "WGMMA", "tc ", " simple"}) {
    EXPECT_FALSE(mla::parse(bad, &dense).ok()) << "'" << bad << "'";
  }
  DenseWgmmaDebug debug = DenseWgmmaDebug::kNone;
  EXPECT_EQ(mla::parse("none", &debug).message(),
            "unknown dense wgmma debug output 'none' (expected 'off', 'scores' or 'values')");
}

TEST(KernelPolicy, DescribeListsEveryField) {
  EXPECT_EQ(describe(KernelPolicy{}),
            "sparse_mqa=auto dense_mha=wgmma dense_wgmma_schedule=persistent dense_wgmma_debug=off "
            "dense_wgmma_max_ctas=none sync_each=0");
  KernelPolicy p;
  p.sparse_mqa = SparseMqaImpl::kSimple;
  p.dense_mha = DenseMhaImpl::kTc;
  p.dense_wgmma_schedule = DenseWgmmaSchedule::kGrid;
  p.dense_wgmma_debug = DenseWgmmaDebug::kValues;
  p.dense_wgmma_max_ctas = 3;
  p.sync_each = true;
  EXPECT_EQ(describe(p),
            "sparse_mqa=simple dense_mha=tc dense_wgmma_schedule=grid dense_wgmma_debug=values "
            "dense_wgmma_max_ctas=3 sync_each=1");
}

// What a backend records: the implementations that run, and the requested ones where they differ.
TEST(KernelPolicy, DescribeWithFallbacksNamesTheRequest) {
  KernelPolicy p;
  p.sparse_mqa = SparseMqaImpl::kWgmma;
  EXPECT_EQ(describe(p, SparseMqaImpl::kWgmma, DenseMhaImpl::kWgmma), describe(p));
  EXPECT_EQ(describe(p, SparseMqaImpl::kTc, DenseMhaImpl::kTc),
            "sparse_mqa=tc dense_mha=tc dense_wgmma_schedule=persistent dense_wgmma_debug=off "
            "dense_wgmma_max_ctas=none sync_each=0 sparse_mqa_requested=wgmma dense_mha_requested=wgmma");
  EXPECT_EQ(describe(p, SparseMqaImpl::kWgmma, DenseMhaImpl::kSimple),
            "sparse_mqa=wgmma dense_mha=simple dense_wgmma_schedule=persistent dense_wgmma_debug=off "
            "dense_wgmma_max_ctas=none sync_each=0 dense_mha_requested=wgmma");
  // The default `auto` is a request, never what runs: it is always named beside the result.
  EXPECT_EQ(describe(KernelPolicy{}, SparseMqaImpl::kCrossover, DenseMhaImpl::kWgmma),
            "sparse_mqa=crossover dense_mha=wgmma dense_wgmma_schedule=persistent dense_wgmma_debug=off "
            "dense_wgmma_max_ctas=none sync_each=0 sparse_mqa_requested=auto");
}

}  // namespace
