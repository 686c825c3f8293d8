#include "bench/engine_baselines.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "folio/engine/engine.h"
#include "testing/engine_drive.h"
#include "testing/test_model.h"

namespace folio::bench {
namespace {

using test_support::Drive;
using test_support::InOrder;
using test_support::SampledWithLogprobs;
using test_support::TestModel;

const std::vector<std::vector<int32_t>>& kPrompts = test_support::TestPrompts();

TEST(GatherAttention, GivesTheSameTokensAndLogprobBitsAndCountsCopies) {
  auto direct = *engine::Engine::Create(TestModel(), {});
  auto gather = std::make_shared<GatherAttention>();
  auto copying = *engine::Engine::Create(TestModel(), {}, nullptr, nullptr, {nullptr, gather});
  EXPECT_EQ(Drive(copying, kPrompts, SampledWithLogprobs(), InOrder(kPrompts.size())),
            Drive(direct, kPrompts, SampledWithLogprobs(), InOrder(kPrompts.size())));
  EXPECT_GT(gather->kv_copy_bytes(), 0u);
}

// The contiguous-reservation baseline admits fewer sequences at once but
// never preempts, and its tokens are folio's.
TEST(MaxLengthReservation, NeverPreemptsAndKeepsTheTokens) {
  engine::EngineConfig tight;
  tight.page_size = 4;
  tight.num_pages = 9;           // cannot hold all four sequences at full length
  tight.prefix_caching = false;  // so every used page is a reserved one
  auto paged = *engine::Engine::Create(TestModel(), tight);
  const auto want = Drive(paged, kPrompts, SampledWithLogprobs(), InOrder(kPrompts.size()));
  EXPECT_GT(paged.stats().preemptions, 0u);

  auto reservation = std::make_shared<MaxLengthReservation>(tight.page_size);
  auto reserving =
      *engine::Engine::Create(TestModel(), tight, nullptr, nullptr, {reservation, nullptr});
  EXPECT_EQ(Drive(reserving, kPrompts, SampledWithLogprobs(), InOrder(kPrompts.size())), want);
  EXPECT_EQ(reserving.stats().preemptions, 0u);
  EXPECT_LE(reservation->peak_reserved_pages(), tight.num_pages);
  EXPECT_GE(reservation->peak_reserved_pages(), reserving.cache().pool().peak_used());
  EXPECT_LT(reserving.stats().peak_running, kPrompts.size());
  EXPECT_EQ(reservation->reserved_pages(), 0u);  // every admission released
}

}  // namespace
}  // namespace folio::bench
