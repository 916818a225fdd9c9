#include "stream/clock.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace liveprof {

bool TscIsInvariant() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool invariant = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) < 0x80000007u) return false;
    __cpuid(0x80000007u, eax, ebx, ecx, edx);
    return (edx & (1u << 8)) != 0;
  }();
  return invariant;
#else
  return false;
#endif
}

ClockMap::ClockMap(size_t max_pairs, double nominal_slope)
    : max_pairs_(max_pairs < 2 ? 2 : max_pairs), slope_(nominal_slope) {}

void ClockMap::AddPair(uint64_t other, uint64_t host) {
  if (!pairs_.empty() && other <= pairs_.back().other) return;  // not after the last: nothing to learn.
  pairs_.push_back({other, host});
  if (pairs_.size() > max_pairs_) pairs_.pop_front();
  Refit();
  AddSegment(other);
}

const ClockMap::Segment& ClockMap::SegmentOf(uint64_t other) const {
  // The last segment starting at or before `other` (the oldest for older ones).
  const auto it = std::upper_bound(segments_.begin(), segments_.end(), other,
                                   [](uint64_t o, const Segment& s) { return o < s.other; });
  return it == segments_.begin() ? segments_.front() : *(it - 1);
}

void ClockMap::AddSegment(uint64_t at) {
  // Until two pairs give a slope, the map is a guess (the nominal slope):
  // nothing is joined to it, the first fitted line starts the chain afresh.
  if (!fitted_) {
    segments_.clear();
    segments_.push_back({at, FitToHost(at), slope_});
    fitted_ = pairs_.size() >= 2;
    return;
  }
  // Joined to what came before at `at`, and aimed at the fitted line one
  // pair interval later (the slope held within a factor 2 of the fit's).
  const uint64_t start = ToHost(at);
  double slope = slope_;
  const uint64_t span = pairs_.size() >= 2 ? at - pairs_[pairs_.size() - 2].other : 0;
  if (span > 0) {
    const double rise = static_cast<double>(static_cast<int64_t>(FitToHost(at + span) - start));
    slope = std::clamp(rise / static_cast<double>(span), slope_ * 0.5, slope_ * 2.0);
  }
  segments_.push_back({at, start, slope});
  if (segments_.size() > kMaxSegments) segments_.pop_front();
}

void ClockMap::Refit() {
  // Work relative to the newest pair: differences are small, so doubles keep
  // sub-ns precision, and conversions near "now" (the common case) are exact
  // up to the fit's own error.
  const Pair& base = pairs_.back();
  const size_t n = pairs_.size();
  double mx = 0, my = 0;
  for (const Pair& p : pairs_) {
    mx += static_cast<double>(static_cast<int64_t>(p.other - base.other));
    my += static_cast<double>(static_cast<int64_t>(p.host - base.host));
  }
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double sxx = 0, sxy = 0;
  for (const Pair& p : pairs_) {
    const double dx = static_cast<double>(static_cast<int64_t>(p.other - base.other)) - mx;
    const double dy = static_cast<double>(static_cast<int64_t>(p.host - base.host)) - my;
    sxx += dx * dx;
    sxy += dx * dy;
  }
  if (n >= 2 && sxx > 0) slope_ = sxy / sxx;
  anchor_other_ = base.other;
  anchor_host_ = base.host;
  offset_ = my - slope_ * mx;  // the fitted line's value at the newest pair.
  double ss = 0;
  for (const Pair& p : pairs_) {
    const double x = static_cast<double>(static_cast<int64_t>(p.other - base.other));
    const double y = static_cast<double>(static_cast<int64_t>(p.host - base.host));
    const double r = y - (offset_ + slope_ * x);
    ss += r * r;
  }
  rms_ = std::sqrt(ss / static_cast<double>(n));
}

TscPair ReadTscPair() {
  TscPair best{};
  uint64_t best_width = ~0ull;
  for (int i = 0; i < 8; ++i) {
    const uint64_t t0 = TscRead();
    const uint64_t ns = HostNowNs();
    const uint64_t t1 = TscRead();
    if (t1 - t0 < best_width) {
      best_width = t1 - t0;
      best = {t0 + (t1 - t0) / 2, ns};
    }
  }
  return best;
}

}  // namespace liveprof
