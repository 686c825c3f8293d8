#include "folio/kv/paged_kv_cache.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_set>

#include "folio/core/checked_math.h"
#include "folio/kv/host_kv_storage.h"

namespace folio::kv {
namespace {

constexpr uint64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

void CheckOk(const Status& s) { FOLIO_CHECK(s.ok(), s.ToString()); }

std::string Str(uint64_t v) { return std::to_string(v); }

Status UnknownSeq(const char* op, SeqId seq) {
  return Status::NotFound(std::string(op) + ": unknown sequence " + Str(seq));
}

}  // namespace

std::span<const int64_t> AppendPlan::slot_mapping(uint64_t group) const {
  FOLIO_CHECK(group < slot_mappings_.size(), "group=", group);
  return slot_mappings_[group];
}

Result<PagedKvCache> PagedKvCache::Create(PagedKvCacheConfig c,
                                          std::unique_ptr<KvStorage> storage) {
  FOLIO_RETURN_IF_ERROR(ValidateConfig(c));
  const KvStorageShape want = StorageShape(c);
  if (storage == nullptr) {
    FOLIO_ASSIGN_OR_RETURN(storage, MakeHostKvStorage(want));
  }
  const KvStorageShape& got = storage->shape();
  const std::pair<const char*, std::pair<uint64_t, uint64_t>> dims[] = {
      {"num_storage_slots", {got.num_storage_slots, want.num_storage_slots}},
      {"num_pages", {got.num_pages, want.num_pages}},
      {"num_kv_heads", {got.num_kv_heads, want.num_kv_heads}},
      {"page_size", {got.page_size, want.page_size}},
      {"head_dim", {got.head_dim, want.head_dim}}};
  for (const auto& [name, v] : dims) {
    if (v.first != v.second) {
      return Status::InvalidArgument("KV storage " + std::string(name) + " " + Str(v.first) +
                                     " differs from the cache's " + Str(v.second));
    }
  }
  if (got.dtype != want.dtype) {
    return Status::InvalidArgument("KV storage dtype " + std::string(DTypeName(got.dtype)) +
                                   " differs from the cache's " +
                                   std::string(DTypeName(want.dtype)));
  }
  return PagedKvCache(std::move(c), std::move(storage));
}

PagedKvCache::PagedKvCache(PagedKvCacheConfig config, std::unique_ptr<KvStorage> storage)
    : config_(std::move(config)),
      storage_(std::move(storage)),
      pool_(config_.num_pages),
      groups_(GroupLayers(config_)),
      group_of_(config_.num_layers),
      slot_of_(config_.num_layers),
      holds_(config_.num_pages, 0) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t s = 0; s < groups_[g].layers.size(); ++s) {
      group_of_[groups_[g].layers[s]] = g;
      slot_of_[groups_[g].layers[s]] = s;
    }
  }
}

PagedKvView PagedKvCache::View(uint64_t layer) const { return storage_->View(storage_slot(layer)); }

uint64_t PagedKvCache::storage_slot(uint64_t layer) const {
  FOLIO_CHECK(layer < config_.num_layers, "layer=", layer);
  return slot_of_[layer];
}

uint64_t PagedKvCache::group_of(uint64_t layer) const {
  FOLIO_CHECK(layer < config_.num_layers, "layer=", layer);
  return group_of_[layer];
}

uint64_t PagedKvCache::FirstKept(uint64_t window, uint64_t length) const {
  const uint64_t reach = window + config_.window_margin;
  return window != 0 && length + 1 > reach ? length + 1 - reach : 0;
}

PagedKvCache::Sequence PagedKvCache::NewSequence() const {
  Sequence s;
  s.tables.resize(groups_.size());
  s.released.assign(groups_.size(), 0);
  return s;
}

SeqId PagedKvCache::AddSequence() {
  seqs_.emplace(next_seq_id_, NewSequence());
  return next_seq_id_++;
}

Result<SeqId> PagedKvCache::AddSequence(std::span<const PageId> pages, uint64_t length) {
  if (groups_.size() != 1) {
    return Status::InvalidArgument("a sequence over one block table; the cache has " +
                                   Str(groups_.size()) + " layer groups");
  }
  const std::vector<PageId> table(pages.begin(), pages.end());
  return AddSequence(std::span<const std::vector<PageId>>(&table, 1), length);
}

Result<SeqId> PagedKvCache::AddSequence(std::span<const std::vector<PageId>> tables,
                                        uint64_t length) {
  FOLIO_RETURN_IF_ERROR(CheckNoPlan("a sequence over existing pages"));
  if (tables.size() != groups_.size()) {
    return Status::InvalidArgument(Str(tables.size()) + " block tables for " + Str(groups_.size()) +
                                   " layer groups");
  }
  Sequence s = NewSequence();
  s.length = length;
  std::unordered_set<PageId> seen;
  for (size_t g = 0; g < tables.size(); ++g) {
    const std::vector<PageId>& table = tables[g];
    const std::string in = groups_.size() == 1 ? "" : " of layer group " + Str(g);
    if (CeilDiv(length, config_.page_size) != table.size()) {
      return Status::InvalidArgument(Str(length) + " tokens do not fill exactly " +
                                     Str(table.size()) + " pages of " + Str(config_.page_size) +
                                     in);
    }
    const uint64_t may_release = FirstKept(groups_[g].window, length) / config_.page_size;
    for (size_t i = 0; i < table.size(); ++i) {
      const PageId page = table[i];
      if (page == -1 && i == s.released[g] && i < may_release) {
        ++s.released[g];
        continue;
      }
      if (page == -1) {
        return Status::InvalidArgument("prefix page " + Str(i) + in +
                                       " is -1, but the next query sees it");
      }
      if (page < 0 || static_cast<uint64_t>(page) >= config_.num_pages) {
        return Status::OutOfRange("prefix page " + Str(i) + in + " has id " + std::to_string(page) +
                                  " outside [0, " + Str(config_.num_pages) + ")");
      }
      if (pool_.refcount(page) == 0) {
        return Status::FailedPrecondition("prefix page " + Str(i) + in + " (page " +
                                          std::to_string(page) + ") is free");
      }
      if (!seen.insert(page).second) {
        return Status::FailedPrecondition("prefix lists page " + std::to_string(page) + " twice");
      }
    }
    s.tables[g] = table;
  }
  for (const auto& table : s.tables) {
    for (const PageId page : table) {
      if (page != -1) Ref(page);
    }
  }
  seqs_.emplace(next_seq_id_, std::move(s));
  return next_seq_id_++;
}

Result<SeqId> PagedKvCache::AddPlacedSequence(std::vector<PageId> placement) {
  FOLIO_RETURN_IF_ERROR(CheckNoPlan("a placed sequence"));
  if (groups_.size() != 1) {
    return Status::FailedPrecondition(
        "a placed sequence needs a cache of one layer group (it has " + Str(groups_.size()) + ")");
  }
  std::unordered_set<PageId> seen;
  for (size_t i = 0; i < placement.size(); ++i) {
    const PageId page = placement[i];
    if (page < 0 || static_cast<uint64_t>(page) >= config_.num_pages) {
      return Status::OutOfRange("placement page " + Str(i) + " has id " + std::to_string(page) +
                                " outside [0, " + Str(config_.num_pages) + ")");
    }
    if (!seen.insert(page).second) {
      return Status::InvalidArgument("placement lists page " + std::to_string(page) + " twice");
    }
  }
  Sequence s = NewSequence();
  s.placement = std::move(placement);
  seqs_.emplace(next_seq_id_, std::move(s));
  return next_seq_id_++;
}

Status PagedKvCache::HoldPage(PageId page) {
  FOLIO_RETURN_IF_ERROR(CheckNoPlan("hold of page " + std::to_string(page)));
  const bool was = page >= 0 && static_cast<uint64_t>(page) < config_.num_pages && HeldOnly(page);
  FOLIO_RETURN_IF_ERROR(pool_.Retain(page));  // range and liveness checks
  ++holds_[static_cast<size_t>(page)];
  CountHeldOnly(was, page);
  return Status::Ok();
}

Status PagedKvCache::DropPage(PageId page) {
  FOLIO_RETURN_IF_ERROR(CheckNoPlan("drop of page " + std::to_string(page)));
  if (page < 0 || static_cast<uint64_t>(page) >= config_.num_pages) {
    return Status::OutOfRange("drop of page " + std::to_string(page) + " outside [0, " +
                              Str(config_.num_pages) + ")");
  }
  if (holds_[static_cast<size_t>(page)] == 0) {
    return Status::FailedPrecondition("drop of page " + std::to_string(page) +
                                      ", which has no hold");
  }
  const bool was = HeldOnly(page);
  CheckOk(pool_.Release(page));
  --holds_[static_cast<size_t>(page)];
  CountHeldOnly(was, page);
  return Status::Ok();
}

Result<std::optional<std::vector<PageId>>> PagedKvCache::HoldNewPages(uint64_t n) {
  FOLIO_RETURN_IF_ERROR(CheckNoPlan("allocation of " + Str(n) + " pages"));
  std::optional<std::vector<PageId>> pages = pool_.TryAllocate(n);
  if (pages) {
    for (const PageId page : *pages) {
      ++holds_[static_cast<size_t>(page)];
      ++held_only_;  // refcount 1, its one hold
    }
  }
  return pages;
}

void PagedKvCache::CheckPageArgs(uint64_t layer, PageId page) const {
  FOLIO_CHECK(
      layer < config_.num_layers && page >= 0 && static_cast<uint64_t>(page) < config_.num_pages,
      "layer=", layer, " page=", page);
}

Status PagedKvCache::CheckPageWritable(PageId page, const std::string& what) const {
  FOLIO_RETURN_IF_ERROR(CheckNoPlan(what));
  if (pool_.refcount(page) != 1) {
    return Status::FailedPrecondition(what + " with " + Str(pool_.refcount(page)) +
                                      " references (needs exactly its writer's)");
  }
  return Status::Ok();
}

void PagedKvCache::ReadPageTokenMajor(uint64_t layer, KvRole role, PageId page, uint64_t live_slots,
                                      std::span<std::byte> out) const {
  CheckPageArgs(layer, page);
  storage_->ReadPageTokenMajor(slot_of_[layer], role, page, live_slots, out);
}

Status PagedKvCache::WritePageTokenMajor(uint64_t layer, KvRole role, PageId page,
                                         std::span<const std::byte> in) {
  CheckPageArgs(layer, page);
  FOLIO_CHECK(in.size() == page_bytes(), "in holds ", in.size(), " bytes of ", page_bytes());
  FOLIO_RETURN_IF_ERROR(CheckPageWritable(page, "write of page " + std::to_string(page)));
  storage_->WritePageTokenMajor(slot_of_[layer], role, page, in);
  return Status::Ok();
}

void PagedKvCache::ReadPageScales(uint64_t layer, KvRole role, PageId page, uint64_t live_slots,
                                  std::span<float> out) const {
  CheckPageArgs(layer, page);
  storage_->ReadPageScales(slot_of_[layer], role, page, live_slots, out);
}

Status PagedKvCache::WritePageScales(uint64_t layer, KvRole role, PageId page,
                                     std::span<const float> in) {
  CheckPageArgs(layer, page);
  FOLIO_CHECK(IsQuantized(config_.dtype) && in.size() == storage_->shape().scales_per_page(),
              "page=", page, " in=", in.size());
  FOLIO_RETURN_IF_ERROR(
      CheckPageWritable(page, "write of page " + std::to_string(page) + "'s scales"));
  return storage_->WritePageScales(slot_of_[layer], role, page, in);
}

bool PagedKvCache::HeldOnly(PageId page) const {
  const uint32_t h = holds_[static_cast<size_t>(page)];
  return h > 0 && h == pool_.refcount(page);
}

void PagedKvCache::CountHeldOnly(bool was, PageId page) {
  const bool now = HeldOnly(page);
  if (now && !was) ++held_only_;
  if (was && !now) --held_only_;
}

void PagedKvCache::Ref(PageId page) {
  const bool was = HeldOnly(page);
  CheckOk(pool_.Retain(page));
  CountHeldOnly(was, page);
}

void PagedKvCache::Unref(PageId page) {
  const bool was = HeldOnly(page);
  CheckOk(pool_.Release(page));
  CountHeldOnly(was, page);
}

uint32_t PagedKvCache::holds(PageId page) const {
  FOLIO_CHECK(page >= 0 && static_cast<uint64_t>(page) < config_.num_pages, "page=", page);
  return holds_[static_cast<size_t>(page)];
}

Result<SeqId> PagedKvCache::Fork(SeqId seq) {
  FOLIO_RETURN_IF_ERROR(CheckNoPlan("fork of sequence " + Str(seq)));
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return UnknownSeq("fork", seq);
  Sequence child = it->second;
  child.placement.clear();  // the parent's pages are its own to claim
  for (const auto& table : child.tables) {
    for (const PageId page : table) {
      if (page != -1) Ref(page);
    }
  }
  seqs_.emplace(next_seq_id_, std::move(child));
  return next_seq_id_++;
}

Status PagedKvCache::Release(SeqId seq) {
  FOLIO_RETURN_IF_ERROR(CheckNoPlan("release of sequence " + Str(seq)));
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return UnknownSeq("release", seq);
  for (const auto& table : it->second.tables) {
    for (auto page = table.rbegin(); page != table.rend(); ++page) {
      if (*page != -1) Unref(*page);
    }
  }
  seqs_.erase(it);
  return Status::Ok();
}

Status PagedKvCache::Truncate(SeqId seq, uint64_t length) {
  FOLIO_RETURN_IF_ERROR(CheckNoPlan("truncation of sequence " + Str(seq)));
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return UnknownSeq("truncate", seq);
  Sequence& s = it->second;
  if (length > s.length) {
    return Status::OutOfRange("cannot truncate sequence " + Str(seq) + " of " + Str(s.length) +
                              " tokens to " + Str(length));
  }
  const uint64_t keep = CeilDiv(length, config_.page_size);
  for (size_t g = 0; g < groups_.size(); ++g) {
    const uint64_t window = groups_[g].window;
    const uint64_t first = window != 0 && length + 1 > window ? length + 1 - window : 0;
    if (length > 0 && s.tables[g][first / config_.page_size] == -1) {
      return Status::FailedPrecondition(
          "cannot truncate sequence " + Str(seq) + " to " + Str(length) + " tokens: layer group " +
          Str(g) + " (window " + Str(groups_[g].window) + ") released position " + Str(first) +
          ", which its next query would see");
    }
  }
  for (auto& table : s.tables) {
    for (; table.size() > keep; table.pop_back()) Unref(table.back());
  }
  s.length = length;
  return Status::Ok();
}

const PagedKvCache::Sequence& PagedKvCache::Find(SeqId seq) const {
  const auto it = seqs_.find(seq);
  FOLIO_CHECK(it != seqs_.end(), "unknown sequence ", seq);
  return it->second;
}

uint64_t PagedKvCache::length(SeqId seq) const { return Find(seq).length; }

std::span<const PageId> PagedKvCache::block_table(SeqId seq, uint64_t group) const {
  FOLIO_CHECK(group < groups_.size(), "group=", group);
  return Find(seq).tables[group];
}

Result<std::vector<PagedKvCache::Decision>> PagedKvCache::Decide(
    std::span<const std::pair<SeqId, uint64_t>> requests) {
  FOLIO_RETURN_IF_ERROR(CheckNoPlan("PrepareAppend"));
  const uint64_t page_size = config_.page_size;
  std::vector<Decision> decisions;
  decisions.reserve(requests.size());
  std::unordered_set<SeqId> seen;
  // References that earlier requests of this step move off a shared tail:
  // once all other sharers have copied, the last one may write in place.
  std::unordered_map<PageId, uint32_t> moved_off;
  for (const auto& [id, n] : requests) {
    const auto it = seqs_.find(id);
    if (it == seqs_.end()) return UnknownSeq("PrepareAppend", id);
    if (!seen.insert(id).second) {
      return Status::InvalidArgument("PrepareAppend: sequence " + Str(id) +
                                     " is listed twice in one step");
    }
    Sequence& seq = it->second;
    if (n > kMaxInt32 - seq.length) {
      return Status::OutOfRange("PrepareAppend: sequence " + Str(id) + " of length " +
                                Str(seq.length) + " plus " + Str(n) + " tokens exceeds INT32_MAX");
    }
    Decision d{&seq, std::vector<uint8_t>(groups_.size(), 0), 0};
    if (n > 0) {
      const uint64_t used = seq.length % page_size;
      uint64_t room = 0;
      if (used != 0) {
        for (size_t g = 0; g < groups_.size(); ++g) {
          const PageId tail = seq.tables[g].back();
          uint32_t& moved = moved_off[tail];
          d.copy_tail[g] = pool_.refcount(tail) - moved > 1;
          if (d.copy_tail[g]) ++moved;
        }
        room = page_size - used;
      }
      d.new_pages = n > room ? CeilDiv(n - room, page_size) : 0;
      const uint64_t pages = seq.tables[0].size();
      if (!seq.placement.empty() && pages + d.new_pages > seq.placement.size()) {
        return Status::OutOfRange("PrepareAppend: sequence " + Str(id) + " would need " +
                                  Str(pages + d.new_pages) + " pages; its placement " + "lists " +
                                  Str(seq.placement.size()));
      }
    }
    decisions.push_back(d);
  }
  return decisions;
}

Result<std::optional<AppendPlan>> PagedKvCache::PrepareAppend(
    std::span<const std::pair<SeqId, uint64_t>> requests) {
  FOLIO_ASSIGN_OR_RETURN(const std::vector<Decision> decisions, Decide(requests));
  uint64_t needed = 0;
  for (const Decision& d : decisions) {
    needed += d.new_pages * groups_.size();
    for (const uint8_t copy : d.copy_tail) needed += copy;
  }
  if (!pool_.CanAllocate(needed)) return std::optional<AppendPlan>();
  // Placed sequences' pages must be free, and claimed by one request only.
  std::unordered_set<PageId> to_claim;
  for (const Decision& d : decisions) {
    const Sequence& seq = *d.seq;
    if (seq.placement.empty()) continue;
    for (uint64_t k = 0; k < d.new_pages; ++k) {
      const PageId page = seq.placement[seq.tables[0].size() + k];
      if (pool_.refcount(page) != 0 || !to_claim.insert(page).second) {
        return std::optional<AppendPlan>();
      }
    }
  }

  // From here on nothing can fail: every page is known to be available.
  // Placed pages are claimed first, so that no other request's allocation
  // takes one of them.
  const uint64_t page_size = config_.page_size;
  AppendPlan plan;
  plan.id_ = next_plan_id_++;
  plan.slot_mappings_.resize(groups_.size());
  pool_.BeginJournal();
  for (const PageId page : to_claim) *pool_.TryClaim(page);
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto [id, n] = requests[i];
    const Decision& d = decisions[i];
    Sequence& seq = *d.seq;
    std::vector<AppendPlan::Undo> undo;
    for (size_t g = 0; g < groups_.size(); ++g) {
      std::vector<PageId>& table = seq.tables[g];
      undo.push_back({table.size(), -1});
      // The page before the tail is -1 when the window released it.
      const auto before_tail = [&] {
        return table.size() >= 2 && table[table.size() - 2] != -1 ? table[table.size() - 2] : -1;
      };
      if (d.copy_tail[g]) {
        const PageId shared = table.back();
        const PageId copy = *pool_.TryAllocateAfter(before_tail());
        storage_->CopyPage(shared, copy);
        Unref(shared);
        table.back() = copy;
        undo.back().cow_source = shared;
      }
      for (uint64_t k = 0; k < d.new_pages; ++k) {
        table.push_back(seq.placement.empty()
                            ? *pool_.TryAllocateAfter(table.empty() ? -1 : table.back())
                            : seq.placement[table.size()]);
      }
      if (seq.placement.empty() && (d.copy_tail[g] || d.new_pages > 0)) {
        const int64_t tail = table.back();
        const auto keep = std::clamp<int64_t>(static_cast<int64_t>(table.size() - seq.released[g]),
                                              kMinPagesKeptAfterTail, kMaxPagesKeptAfterTail);
        const auto end =
            std::min<int64_t>(tail + 1 + keep, static_cast<int64_t>(config_.num_pages));
        for (int64_t p = tail + 1; p < end; ++p) {
          pool_.Deprioritize(static_cast<PageId>(p));
        }
      }
      for (uint64_t pos = seq.length; pos < seq.length + n; ++pos) {
        const auto page = static_cast<uint64_t>(table[pos / page_size]);
        plan.slot_mappings_[g].push_back(static_cast<int64_t>(page * page_size + pos % page_size));
      }
    }
    plan.seqs_.push_back(id);
    plan.num_new_tokens_.push_back(n);
    plan.undo_.push_back(std::move(undo));
  }
  pending_plan_ = plan.id_;
  return std::optional<AppendPlan>(std::move(plan));
}

Status PagedKvCache::CheckNoPlan(const std::string& op) const {
  if (pending_plan_ == 0) return Status::Ok();
  return Status::FailedPrecondition(op + " while plan " + Str(pending_plan_) +
                                    " is pending (Commit or Abort it first)");
}

void PagedKvCache::CheckPending(const AppendPlan& plan) const {
  FOLIO_CHECK(plan.id_ != 0 && plan.id_ == pending_plan_, "plan ", plan.id_,
              " is not the pending plan ", pending_plan_);
}

std::vector<PageId> PagedKvCache::Commit(const AppendPlan& plan,
                                         std::span<const uint64_t> num_revocable) {
  CheckPending(plan);
  FOLIO_CHECK(num_revocable.empty() || num_revocable.size() == plan.seqs_.size(),
              "num_revocable holds ", num_revocable.size(), " counts for ", plan.seqs_.size(),
              " sequences");
  for (size_t i = 0; i < num_revocable.size(); ++i) {
    FOLIO_CHECK(num_revocable[i] <= plan.num_new_tokens_[i], "sequence ", plan.seqs_[i], ": ",
                num_revocable[i], " revocable of ", plan.num_new_tokens_[i], " new tokens");
  }
  pool_.EndJournal();
  pending_plan_ = 0;
  std::vector<PageId> released;
  for (size_t i = 0; i < plan.seqs_.size(); ++i) {
    Sequence& seq = seqs_.find(plan.seqs_[i])->second;
    seq.length += plan.num_new_tokens_[i];
    // The shortest length a later Truncate may leave: the next query sits
    // there or after it.
    const uint64_t floor =
        seq.length - (num_revocable.empty() ? plan.num_new_tokens_[i] : num_revocable[i]);
    for (size_t g = 0; g < groups_.size(); ++g) {
      const uint64_t end = FirstKept(groups_[g].window, floor) / config_.page_size;
      for (; seq.released[g] < end; ++seq.released[g]) {
        PageId& page = seq.tables[g][seq.released[g]];
        Unref(page);
        released.push_back(page);
        page = -1;
      }
    }
  }
  return released;
}

void PagedKvCache::Abort(AppendPlan&& plan) {
  CheckPending(plan);
  // Tables and shared references first, in reverse; then the pool undoes
  // its own journal (the pages taken go back to their places in the free
  // list, with refcount 0, and the moved ones return too). The pages the
  // plan took had one reference and no holds, so held-only counts are
  // unchanged by dropping them.
  for (size_t i = plan.seqs_.size(); i-- > 0;) {
    Sequence& seq = seqs_.find(plan.seqs_[i])->second;
    for (size_t g = groups_.size(); g-- > 0;) {
      std::vector<PageId>& table = seq.tables[g];
      const AppendPlan::Undo& undo = plan.undo_[i][g];
      table.resize(undo.old_num_pages);
      if (undo.cow_source >= 0) {
        Ref(undo.cow_source);
        table.back() = undo.cow_source;
      }
    }
  }
  pool_.RollBack();
  pending_plan_ = 0;
  plan = AppendPlan();
}

Status PagedKvCache::CheckWritable(uint64_t layer, std::span<const int64_t> slot_mapping) const {
  if (layer >= config_.num_layers) {
    return Status::InvalidArgument("WriteRows: layer " + Str(layer) + " >= num_layers " +
                                   Str(config_.num_layers));
  }
  const uint64_t page_size = config_.page_size;
  const uint64_t num_slots = config_.num_pages * page_size;
  for (size_t t = 0; t < slot_mapping.size(); ++t) {
    const int64_t slot = slot_mapping[t];
    auto where = [&] {
      return "WriteRows: slot_mapping[" + Str(t) + "] = " + std::to_string(slot);
    };
    if (slot < 0 || static_cast<uint64_t>(slot) >= num_slots) {
      return Status::OutOfRange(where() + " is outside the pool's " + Str(num_slots) + " slots");
    }
    const auto page = static_cast<PageId>(static_cast<uint64_t>(slot) / page_size);
    const uint32_t refs = pool_.refcount(page);
    if (refs != 1) {
      return Status::FailedPrecondition(
          where() + " is in page " + std::to_string(page) +
          (refs == 0 ? ", which is free" : ", which " + Str(refs) + " sequences share"));
    }
  }
  return Status::Ok();
}

Status PagedKvCache::WriteRows(uint64_t layer, std::span<const int64_t> slot_mapping,
                               std::span<const float> keys, std::span<const float> values) {
  FOLIO_RETURN_IF_ERROR(CheckWritable(layer, slot_mapping));
  return storage_->WriteRows(slot_of_[layer], slot_mapping, keys, values);
}

Status PagedKvCache::WriteRows(uint64_t layer, std::span<const int64_t> slot_mapping,
                               std::span<const double> keys, std::span<const double> values) {
  FOLIO_RETURN_IF_ERROR(CheckWritable(layer, slot_mapping));
  return storage_->WriteRows(slot_of_[layer], slot_mapping, keys, values);
}

void PagedKvCache::ReadRow(uint64_t layer, KvRole role, SeqId seq, uint64_t pos, uint64_t head,
                           float* out) const {
  const Sequence& s = Find(seq);
  FOLIO_CHECK(layer < config_.num_layers && head < config_.num_kv_heads, "layer=", layer,
              " head=", head);
  FOLIO_CHECK(pos < s.length, "pos=", pos, " length=", s.length);
  const PageId page = s.tables[group_of_[layer]][pos / config_.page_size];
  FOLIO_CHECK(page != -1, "position ", pos, " of layer ", layer, " was released by its window");
  storage_->ReadRow(slot_of_[layer], role, page, pos % config_.page_size, head, out);
}

Result<BatchMetadata> PagedKvCache::BuildBatchMetadata(std::span<const SeqId> seqs,
                                                       const AppendPlan* plan,
                                                       uint64_t group) const {
  if (group >= groups_.size()) {
    return Status::InvalidArgument("BuildBatchMetadata: layer group " + Str(group) +
                                   " of a cache with " + Str(groups_.size()));
  }
  // The plan's requests by sequence: (new tokens, first slot_mapping row).
  std::unordered_map<SeqId, std::pair<uint64_t, uint64_t>> planned;
  if (plan != nullptr) {
    if (plan->id_ == 0 || plan->id_ != pending_plan_) {
      return Status::FailedPrecondition(
          "BuildBatchMetadata: the plan is not pending (committed or aborted)");
    }
    for (size_t i = 0, first = 0; i < plan->seqs_.size(); ++i) {
      planned[plan->seqs_[i]] = {plan->num_new_tokens_[i], first};
      first += plan->num_new_tokens_[i];
    }
  }
  const uint64_t page_size = config_.page_size;
  BatchMetadata m;
  m.batch = seqs.size();
  m.indptr.push_back(0);
  m.query_indptr.push_back(0);
  std::unordered_set<SeqId> seen;
  for (const SeqId id : seqs) {
    const auto it = seqs_.find(id);
    if (it == seqs_.end()) return UnknownSeq("BuildBatchMetadata", id);
    if (!seen.insert(id).second) {
      return Status::InvalidArgument("BuildBatchMetadata: sequence " + Str(id) +
                                     " is listed twice");
    }
    const auto p = planned.find(id);
    const auto [n, first] = p == planned.end() ? std::pair<uint64_t, uint64_t>{0, 0} : p->second;
    const Sequence& seq = it->second;
    // context <= INT32_MAX: PrepareAppend refuses longer sequences.
    const uint64_t context = seq.length + n;
    const uint64_t pages = CeilDiv(context, page_size);
    if (m.indices.size() + pages > kMaxInt32 || m.slot_mapping.size() + n > kMaxInt32) {
      return Status::OutOfRange(
          "BuildBatchMetadata: the batch's pages or new "
          "tokens exceed the int32 indptr range");
    }
    const std::vector<PageId>& table = seq.tables[group];
    m.indices.insert(m.indices.end(), table.begin(),
                     table.begin() + static_cast<std::ptrdiff_t>(pages));
    m.indptr.push_back(static_cast<int32_t>(m.indices.size()));
    m.last_page_len.push_back(
        static_cast<int32_t>(context == 0 ? 0 : (context - 1) % page_size + 1));
    const auto slots =
        plan == nullptr ? std::span<const int64_t>() : plan->slot_mapping(group).subspan(first, n);
    m.slot_mapping.insert(m.slot_mapping.end(), slots.begin(), slots.end());
    m.query_indptr.push_back(static_cast<int32_t>(m.slot_mapping.size()));
  }
  for (const SeqId id : plan == nullptr ? std::span<const SeqId>() : plan->seqs()) {
    if (seen.count(id) == 0) {
      return Status::InvalidArgument(
          "BuildBatchMetadata: the plan appends to "
          "sequence " +
          Str(id) + ", which is not listed");
    }
  }
  return m;
}

PoolStats PagedKvCache::Stats() const {
  const uint64_t page_size = config_.page_size;
  PoolStats st;
  st.pages_total = pool_.num_pages();
  st.pages_used = pool_.num_used();
  st.pages_free = pool_.num_free();
  st.peak_pages_used = pool_.peak_used();
  // Committed slots per physical page: the most any referencing sequence
  // has filled, so a page shared by forks is counted once.
  std::vector<uint64_t> filled(pool_.num_pages(), 0);
  for (const auto& [id, seq] : seqs_) {
    for (const std::vector<PageId>& table : seq.tables) {
      for (uint64_t lp = 1; lp < table.size(); ++lp) {
        if (table[lp - 1] == -1) continue;
        ++st.page_pairs;
        if (table[lp] == table[lp - 1] + 1) ++st.adjacent_page_pairs;
      }
      for (uint64_t lp = 0; lp < table.size(); ++lp) {
        if (table[lp] == -1) continue;
        const uint64_t start = lp * page_size;
        const uint64_t n = seq.length > start ? std::min(page_size, seq.length - start) : 0;
        uint64_t& f = filled[static_cast<size_t>(table[lp])];
        f = std::max(f, n);
      }
    }
  }
  for (size_t page = 0; page < filled.size(); ++page) {
    if (holds_[page] == 0) continue;
    filled[page] = page_size;
  }
  st.pages_held_only = held_only_;
  uint64_t committed = 0;
  for (const uint64_t f : filled) committed += f;
  st.tail_slots_unwritten = st.pages_used * page_size - committed;
  const uint64_t bytes_per_page = BytesPerPage(config_);
  st.kv_bytes_total = bytes_per_page * st.pages_total;
  st.kv_bytes_used = bytes_per_page * st.pages_used;
  return st;
}

}  // namespace folio::kv
