// The baselines `folio bench serve` measures the engine against, plugged in
// through engine::EnginePolicies; production code carries no trace of them.
//
// - GatherAttention: attention as an engine whose kernel cannot read pages
//   does it: every layer, every sequence's live K/V rows are first copied
//   into a dense [batch, kv_heads, max_context, head_dim] tensor, and the
//   same kernel runs on that (one page per sequence). Same bits as the
//   direct path; it pays the copy.
// - MaxLengthReservation: admission as an engine that keeps each sequence's
//   K/V in one contiguous reservation must do it: a request is admitted only
//   when the pool can hold its whole maximum length (prompt + max_tokens),
//   so reservations never exceed the pool and nothing is ever preempted.
#ifndef FOLIO_BENCH_ENGINE_BASELINES_H_
#define FOLIO_BENCH_ENGINE_BASELINES_H_

#include <cstdint>

#include "folio/core/aligned_buffer.h"
#include "folio/engine/scheduler.h"
#include "folio/model/decoder.h"

namespace folio::bench {

class GatherAttention final : public model::PagedAttentionPath {
 public:
  // pool (optional) spreads the copy and the kernel; it must outlive this.
  explicit GatherAttention(ThreadPool* pool = nullptr) : pool_(pool) {}
  Status Attend(const attention::PagedAttentionParams& params, std::span<const float> q,
                const kv::PagedKvCache& cache, uint64_t layer, const kv::BatchMetadata& meta,
                std::span<float> out) override;
  // K/V bytes copied so far.
  uint64_t kv_copy_bytes() const { return kv_copy_bytes_; }

 private:
  // The dense tensors, grown when a step needs more and otherwise reused (a
  // dense engine keeps its batch buffers too, so the baseline pays the
  // copy, not an allocation and first touch per layer).
  ThreadPool* pool_;
  AlignedBuffer keys_, values_;  // [batch, kv_heads, max_context, head_dim]
  uint64_t kv_copy_bytes_ = 0;
};

class MaxLengthReservation final : public engine::AdmissionPolicy {
 public:
  explicit MaxLengthReservation(uint64_t page_size) : page_size_(page_size) {}
  bool CanAdmit(const engine::AdmissionQuery& q) const override {
    return reserved_pages_ + Reservation(q.sequence) <= q.num_pages;
  }
  void OnAdmit(const engine::Sequence& s) override;
  void OnRelease(const engine::Sequence& s) override { reserved_pages_ -= Reservation(s); }
  // Pages reserved by the admitted sequences now, and at most so far.
  uint64_t reserved_pages() const { return reserved_pages_; }
  uint64_t peak_reserved_pages() const { return peak_reserved_pages_; }

 private:
  // Pages a sequence's maximum length takes (its last token is never fed).
  uint64_t Reservation(const engine::Sequence& s) const {
    return (s.num_prompt_tokens + s.max_tokens - 1 + page_size_ - 1) / page_size_;
  }
  uint64_t page_size_;
  uint64_t reserved_pages_ = 0;
  uint64_t peak_reserved_pages_ = 0;
};

}  // namespace folio::bench

#endif  // FOLIO_BENCH_ENGINE_BASELINES_H_
