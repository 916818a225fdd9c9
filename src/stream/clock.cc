#include "stream/clock.h"

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
  pairs_.push_back({other, host});
  if (pairs_.size() > max_pairs_) pairs_.pop_front();
  Refit();
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
